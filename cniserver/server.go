package cniserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/vswitchkit/vswitchkit/cniserver/internal/wire"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// Server is the agent side of the CNI plugin: it serves the plugin's
// requests on a unix socket, turns ADD into a blocking AddPod event and DEL
// into DeletePod, and configures the pod's side of its interface through
// [Linux]. See the package documentation.
//
// Server is safe for concurrent use. The zero value is not usable; create
// one with [New].
type Server struct {
	loop  controller.EventLoop
	linux Linux
	store Store
	cfg   Config
	log   *slog.Logger

	run   lifecycle.Once
	locks keyedLocks
	stats stats

	// wg counts the goroutines that wait for events and undo abandoned
	// ADDs; Run waits for them.
	wg sync.WaitGroup

	mu      sync.Mutex
	atts    map[AttachmentID]cached // guarded by mu; nil until loaded from the store
	nextGen uint64                  // guarded by mu
}

// cached is an attachment in the server's copy of the store; gen changes
// whenever the attachment is stored again, so GC can tell that an
// attachment it saw was replaced in the meantime.
type cached struct {
	a   Attachment
	gen uint64
}

// New returns a server that pushes AddPod and DeletePod into loop, does the
// Linux work through linux and keeps its attachments in store. It
// validates cfg (errors wrap [ErrInvalidConfig]); it does no I/O and
// starts no goroutine.
func New(loop controller.EventLoop, linux Linux, store Store, cfg Config) (*Server, error) {
	var errs []error
	if loop == nil {
		errs = append(errs, errors.New("cniserver: nil EventLoop"))
	}
	if linux == nil {
		errs = append(errs, errors.New("cniserver: nil Linux"))
	}
	if store == nil {
		errs = append(errs, errors.New("cniserver: nil Store"))
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Server{
		loop:  loop,
		linux: linux,
		store: store,
		cfg:   cfg,
		log:   cfg.Logger.With(slog.String("component", "cniserver")),
		locks: keyedLocks{m: map[AttachmentID]*keyLock{}},
	}, nil
}

// SocketPath returns the path of the socket the server listens on.
func (s *Server) SocketPath() string { return s.cfg.SocketPath }

// Run loads the attachments from the store, listens on the socket (its
// directory is created; a stale socket file is replaced) and serves
// requests until ctx ends. Then it stops accepting connections, lets the
// requests in progress finish (each bounded by Config.RequestTimeout),
// waits for the events they pushed to be answered by the loop (the loop
// answers every event, also when it stops) and for the undoing of
// abandoned ADDs, removes the socket and returns ctx.Err(). It returns
// another error if the store cannot be read or the socket cannot be
// served; it never returns nil. Run may be called once: a second call
// returns an error wrapping [ErrAlreadyRunning].
func (s *Server) Run(ctx context.Context) error {
	if err := s.run.Start("cniserver"); err != nil {
		return err
	}
	if err := s.load(ctx); err != nil {
		return err
	}
	ln, err := listen(s.cfg.SocketPath)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.Path, s.serveHTTP)
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// Requests outlive the cancellation of Run's context: they finish
		// during the shutdown below.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.log.Info("CNI server listening", slog.String("socket", s.cfg.SocketPath))
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		serveErr <- err
		runErr = fmt.Errorf("cniserver: serve %s: %w", s.cfg.SocketPath, err)
	}
	// Shutdown closes the listener, then waits for the requests in
	// progress; each is bounded by RequestTimeout.
	if err := hs.Shutdown(context.WithoutCancel(ctx)); err != nil && runErr == nil {
		runErr = fmt.Errorf("cniserver: shutdown: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
		runErr = fmt.Errorf("cniserver: serve %s: %w", s.cfg.SocketPath, err)
	}
	s.wg.Wait()
	if err := os.Remove(s.cfg.SocketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("cannot remove the socket", slog.String("socket", s.cfg.SocketPath), slog.Any("error", err))
	}
	s.log.Info("CNI server stopped")
	if runErr == nil {
		runErr = ctx.Err() // stopped as asked (CONTRIBUTING R4)
	}
	return runErr
}

// listen creates the socket's directory, removes a stale socket and
// listens. The socket is bound under a temporary name, made accessible to
// its owner (root) only and then renamed, so a client never finds the path
// before the server listens on it with its final mode.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("cniserver: create socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("cniserver: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("cniserver: another server is listening on %s", path)
		}
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	_ = os.Remove(tmp)
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("cniserver: listen: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("cniserver: chmod socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("cniserver: place socket at %s: %w", path, err)
	}
	return ln, nil
}

