package controller

import (
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"
)

// RemoteDBSource is the external-configuration source name under which the
// ExternalConfig of DBResync events is kept.
const RemoteDBSource = "remotedb"

// The loop's inputs: the Kubernetes state and the external configuration.
// Both are updated from the event before any handler runs, so whatever the
// handlers do with the event (fail, abort), the next resync, healing
// included, sees the input.

// applyUpdateInput makes the input that an update event carries part of the
// loop's state.
func (l *Loop) applyUpdateInput(ev Event) {
	switch e := ev.(type) {
	case *KubeStateChange:
		kvs := l.kubeState[e.Resource]
		if e.NewValue == nil {
			delete(kvs, e.Key)
			return
		}
		if kvs == nil {
			kvs = make(KeyValuePairs)
			l.kubeState[e.Resource] = kvs
		}
		kvs[e.Key] = e.NewValue
	case *ExternalConfigChange:
		src := l.external[e.Source]
		if src == nil {
			src = make(KeyValuePairs, len(e.UpdatedKVs))
			l.setSource(e.Source, src)
		}
		for k, v := range e.UpdatedKVs {
			if v == nil {
				delete(src, k)
			} else {
				src[k] = v
			}
		}
	}
}

// applyResyncInput replaces the inputs that a resync event carries. It
// reports whether ev is a healing resync after an error.
func (l *Loop) applyResyncInput(ev Event) (healing bool) {
	switch e := ev.(type) {
	case *DBResync:
		if e.KubeState != nil {
			l.kubeState = e.KubeState
		} else {
			l.kubeState = NewKubeStateData()
		}
		ext := e.ExternalConfig
		if ext == nil {
			ext = make(KeyValuePairs)
		}
		l.setSource(RemoteDBSource, ext)
	case *ExternalConfigResync:
		ext := e.ExternalConfig
		if ext == nil {
			ext = make(KeyValuePairs)
		}
		l.setSource(e.Source, ext)
	case *HealingResync:
		return e.Type == AfterError
	}
	return false
}

// setSource replaces (kvs non-nil) or removes (kvs nil) an external source.
func (l *Loop) setSource(name string, kvs KeyValuePairs) {
	_, known := l.external[name]
	if kvs == nil {
		if known {
			delete(l.external, name)
			l.sources = slices.DeleteFunc(l.sources, func(s string) bool { return s == name })
		}
		return
	}
	l.external[name] = kvs
	if !known {
		l.sources = append(l.sources, name)
		sort.Strings(l.sources)
	}
}

// effective returns the value of key after merging external configuration
// over the handlers' desired state: external sources win over handlers, and
// among sources the one whose name sorts last wins.
func (l *Loop) effective(key string) proto.Message {
	for i := len(l.sources) - 1; i >= 0; i-- {
		if v, ok := l.external[l.sources[i]][key]; ok && v != nil {
			return v
		}
	}
	return l.internal[key]
}

// merged returns the complete desired state: internal overlaid with every
// external source in ascending name order.
func (l *Loop) merged() KeyValuePairs {
	out := make(KeyValuePairs, len(l.internal))
	for k, v := range l.internal {
		out[k] = v
	}
	for _, s := range l.sources {
		for k, v := range l.external[s] {
			if v != nil {
				out[k] = v
			}
		}
	}
	return out
}
