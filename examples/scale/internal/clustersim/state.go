package clustersim

import (
	"context"
	"fmt"
	"net/netip"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/synth"
)

// rawKV is a key and its encoded value.
type rawKV struct {
	key string
	val []byte
}

// clusterState calls yield with the Kubernetes state of a cluster of n
// nodes as the reflector writes it in the given layout: namespaces (one
// per 50 nodes), the nodes, podsPerNode pods per node with their peer
// records, services per node services (every tenth with two ports, one
// in twenty NodePort, one in fifty LoadBalancer) with 10 endpoints each
// spread over the nodes.
func clusterState(n, podsPerNode int, servicesPerNode float64, layout int, yield func(rawKV) error) error {
	put := func(key string, m proto.Message) error {
		raw, err := marshal.Marshal(m)
		if err != nil {
			return err
		}
		return yield(rawKV{kubemodel.EtcdKey("", key), raw})
	}
	if layout == kubemodel.LayoutNodePods {
		if err := yield(rawKV{kubemodel.EtcdKey("", kubemodel.LayoutKey), kubemodel.FormatLayout(layout)}); err != nil {
			return err
		}
	}
	namespaces := max(1, n/50)
	for k := range namespaces {
		if err := put(kubemodel.NamespaceKey(synth.Namespace(k)), &kubemodel.Namespace{Name: synth.Namespace(k)}); err != nil {
			return err
		}
	}
	for i := range n {
		if err := put(kubemodel.NodeKey(NodeName(i)), synth.KubeNode(NodeName(i), uint32(i+1))); err != nil {
			return err
		}
	}
	podIP := func(i, j int) netip.Addr { return synth.PodIP(i, j) }
	for i := range n {
		for j := range podsPerNode {
			ns := synth.Namespace((i + j) % namespaces)
			p := newPod(ns, fmt.Sprintf("pod-%05d-%02d", i, j), NodeName(i), uint32(i+1), podIP(i, j), fmt.Sprintf("app-%d", (i*podsPerNode+j)%97))
			pk, pv, rk, rv, err := podValues(layout, p)
			if err != nil {
				return err
			}
			if err := yield(rawKV{pk, pv}); err != nil {
				return err
			}
			if rv != nil {
				if err := yield(rawKV{rk, rv}); err != nil {
					return err
				}
			}
		}
	}
	services := int(servicesPerNode * float64(n))
	for s := range services {
		ns, name := synth.Namespace(s%namespaces), fmt.Sprintf("svc-%05d", s)
		if err := put(kubemodel.ServiceKey(ns, name), synth.ServiceObject(ns, name, synth.ClusterIP(s), synth.Kind(s), synth.TwoPorts(s), s)); err != nil {
			return err
		}
		var addrs []synth.EndpointAddress
		for k := range 10 {
			node := (s*10 + k) % n
			j := (s + k) % max(1, podsPerNode)
			addrs = append(addrs, synth.EndpointAddress{IP: podIP(node, j), Node: NodeName(node), PodNamespace: ns, PodName: fmt.Sprintf("pod-%05d-%02d", node, j)})
		}
		if err := put(kubemodel.EndpointsKey(ns, name), synth.EndpointsObject(ns, name, synth.TwoPorts(s), addrs)); err != nil {
			return err
		}
	}
	return nil
}

// writeState writes the cluster state in transactions of 128 keys, a few
// at once, and returns the number of keys.
func writeState(ctx context.Context, cli *clientv3.Client, n, podsPerNode int, servicesPerNode float64, layout int, progress func(int)) (int, error) {
	const batch, inflight = 128, 4
	sem := make(chan struct{}, inflight)
	errs := make(chan error, inflight)
	var ops []clientv3.Op
	total := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		select {
		case err := <-errs:
			return err
		case sem <- struct{}{}:
		}
		b := ops
		ops = nil
		go func() {
			_, err := cli.Txn(ctx).Then(b...).Commit()
			if err != nil {
				errs <- err
			} else if progress != nil {
				progress(len(b))
			}
			<-sem
		}()
		return nil
	}
	err := clusterState(n, podsPerNode, servicesPerNode, layout, func(kv rawKV) error {
		ops = append(ops, clientv3.OpPut(kv.key, string(kv.val)))
		total++
		if len(ops) == batch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	for range inflight {
		sem <- struct{}{}
	}
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return total, err
}