// serveHTTP decodes one request, handles it and writes the response.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var req wire.Request
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.MaxRequestBytes))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	var resp wire.Response
	if err != nil {
		s.stats.countBad()
		resp.Error = types.NewError(types.ErrDecodingFailure, "cannot decode the request from the plugin", err.Error())
	} else {
		resp = s.handle(r.Context(), &req)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&resp); err != nil {
		s.log.Debug("cannot write response", slog.Any("error", err))
	}
}

// handle serves one decoded request.
func (s *Server) handle(ctx context.Context, wr *wire.Request) wire.Response {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	r, cerr := parseRequest(wr)
	if cerr != nil {
		s.stats.countBad()
		s.log.Debug("bad request", slog.String("command", wr.Command), slog.String("container", wr.ContainerID), slog.Any("error", cerr))
		return wire.Response{Error: cerr}
	}
	var (
		result []byte
		err    error
	)
	switch r.cmd {
	case cmdAdd:
		result, err = s.add(ctx, r)
	case cmdDel:
		err = s.del(ctx, r)
	case cmdCheck:
		err = s.check(ctx, r)
	case cmdGC:
		err = s.gc(ctx, r)
	case cmdStatus:
		err = s.status(ctx)
	}
	took := time.Since(start)
	s.stats.count(r.cmd, err != nil, took)
	log := s.log.With(slog.String("command", r.cmd), slog.String("attachment", r.id.String()), slog.Duration("took", took))
	if err != nil {
		cerr := toCNIError(r.cmd, err)
		log.Debug("request failed", slog.Uint64("code", uint64(cerr.Code)), slog.String("error", cerr.Error()))
		return wire.Response{Error: cerr}
	}
	log.Debug("request done")
	return wire.Response{Result: result}
}

// toCNIError gives err the CNI error code that fits the command.
func toCNIError(cmd string, err error) *types.Error {
	var cerr *types.Error
	switch {
	case errors.As(err, &cerr):
		return cerr
	case errors.Is(err, ErrNetnsNotFound):
		return types.NewError(types.ErrUnknownContainer, "the container's network namespace does not exist", err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return types.NewError(types.ErrTryAgainLater, "timed out waiting for the vswitchkit agent; try again later", err.Error())
	case errors.Is(err, controller.ErrQueueFull), errors.Is(err, controller.ErrStopped):
		return types.NewError(types.ErrTryAgainLater, "the vswitchkit agent is busy or stopping; try again later", err.Error())
	}
	switch cmd {
	case cmdAdd:
		return types.NewError(CodeAddFailed, "the vswitchkit agent could not connect the pod", err.Error())
	case cmdCheck:
		return types.NewError(CodeCheckFailed, "the pod's network is not as the vswitchkit agent configured it", err.Error())
	}
	return types.NewError(types.ErrTryAgainLater, "the vswitchkit agent could not complete "+cmd+"; try again later", err.Error())
}

// status answers STATUS.
func (s *Server) status(ctx context.Context) error {
	if s.cfg.Ready == nil {
		return nil
	}
	err := s.cfg.Ready(ctx)
	if err == nil {
		return nil
	}
	code := uint(50)
	if errors.Is(err, ErrLimitedConnectivity) {
		code = 51
	}
	return types.NewError(code, "the vswitchkit agent is not ready", err.Error())
}

// ---- attachments ----

// Attachments returns a copy of the attachments the server knows, sorted by
// ID, loading them from the store on first use. Pod handlers may call it
// from their Resync (it does not wait for the event loop). It is safe for
// concurrent use.
func (s *Server) Attachments(ctx context.Context) ([]Attachment, error) {
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]Attachment, 0, len(s.atts))
	for _, c := range s.atts {
		out = append(out, c.a.Clone())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Attachment) int {
		return cmp.Or(cmp.Compare(a.ID.ContainerID, b.ID.ContainerID), cmp.Compare(a.ID.IfName, b.ID.IfName))
	})
	return out, nil
}

// PodAttachments returns the completed attachments (Ready) as the pod
// handlers' durable record of the pods on this node
// (podconn.Config.Attachments): a pod handler rebuilds exactly these pods
// on a resync after an agent restart. An attachment whose ADD did not
// complete is left out; the runtime's DEL (or GC) removes it, or a
// repeated ADD completes it. Reading the store is bounded by
// Config.RequestTimeout.
func (s *Server) PodAttachments() ([]podiface.Attachment, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	all, err := s.Attachments(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]podiface.Attachment, 0, len(all))
	for _, a := range all {
		if !a.Ready {
			continue
		}
		out = append(out, podiface.Attachment{
			Pod: a.Pod, ContainerID: a.ID.ContainerID, NetworkNamespace: a.Netns,
			IfName: a.ID.IfName, InterfaceType: a.Type, HostIfName: a.HostIfName,
		})
	}
	return out, nil
}

