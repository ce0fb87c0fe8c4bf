package vppdriver

import (
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/core"

	vppmemclnt "github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/memclnt"
)

// call is one request with its reply handler. done gets the reply (nil and
// the error on a transport failure is not called: the pass is aborted).
type call struct {
	req  api.Message
	done func(reply api.Message, err error)
}

// client sends requests over one GoVPP connection. Not safe for
// concurrent use: the driver uses it with Driver.mu held.
type client struct {
	conn     *core.Connection
	cfg      Config
	st       api.Stream         // request stream, reused by every pipeline; nil until first use
	stop     context.CancelFunc // ends st's context: a reply missed its deadline
	requests *atomic.Uint64
}

func newClient(conn *core.Connection, cfg Config, requests *atomic.Uint64) *client {
	return &client{conn: conn, cfg: cfg, requests: requests}
}

// close releases the request stream (the connection is the caller's).
func (c *client) close() {
	if c.st != nil {
		c.stop()
		_ = c.st.Close()
		c.st = nil
	}
}

// retvalField caches, per reply type, the index of its int32 Retval field
// (-1 if none).
var retvalField sync.Map // reflect.Type -> int

func retvalOf(m api.Message) int32 {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	t := v.Elem().Type()
	idx, ok := retvalField.Load(t)
	if !ok {
		i := -1
		if f, found := t.FieldByName("Retval"); found && f.Type.Kind() == reflect.Int32 && len(f.Index) == 1 {
			i = f.Index[0]
		}
		retvalField.Store(t, i)
		idx = i
	}
	if idx.(int) < 0 {
		return 0
	}
	return int32(v.Elem().Field(idx.(int)).Int())
}

// stream returns the request stream of the connection. One stream serves
// every pipeline of the connection (a stream costs a GoVPP channel, a
// one-key commit should not pay for it); any error on it is a transport
// failure after which the driver reconnects, so a late reply can never
// be matched to a later request.
func (c *client) stream() (api.Stream, error) {
	if c.st == nil {
		// The stream's context is not a caller's: it ends only when a
		// window of replies misses its deadline (see pipeline), which
		// makes RecvMsg fail. No per-reply timer: GoVPP would start one
		// for every RecvMsg.
		ctx, stop := context.WithCancel(context.Background())
		st, err := c.conn.NewStream(ctx, core.WithRequestSize(c.cfg.Window), core.WithReplySize(c.cfg.Window+1))
		if err != nil {
			stop()
			return nil, fmt.Errorf("%w: new stream: %v", ErrTransport, err)
		}
		c.st, c.stop = st, stop
	}
	return c.st, nil
}

// binapiDirs caches, per message type, the binapi directory of its
// package (see msgDir).
var binapiDirs sync.Map // reflect.Type -> string

// msgDir returns the binapi directory of m's package: GoVPP decodes the
// replies on a stream with the message registry of the directory of the
// last message sent on it, so messages of two directories (GoVPP's stock
// binapi and vppdriver/internal/binapi) must not have replies in flight
// on one stream at once.
func msgDir(m api.Message) string {
	t := reflect.TypeOf(m)
	if d, ok := binapiDirs.Load(t); ok {
		return d.(string)
	}
	d := path.Dir(t.Elem().PkgPath())
	binapiDirs.Store(t, d)
	return d
}

// internalDir is the binapi directory of vppdriver/internal/binapi.
var internalDir = msgDir(&vppmemclnt.ControlPing{})

// pingOf returns the control_ping of the binapi directory dir: a dump must
// end with the ping of its own directory (see msgDir).
func pingOf(dir string) api.Message {
	if dir == internalDir {
		return &vppmemclnt.ControlPing{}
	}
	return &memclnt.ControlPing{}
}

