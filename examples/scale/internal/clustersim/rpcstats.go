package clustersim

import (
	"context"
	"strings"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/stats"
)

// rpcCounters counts what one agent's etcd client sends and receives, as
// a gRPC stats handler: requests (unary calls and stream messages sent),
// bytes on the wire both ways, and the watch events received, by the
// kind of key they name.
type rpcCounters struct {
	calls, msgsOut, msgsIn atomic.Uint64
	bytesOut, bytesIn      atomic.Uint64
	watchResponses         atomic.Uint64
	events                 [numEventKinds]atomic.Uint64
	eventBytes             [numEventKinds]atomic.Uint64
}

// eventKind classifies the key of a watch event.
type eventKind int

const (
	podEvent  eventKind = iota // a full pod (either layout)
	peerEvent                  // a pod peer record
	nodeEvent                  // a nodesync record or a Kubernetes node
	otherEvent
	numEventKinds
)

var eventKindNames = [numEventKinds]string{"pod", "podpeer", "node", "other"}

func classify(key []byte) eventKind {
	k := string(key)
	switch {
	case strings.Contains(k, "/k8s/podpeer/"):
		return peerEvent
	case strings.Contains(k, "/k8s/pod/"), strings.Contains(k, "/k8s/nodepod/"):
		return podEvent
	case strings.Contains(k, "/nodesync/node/"), strings.Contains(k, "/k8s/node/"):
		return nodeEvent
	}
	return otherEvent
}

var _ stats.Handler = (*rpcCounters)(nil)

func (c *rpcCounters) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (c *rpcCounters) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch s := s.(type) {
	case *stats.Begin:
		c.calls.Add(1)
	case *stats.OutPayload:
		c.msgsOut.Add(1)
		c.bytesOut.Add(uint64(s.WireLength))
	case *stats.InPayload:
		c.msgsIn.Add(1)
		c.bytesIn.Add(uint64(s.WireLength))
		if wr, ok := s.Payload.(*pb.WatchResponse); ok {
			c.watchResponses.Add(1)
			for _, ev := range wr.Events {
				k := classify(ev.Kv.Key)
				c.events[k].Add(1)
				c.eventBytes[k].Add(uint64(ev.Size()))
			}
		}
	}
}

func (c *rpcCounters) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (c *rpcCounters) HandleConn(context.Context, stats.ConnStats) {}

// Traffic is a snapshot of rpcCounters (or a sum of them).
type Traffic struct {
	Calls, MsgsOut, MsgsIn uint64
	BytesOut, BytesIn      uint64
	WatchResponses         uint64
	// Events and EventBytes count watch events by the kind of key: pod,
	// podpeer, node, other.
	Events     map[string]uint64
	EventBytes map[string]uint64
}

func (c *rpcCounters) snapshot() Traffic {
	t := Traffic{Calls: c.calls.Load(), MsgsOut: c.msgsOut.Load(), MsgsIn: c.msgsIn.Load(),
		BytesOut: c.bytesOut.Load(), BytesIn: c.bytesIn.Load(), WatchResponses: c.watchResponses.Load(),
		Events: map[string]uint64{}, EventBytes: map[string]uint64{}}
	for k := range numEventKinds {
		t.Events[eventKindNames[k]] = c.events[k].Load()
		t.EventBytes[eventKindNames[k]] = c.eventBytes[k].Load()
	}
	return t
}

// add returns t + o.
func (t Traffic) add(o Traffic) Traffic {
	r := Traffic{Calls: t.Calls + o.Calls, MsgsOut: t.MsgsOut + o.MsgsOut, MsgsIn: t.MsgsIn + o.MsgsIn,
		BytesOut: t.BytesOut + o.BytesOut, BytesIn: t.BytesIn + o.BytesIn, WatchResponses: t.WatchResponses + o.WatchResponses,
		Events: map[string]uint64{}, EventBytes: map[string]uint64{}}
	for _, m := range []Traffic{t, o} {
		for k, v := range m.Events {
			r.Events[k] += v
		}
		for k, v := range m.EventBytes {
			r.EventBytes[k] += v
		}
	}
	return r
}

// sub returns t - o (o taken earlier).
func (t Traffic) sub(o Traffic) Traffic {
	r := Traffic{Calls: t.Calls - o.Calls, MsgsOut: t.MsgsOut - o.MsgsOut, MsgsIn: t.MsgsIn - o.MsgsIn,
		BytesOut: t.BytesOut - o.BytesOut, BytesIn: t.BytesIn - o.BytesIn, WatchResponses: t.WatchResponses - o.WatchResponses,
		Events: map[string]uint64{}, EventBytes: map[string]uint64{}}
	for k, v := range t.Events {
		r.Events[k] = v - o.Events[k]
	}
	for k, v := range t.EventBytes {
		r.EventBytes[k] = v - o.EventBytes[k]
	}
	return r
}

// events returns the number of watch events of every kind.
func (t Traffic) events() uint64 {
	var n uint64
	for _, v := range t.Events {
		n += v
	}
	return n
}