// acquire loads the attachments if needed, takes the lock of id and
// returns what is recorded for it: the start of every request about one
// attachment. The caller calls unlock once it is done.
func (s *Server) acquire(ctx context.Context, id AttachmentID) (a Attachment, known bool, unlock func(), err error) {
	if err := s.load(ctx); err != nil {
		return Attachment{}, false, nil, err
	}
	if unlock, err = s.locks.lock(ctx, id); err != nil {
		return Attachment{}, false, nil, err
	}
	a, _, known = s.get(id)
	return a, known, unlock, nil
}

func (s *Server) load(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.atts != nil {
		return nil
	}
	list, err := s.store.ListAttachments(ctx)
	if err != nil {
		return fmt.Errorf("cniserver: load attachments: %w", err)
	}
	s.atts = make(map[AttachmentID]cached, len(list))
	for _, a := range list {
		s.nextGen++
		s.atts[a.ID] = cached{a: a, gen: s.nextGen}
	}
	return nil
}

// get returns the attachment id. The caller holds id's lock (or accepts a
// snapshot) and has called load.
func (s *Server) get(id AttachmentID) (Attachment, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.atts[id]
	return c.a.Clone(), c.gen, ok
}

// put stores a durably, then in the copy. The caller holds a.ID's lock.
func (s *Server) put(ctx context.Context, a Attachment) error {
	if err := s.store.PutAttachment(ctx, a.Clone()); err != nil {
		return fmt.Errorf("store attachment %s: %w", a.ID, err)
	}
	s.mu.Lock()
	s.nextGen++
	s.atts[a.ID] = cached{a: a.Clone(), gen: s.nextGen}
	s.mu.Unlock()
	return nil
}

// forget deletes the attachment from the store, then from the copy. The
// caller holds id's lock.
func (s *Server) forget(ctx context.Context, id AttachmentID) error {
	if err := s.store.DeleteAttachment(ctx, id); err != nil {
		return fmt.Errorf("delete attachment %s from the store: %w", id, err)
	}
	s.mu.Lock()
	delete(s.atts, id)
	s.mu.Unlock()
	return nil
}

// ---- events ----

// waiter is an event that its producer can wait for.
type waiter interface {
	controller.Event
	Wait() error
}

// pushAndWait pushes ev and waits for its result or for ctx. When ctx ends
// first it returns ctx's error and a channel that delivers the event's
// result later (the goroutine that waits for it is counted in s.wg);
// otherwise later is nil.
func (s *Server) pushAndWait(ctx context.Context, ev waiter) (later <-chan error, err error) {
	if err := s.loop.PushEvent(ev); err != nil {
		return nil, fmt.Errorf("push %s: %w", ev.GetName(), err)
	}
	done := make(chan error, 1)
	s.wg.Go(func() { done <- ev.Wait() })
	select {
	case err := <-done:
		return nil, err
	case <-ctx.Done():
		return done, ctx.Err()
	}
}

// ---- per-attachment locks ----

// keyedLocks serialises the requests of one attachment. A lock is a
// channel with capacity 1, so waiting for it honours a context; an entry
// lives while someone holds or waits for it, so busy tells whether an
// attachment has a request in progress.
type keyedLocks struct {
	mu sync.Mutex
	m  map[AttachmentID]*keyLock // guarded by mu
}

type keyLock struct {
	ch   chan struct{}
	refs int // guarded by keyedLocks.mu
}

// lock waits for id's lock or for ctx; it returns the function that
// releases the lock.
func (l *keyedLocks) lock(ctx context.Context, id AttachmentID) (unlock func(), err error) {
	l.mu.Lock()
	k := l.m[id]
	if k == nil {
		k = &keyLock{ch: make(chan struct{}, 1)}
		l.m[id] = k
	}
	k.refs++
	l.mu.Unlock()
	select {
	case k.ch <- struct{}{}:
		var once sync.Once
		return func() {
			once.Do(func() {
				<-k.ch
				l.release(id, k)
			})
		}, nil
	case <-ctx.Done():
		l.release(id, k)
		return nil, ctx.Err()
	}
}

func (l *keyedLocks) release(id AttachmentID, k *keyLock) {
	l.mu.Lock()
	k.refs--
	if k.refs == 0 {
		delete(l.m, id)
	}
	l.mu.Unlock()
}

// busy tells whether a request holds or waits for id's lock.
func (l *keyedLocks) busy(id AttachmentID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[id] != nil
}