// sameDir returns the length of the run of messages at the start of msgs
// (n of them, the i-th given by msg) that are of one binapi directory
// (see msgDir).
func sameDir(n int, msg func(i int) api.Message) int {
	first := msg(0)
	t, dir := reflect.TypeOf(first), msgDir(first)
	i := 1
	for ; i < n; i++ {
		if m := msg(i); reflect.TypeOf(m) != t && msgDir(m) != dir {
			break
		}
	}
	return i
}

// pipeline sends the calls with up to cfg.Window requests in flight: a
// window of requests is sent, then each reply read is followed by the next
// request, so VPP never waits for the driver. Replies are matched to
// requests in order; every window of cfg.Window replies (and a shorter
// last one) must arrive within cfg.RequestTimeout. Calls of different
// binapi directories are sent one run of a directory after the other
// (see msgDir). It returns a transport error (wrapping ErrTransport) if a
// send or receive fails; VPP retvals are handed to the calls as
// *VPPError.
//
// When ctx ends, no further request is sent, but the replies to the ones
// already sent are still read (under their own deadline), so that the
// driver knows what VPP did; the calls not sent get ctx's error.
func (c *client) pipeline(ctx context.Context, calls []call) error {
	for len(calls) > 0 {
		n := sameDir(len(calls), func(i int) api.Message { return calls[i].req })
		if err := c.pipelineDir(ctx, calls[:n]); err != nil {
			return err
		}
		calls = calls[n:]
	}
	return nil
}

// pipelineDir is pipeline for calls of one binapi directory.
func (c *client) pipelineDir(ctx context.Context, calls []call) error {
	if len(calls) == 0 {
		return nil
	}
	if ctx.Err() != nil {
		notSent(ctx, calls)
		return nil
	}
	st, err := c.stream()
	if err != nil {
		return err
	}
	deadline := time.AfterFunc(c.cfg.RequestTimeout, c.stop)
	defer deadline.Stop()
	sent, limit := 0, len(calls)
	send := func() error {
		if ctx.Err() != nil {
			notSent(ctx, calls[sent:limit])
			limit = sent // stop sending; drain what was sent
			return nil
		}
		req := calls[sent].req
		c.requests.Add(1)
		if err := st.SendMsg(req); err != nil {
			return fmt.Errorf("%w: send %s: %v", ErrTransport, req.GetMessageName(), err)
		}
		sent++
		return nil
	}
	for sent < min(c.cfg.Window, limit) {
		if err := send(); err != nil {
			return err
		}
	}
	for i, cl := range calls {
		if i >= sent {
			break
		}
		rep, err := st.RecvMsg()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				err = fmt.Errorf("no reply within %v", c.cfg.RequestTimeout)
			}
			return fmt.Errorf("%w: reply to %s: %v", ErrTransport, cl.req.GetMessageName(), err)
		}
		if (i+1)%c.cfg.Window == 0 {
			deadline.Reset(c.cfg.RequestTimeout) // the next window
		}
		if sent < limit {
			if err := send(); err != nil {
				return err
			}
		}
		if rv := retvalOf(rep); rv != 0 {
			cl.done(rep, &VPPError{Request: cl.req.GetMessageName(), Retval: rv})
			continue
		}
		cl.done(rep, nil)
	}
	return nil
}

// notSent reports the context error to calls that were not sent.
func notSent(ctx context.Context, calls []call) {
	for _, cl := range calls {
		cl.done(nil, fmt.Errorf("%s not sent: %w", cl.req.GetMessageName(), context.Cause(ctx)))
	}
}

