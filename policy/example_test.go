package policy_test

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
)

// A processor on node n1 with one policy: the pods labelled app=db accept
// TCP 5432 from the pods labelled app=web of the same namespace. A
// renderer prints each local pod's effective policy.
func Example() {
	p, _ := policy.New(policy.Config{NodeName: "n1"})
	_ = p.RegisterRenderer(policy.RendererFunc(func(ev policy.RenderEvent) error {
		for _, v := range ev.Snapshot {
			fmt.Println(v.Pod, "ingress isolated:", v.Ingress.Isolated)
			for _, r := range v.Ingress.Rules {
				fmt.Println("  allow from", r)
			}
		}
		return nil
	}))
	ksd := controller.KubeStateData{
		kubemodel.PodResource: {
			kubemodel.PodKey("shop", "db-0"): &kubemodel.Pod{Namespace: "shop", Name: "db-0", NodeName: "n1",
				IpAddresses: []string{"10.1.1.2"}, Labels: map[string]string{"app": "db"}},
		},
		kubemodel.PodPeerResource: {
			kubemodel.PodPeerKey("shop", "web-0"): &kubemodel.PodPeer{Namespace: "shop", Name: "web-0", NodeName: "n2",
				IpAddresses: []string{"10.1.2.5"}, Labels: map[string]string{"app": "web"}},
			kubemodel.PodPeerKey("shop", "web-1"): &kubemodel.PodPeer{Namespace: "shop", Name: "web-1", NodeName: "n2",
				IpAddresses: []string{"10.1.2.4"}, Labels: map[string]string{"app": "web"}},
		},
		kubemodel.NetworkPolicyResource: {
			kubemodel.NetworkPolicyKey("shop", "db"): &kubemodel.NetworkPolicy{Namespace: "shop", Name: "db",
				PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
				Ingress: []*kubemodel.NetworkPolicyIngressRule{{
					From:  []*kubemodel.NetworkPolicyPeer{{PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
					Ports: []*kubemodel.NetworkPolicyPort{{Port: 5432}},
				}}},
		},
	}
	// In an agent the loop calls the handler; here it is called directly.
	_ = p.Handler().Resync(controller.NewDBResync(), ksd, 1, nil)
	// Output:
	// shop/db-0 ingress isolated: true
	//   allow from 10.1.2.4/31 tcp/5432
}
