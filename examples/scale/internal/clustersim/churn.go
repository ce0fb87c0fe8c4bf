package clustersim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/synth"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// Pod changes of the churn, by kind.
const (
	churnAdd      = "add"      // a new pod: IPAM allocates its address (etcd store), then the pod and its peer record are written
	churnDelete   = "delete"   // a pod goes: pod and peer record deleted, then IPAM releases the address
	churnAnnotate = "annotate" // a change of the full pod alone (an annotation): the peer record stays
	churnRelabel  = "relabel"  // a label change: the pod and its peer record
)

// churnStats counts what a group's churn did.
type churnStats struct {
	Changes  map[string]int
	Errors   int
	LastErr  string
	Duration time.Duration
}

var marshal = proto.MarshalOptions{Deterministic: true}

// simPod is a pod the churn made.
type simPod struct {
	pod *corev1.Pod
}

// podValues returns the keys and encoded values of pod's records in the
// given layout, as the reflector writes them: the full pod and, when it
// has one, its peer record.
func podValues(layout int, p *corev1.Pod) (podKey string, podVal []byte, peerKey string, peerVal []byte, err error) {
	m, err := reflector.ConvertPod(p)
	if err != nil {
		return "", nil, "", nil, err
	}
	if podVal, err = marshal.Marshal(m); err != nil {
		return "", nil, "", nil, err
	}
	podKey = kubemodel.EtcdKey("", podStorageKey(layout, p.Spec.NodeName, p.Namespace, p.Name))
	peer, err := reflector.ConvertPodPeer(p)
	if err != nil {
		return "", nil, "", nil, err
	}
	peerKey = kubemodel.EtcdKey("", kubemodel.PodPeerKey(p.Namespace, p.Name))
	if peer != nil {
		if peerVal, err = marshal.Marshal(peer); err != nil {
			return "", nil, "", nil, err
		}
	}
	return podKey, podVal, peerKey, peerVal, nil
}

// podStorageKey is the key of a pod in the given layout.
func podStorageKey(layout int, node, ns, name string) string {
	if layout == kubemodel.LayoutNodePods {
		return kubemodel.NodePodKey(node, ns, name)
	}
	return kubemodel.PodKey(ns, name)
}

// newPod returns a running pod on node (node ID id) with address ip.
func newPod(ns, name, node string, id uint32, ip netip.Addr, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"app": app, "pod-template-hash": "5d8f7c9b4"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: synth.TargetPort, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}},
			HostIP: synth.MgmtIP(id).String()},
	}
}

// churn makes rate pod changes per second for d across the group's
// nodes, as the pods' nodes and the reflector do: IPAM of the pod's agent
// allocates and releases the address through its etcd store, and a
// reflector-like writer (one etcd client of its own) writes the pod and
// its peer record in one transaction when their encoded values changed.
func (g *group) churn(ctx context.Context, rate float64, d time.Duration) (churnStats, error) {
	st := churnStats{Changes: map[string]int{}}
	g.mu.Lock()
	agents := g.agents
	g.mu.Unlock()
	if len(agents) == 0 || rate <= 0 {
		return st, nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: g.cfg.Endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return st, err
	}
	defer cli.Close()
	rng := rand.New(rand.NewPCG(g.cfg.Seed, uint64(g.cfg.First)))
	var (
		mu      sync.Mutex
		pods    = map[int][]*simPod{} // by agent index in agents
		seq     int
		errs    atomic.Int64
		lastErr atomic.Pointer[string]
		wg      sync.WaitGroup
		sem     = make(chan struct{}, 16)
	)
	fail := func(err error) {
		errs.Add(1)
		s := err.Error()
		lastErr.Store(&s)
	}
	write := func(p *corev1.Pod, withPod, withPeer bool) error {
		pk, pv, rk, rv, err := podValues(g.cfg.Layout, p)
		if err != nil {
			return err
		}
		var ops []clientv3.Op
		if withPod {
			ops = append(ops, clientv3.OpPut(pk, string(pv)))
		}
		if withPeer && rv != nil {
			ops = append(ops, clientv3.OpPut(rk, string(rv)))
		}
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = cli.Txn(tctx).Then(ops...).Commit()
		return err
	}
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	next := start
	for time.Since(start) < d {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
		next = next.Add(interval)
		ai := rng.IntN(len(agents))
		a := agents[ai]
		op := churnAdd
		mu.Lock()
		var victim *simPod
		if n := len(pods[ai]); n > 0 {
			switch r := rng.IntN(100); {
			case r < 35:
			case r < 70:
				op = churnDelete
			case r < 85:
				op = churnAnnotate
			default:
				op = churnRelabel
			}
			if op != churnAdd {
				k := rng.IntN(n)
				victim = pods[ai][k]
				if op == churnDelete {
					pods[ai] = append(pods[ai][:k], pods[ai][k+1:]...)
				}
			}
		}
		seq++
		n := seq
		var changed *corev1.Pod // the pod after the change, never modified again
		switch op {
		case churnDelete:
			changed = victim.pod
		case churnAnnotate:
			changed = victim.pod.DeepCopy()
			changed.Annotations = map[string]string{"churn/revision": strconv.Itoa(n)}
			victim.pod = changed
		case churnRelabel:
			changed = victim.pod.DeepCopy()
			changed.Labels["version"] = "v" + strconv.Itoa(n)
			victim.pod = changed
		}
		mu.Unlock()
		st.Changes[op]++
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			switch op {
			case churnAdd:
				id := kubemodel.PodID{Namespace: "churn", Name: "churn-" + a.name + "-" + strconv.Itoa(n)}
				ip, err := a.ipam.AllocatePodIP(id, "", "")
				if err != nil {
					fail(fmt.Errorf("allocate %s: %w", id, err))
					return
				}
				addr, _ := netip.AddrFromSlice(ip.To4())
				p := newPod(id.Namespace, id.Name, a.name, a.ns.GetNodeID(), addr, "churn-"+strconv.Itoa(n%97))
				if err := write(p, true, true); err != nil {
					fail(err)
					return
				}
				mu.Lock()
				pods[ai] = append(pods[ai], &simPod{pod: p})
				mu.Unlock()
			case churnDelete:
				p := changed
				pk, _, rk, _, err := podValues(g.cfg.Layout, p)
				if err == nil {
					tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					_, err = cli.Txn(tctx).Then(clientv3.OpDelete(pk), clientv3.OpDelete(rk)).Commit()
					cancel()
				}
				if err != nil {
					fail(err)
					return
				}
				if err := a.ipam.ReleasePodIP(kubemodel.PodID{Namespace: p.Namespace, Name: p.Name}); err != nil {
					fail(err)
				}
			case churnAnnotate:
				if err := write(changed, true, false); err != nil {
					fail(err)
				}
			case churnRelabel:
				if err := write(changed, true, true); err != nil {
					fail(err)
				}
			}
		})
	}
	wg.Wait()
	st.Duration = time.Since(start)
	st.Errors = int(errs.Load())
	if p := lastErr.Load(); p != nil {
		st.LastErr = *p
	}
	return st, nil
}