// dumps sends each dump request followed by the control_ping of its
// binapi directory, pipelined on one stream per window (and per run of
// one directory, see msgDir), and returns the details of each. Replies
// are read as they arrive so that the stream buffer never fills.
func (c *client) dumps(ctx context.Context, reqs []api.Message) ([][]api.Message, error) {
	out := make([][]api.Message, 0, len(reqs))
	window := max(1, c.cfg.Window/2)
	for len(reqs) > 0 {
		n := min(window, sameDir(len(reqs), func(i int) api.Message { return reqs[i] }))
		res, err := c.dumpWindow(ctx, reqs[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
		reqs = reqs[n:]
	}
	return out, nil
}

// dumpBatch collects dumps of different kinds to run pipelined together;
// each one's details land, typed, where addDump said.
type dumpBatch struct {
	reqs  []api.Message
	store []func([]api.Message)
}

// addDump adds req to b; after b.run, *into holds its details: D is the
// details message of req (a message of another type, which a dump does
// not send, is skipped).
func addDump[D api.Message](b *dumpBatch, req api.Message, into *[]D) {
	b.reqs = append(b.reqs, req)
	b.store = append(b.store, func(msgs []api.Message) { *into = detailsOf[D](msgs) })
}

// run runs the dumps of b, pipelined.
func (b *dumpBatch) run(ctx context.Context, c *client) error {
	res, err := c.dumps(ctx, b.reqs)
	if err != nil {
		return err
	}
	for i, store := range b.store {
		store(res[i])
	}
	return nil
}

// dumpEach runs dumps whose details are all of type D, pipelined, and
// returns the details of each request, in the order of reqs.
func dumpEach[D api.Message](ctx context.Context, c *client, reqs []api.Message) ([][]D, error) {
	res, err := c.dumps(ctx, reqs)
	if err != nil {
		return nil, err
	}
	out := make([][]D, len(res))
	for i, msgs := range res {
		out[i] = detailsOf[D](msgs)
	}
	return out, nil
}

func detailsOf[D api.Message](msgs []api.Message) []D {
	out := make([]D, 0, len(msgs))
	for _, m := range msgs {
		if x, ok := m.(D); ok {
			out = append(out, x)
		}
	}
	return out
}

func (c *client) dumpWindow(ctx context.Context, reqs []api.Message) ([][]api.Message, error) {
	wctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	st, err := c.conn.NewStream(wctx, core.WithRequestSize(2*len(reqs)), core.WithReplySize(1024))
	if err != nil {
		return nil, fmt.Errorf("%w: new stream: %v", ErrTransport, err)
	}
	defer func() { _ = st.Close() }()
	ping := pingOf(msgDir(reqs[0])) // reqs are of one directory (see dumps)
	for _, r := range reqs {
		c.requests.Add(2)
		if err := st.SendMsg(r); err != nil {
			return nil, fmt.Errorf("%w: send %s: %v", ErrTransport, r.GetMessageName(), err)
		}
		if err := st.SendMsg(ping); err != nil {
			return nil, fmt.Errorf("%w: send control_ping: %v", ErrTransport, err)
		}
	}
	out := make([][]api.Message, len(reqs))
	for i, r := range reqs {
		for {
			m, err := st.RecvMsg()
			if err != nil {
				return nil, fmt.Errorf("%w: dump %s: %v", ErrTransport, r.GetMessageName(), err)
			}
			if m.GetMessageName() == "control_ping_reply" {
				break
			}
			out[i] = append(out[i], m)
		}
	}
	return out, nil
}

// ping sends one control_ping under the request deadline.
func (c *client) ping(ctx context.Context) error {
	var rep api.Message
	err := c.pipeline(ctx, []call{{req: &memclnt.ControlPing{}, done: func(r api.Message, _ error) { rep = r }}})
	if err != nil {
		return err
	}
	if rep == nil {
		return fmt.Errorf("%w: no control_ping reply", ErrTransport)
	}
	return nil
}

// checkCompatibility asks VPP for the IDs of exactly the messages in msgs
// and reports the unknown ones (missing or with another CRC).
func checkCompatibility(conn *core.Connection, msgs []api.Message) error {
	var bad []string
	for _, m := range msgs {
		if _, err := conn.GetMessageID(m); err != nil {
			bad = append(bad, m.GetMessageName()+"_"+m.GetCrcString())
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: VPP lacks or changed %d message(s): %v", ErrIncompatible, len(bad), bad)
	}
	return nil
}
