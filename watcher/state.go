package watcher

import (
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"google.golang.org/protobuf/proto"
)

// entry is one delivered key.
type entry struct {
	res *kubemodel.Resource // nil for external configuration
	raw []byte              // the value as stored in etcd
	msg proto.Message       // raw decoded; shared with delivered events, never modified
	rev int64               // etcd ModRevision of raw; 0 when loaded from the mirror
}

// state is what the watcher delivered last: the snapshot of the latest
// DBResync plus the changes delivered since. Keys are relative to their
// prefix. It is owned by the Run goroutine.
type state struct {
	rev    int64 // revision of the snapshot
	layout int   // key layout of the snapshot (0 for the mirror's)
	kube   map[string]*entry
	ext    map[string]*entry
}

func newState(rev int64) *state {
	return &state{rev: rev, kube: make(map[string]*entry), ext: make(map[string]*entry)}
}

func (st *state) part(kind keyKind) map[string]*entry {
	if kind == extKey {
		return st.ext
	}
	return st.kube
}

// dbResync builds a DBResync of the state with fresh maps (the event loop
// keeps and changes them), with an entry for every registered resource.
func (st *state) dbResync(resources []string, local bool) *controller.DBResync {
	ev := controller.NewDBResync()
	ev.Local = local
	for _, name := range resources {
		ev.KubeState[name] = make(controller.KeyValuePairs)
	}
	for key, e := range st.kube {
		ev.KubeState[e.res.Name][key] = e.msg
	}
	for key, e := range st.ext {
		ev.ExternalConfig[key] = e.msg
	}
	return ev
}

// mirrorSnapshot returns the raw content of the state for the mirror.
func (st *state) mirrorSnapshot(kubePrefix, extPrefix string) *mirrorSnapshot {
	snap := &mirrorSnapshot{
		rev:        st.rev,
		kubePrefix: kubePrefix,
		extPrefix:  extPrefix,
		kube:       make(map[string][]byte, len(st.kube)),
		ext:        make(map[string][]byte, len(st.ext)),
	}
	for k, e := range st.kube {
		snap.kube[k] = e.raw
	}
	for k, e := range st.ext {
		snap.ext[k] = e.raw
	}
	return snap
}
