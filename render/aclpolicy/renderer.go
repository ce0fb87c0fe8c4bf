package aclpolicy

import (
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// PodInterfaces tells which VPP interface connects a local pod
// (render/podconn's Handler satisfies it).
type PodInterfaces interface {
	PodInterface(id kubemodel.PodID) (ifName string, ok bool)
}

// Config holds the optional settings of a [Renderer]. The zero value is
// valid.
type Config struct {
	// HostPrefixes returns the addresses whose traffic to this node's pods
	// is always allowed: the node's own (kubelet probes, host-network
	// pods) and the addresses the service renderer gives a pod that
	// reaches itself through a service. Called on the loop's goroutine at
	// every resync and node change. Default: none.
	HostPrefixes func() []netip.Prefix
	// ServicePrefixes are the service frontends (the service CIDRs) whose
	// connections are checked against the client's egress rules after
	// service translation, not before. Default: none.
	ServicePrefixes []netip.Prefix
	// ExitInterfaces returns the logical names of the interfaces on which
	// traffic leaves the node (render/nodeconn's Handler.ExitInterfaces).
	// Default: none.
	ExitInterfaces func() []string
	// Logger receives debug messages. Default: discard.
	Logger *slog.Logger
}

// Renderer renders the effective pod policies of the policy processor
// onto VPP's ACL plugin, as vppmodel ACL and ACLInterface values in the
// event's transaction. It is a [policy.Renderer] (register it with the
// processor) and a [controller.EventHandler] (register it with the loop,
// after the node and pod handlers: it follows the exit interfaces as
// nodes come and go).
//
// Renderer is safe for concurrent use; its methods are meant to be
// called by the loop's goroutine, its getters from anywhere.
type Renderer struct {
	cfg  Config
	pods PodInterfaces
	log  *slog.Logger

	mu    sync.Mutex
	views map[kubemodel.PodID]*policy.PodPolicy
	env   env
	b     builder
	cur   state
	stats Stats
}

// Stats describe what the renderer has rendered.
type Stats struct {
	ACLs        int           `json:"acls"`        // ACLs in VPP's desired state
	Rules       int           `json:"rules"`       // their rules
	Interfaces  int           `json:"interfaces"`  // interfaces with ACLs
	PodsWithACL int           `json:"podsWithACL"` // pods with ACLs
	Writes      uint64        `json:"writes"`      // keys put or deleted since start
	LastRender  time.Duration `json:"lastRender"`  // the last render
}

var (
	_ policy.Renderer         = (*Renderer)(nil)
	_ controller.EventHandler = (*Renderer)(nil)
)

// New returns a renderer. pods names the pods' interfaces.
func New(pods PodInterfaces, cfg Config) (*Renderer, error) {
	if pods == nil {
		return nil, fmt.Errorf("aclpolicy: nil PodInterfaces")
	}
	for _, p := range cfg.ServicePrefixes {
		if !p.IsValid() {
			return nil, fmt.Errorf("aclpolicy: Config.ServicePrefixes: invalid prefix %v", p)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Renderer{cfg: cfg, pods: pods, log: log.With(slog.String("component", "aclpolicy")),
		views: map[kubemodel.PodID]*policy.PodPolicy{}, cur: state{acls: map[string]*vppmodel.ACL{}, keys: map[string]string{}, attach: map[string]*vppmodel.ACLInterface{}}}, nil
}

// RenderPolicy applies the policy processor's changes.
func (r *Renderer) RenderPolicy(ev policy.RenderEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev.Kind {
	case policy.Resync:
		clear(r.views)
		for _, v := range ev.Snapshot {
			r.views[v.Pod] = v
		}
		r.env = r.readEnv()
		r.apply(ev.ResyncTxn, nil, true)
	case policy.Changed:
		for _, c := range ev.Changes {
			if c.New == nil {
				delete(r.views, c.Old.Pod)
			} else {
				r.views[c.New.Pod] = c.New
			}
		}
		r.apply(nil, ev.Txn, false)
	}
	return nil
}

// String returns "aclpolicy".
func (r *Renderer) String() string { return "aclpolicy" }

// HandlesEvent selects resyncs and the events after which the exit
// interfaces or the node's addresses may change (node updates, and
// AddPod and DeletePod, which change which pods have interfaces).
func (r *Renderer) HandlesEvent(ev controller.Event) bool {
	if ev.Method() != controller.Update {
		return true
	}
	switch e := ev.(type) {
	case *controller.AddPod, *controller.DeletePod:
		return true
	case *controller.KubeStateChange:
		return e.Resource == kubemodel.NodeResource
	}
	return ev.GetName() == "Node Update"
}

// Resync re-reads the exit interfaces and puts the whole state.
func (r *Renderer) Resync(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.env = r.readEnv()
	r.apply(txn, nil, true)
	return nil
}

// Update re-reads the exit interfaces and the pods' interfaces and writes
// what changed.
func (r *Renderer) Update(_ controller.Event, txn controller.UpdateOperations) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.env = r.readEnv()
	if n := r.apply(nil, txn, false); n > 0 {
		return fmt.Sprintf("%d ACL key(s)", n), nil
	}
	return "", nil
}

// Revert does nothing: RenderPolicy and Update keep the state of what was
// asked, and the next event renders it again.
func (r *Renderer) Revert(controller.Event) error { return nil }

// Stats returns a snapshot of the counters.
func (r *Renderer) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.ACLs, st.Interfaces = len(r.cur.acls), len(r.cur.attach)
	for _, a := range r.cur.acls {
		st.Rules += len(a.GetRules())
	}
	for iface := range r.cur.attach {
		if !slices.Contains(r.env.exits, iface) {
			st.PodsWithACL++
		}
	}
	return st
}

// State returns the ACLs and interface lists the renderer wants in VPP,
// keyed by their vppmodel keys (for debug views and tests).
func (r *Renderer) State() controller.KeyValuePairs {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.values()
}

func (r *Renderer) readEnv() env {
	var e env
	if r.cfg.HostPrefixes != nil {
		e.hostPrefixes = r.cfg.HostPrefixes()
	}
	e.servicePrefixes = r.cfg.ServicePrefixes
	if r.cfg.ExitInterfaces != nil {
		e.exits = r.cfg.ExitInterfaces()
	}
	return e
}

// apply builds the desired state and writes the difference to the
// previous one into txn (a resync puts everything into rtxn). It returns
// the number of keys written.
func (r *Renderer) apply(rtxn controller.ResyncOperations, txn controller.UpdateOperations, resync bool) int {
	start := time.Now()
	pods := make([]pod, 0, len(r.views))
	for _, id := range slices.SortedFunc(maps.Keys(r.views), kubemodel.PodID.Compare) {
		p := pod{view: r.views[id]}
		p.iface, _ = r.pods.PodInterface(id)
		pods = append(pods, p)
	}
	next := r.b.build(pods, r.env)
	n := 0
	if resync {
		if rtxn != nil {
			for k, v := range next.values() {
				rtxn.Put(k, v)
				n++
			}
		}
	} else if txn != nil {
		n = diff(r.cur, next, txn)
	}
	r.cur = next
	r.stats.Writes += uint64(n)
	r.stats.LastRender = time.Since(start)
	return n
}

// diff writes into txn what turns old into cur and returns the number of
// keys written: the ACLs that are new or whose rules changed (compared by
// their content keys), those that are gone, and the lists that changed.
func diff(old, cur state, txn controller.UpdateOperations) int {
	n := 0
	for name, a := range cur.acls {
		if old.acls[name] == nil || old.keys[name] != cur.keys[name] {
			txn.Put(vppmodel.ACLKey(name), a)
			n++
		}
	}
	for name := range old.acls {
		if cur.acls[name] == nil {
			txn.Delete(vppmodel.ACLKey(name))
			n++
		}
	}
	for iface, a := range cur.attach {
		if o := old.attach[iface]; o == nil || !slices.Equal(o.Input, a.Input) || !slices.Equal(o.Output, a.Output) {
			txn.Put(vppmodel.ACLInterfaceKey(iface), a)
			n++
		}
	}
	for iface := range old.attach {
		if cur.attach[iface] == nil {
			txn.Delete(vppmodel.ACLInterfaceKey(iface))
			n++
		}
	}
	return n
}

func (st state) values() controller.KeyValuePairs {
	out := make(controller.KeyValuePairs, len(st.acls)+len(st.attach))
	for n, a := range st.acls {
		out[vppmodel.ACLKey(n)] = a
	}
	for i, a := range st.attach {
		out[vppmodel.ACLInterfaceKey(i)] = a
	}
	return out
}

// HostPrefixesOf returns a Config.HostPrefixes that reads addrs at each
// call and keeps the valid ones as single-address prefixes (addresses
// that are not known yet are the invalid netip.Addr).
func HostPrefixesOf(addrs func() []netip.Addr) func() []netip.Prefix {
	return func() []netip.Prefix {
		var out []netip.Prefix
		for _, ip := range addrs() {
			if ip.IsValid() {
				out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
		return out
	}
}
