package policytest_test

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy/policytest"
)

// The upstream model with one policy: the pods of namespace x accept
// connections only from the pods of namespace y, on TCP port 80.
func Example() {
	c := policytest.Model(policytest.ModelOptions{})
	c.PutPolicy(&kubemodel.NetworkPolicy{
		Namespace:   "x",
		Name:        "from-y-on-80",
		PodSelector: &kubemodel.LabelSelector{}, // every pod of x
		Ingress: []*kubemodel.NetworkPolicyIngressRule{{
			From: []*kubemodel.NetworkPolicyPeer{{
				NamespaceSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"ns": "y"}},
			}},
			Ports: []*kubemodel.NetworkPolicyPort{{Protocol: kubemodel.Protocol_TCP, Port: 80}},
		}},
	})

	ya := kubemodel.PodID{Namespace: "y", Name: "a"}
	xb := kubemodel.PodID{Namespace: "x", Name: "b"}
	src := policytest.PodEndpoint(ya, policytest.ModelPodAddr(ya, false))
	dst := policytest.PodEndpoint(xb, policytest.ModelPodAddr(xb, false))
	fmt.Println("y/a -> x/b TCP/80:", c.Allowed(src, dst, kubemodel.Protocol_TCP, 80))
	fmt.Println("y/a -> x/b TCP/81:", c.Allowed(src, dst, kubemodel.Protocol_TCP, 81))
	fmt.Println("x/b -> y/a TCP/81:", c.Allowed(dst, src, kubemodel.Protocol_TCP, 81))
	fmt.Println()

	fmt.Print(c.Matrix([]policytest.Probe{{Protocol: kubemodel.Protocol_TCP, Port: 80}}))
	// Output:
	// y/a -> x/b TCP/80: true
	// y/a -> x/b TCP/81: false
	// x/b -> y/a TCP/81: true
	//
	// TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
	// x/a     X   X   X   .   .   .   .   .   .
	// x/b     X   X   X   .   .   .   .   .   .
	// x/c     X   X   X   .   .   .   .   .   .
	// y/a     .   .   .   .   .   .   .   .   .
	// y/b     .   .   .   .   .   .   .   .   .
	// y/c     .   .   .   .   .   .   .   .   .
	// z/a     X   X   X   .   .   .   .   .   .
	// z/b     X   X   X   .   .   .   .   .   .
	// z/c     X   X   X   .   .   .   .   .   .
}

// A harness for another implementation (a processor and renderer, real
// packets) runs every case and compares its own matrices with the
// evaluator's.
func ExampleCases() {
	for _, cs := range policytest.Cases() {
		if cs.Name != "update-pod-label-into-policy-selector" {
			continue
		}
		want, err := cs.Expect(policytest.ModelOptions{})
		if err != nil {
			panic(err)
		}
		// Here the implementation under test would be fed the model, the
		// policies and then each step, and its matrices compared with
		// policytest.Diff(want[i], got[i]).
		fmt.Println(cs.Name, "follows", fmt.Sprintf("%q:", cs.Upstream))
		for i, s := range cs.Steps {
			fmt.Printf("step %d: %s\n", i+1, s)
		}
		probe := policytest.Probe{Protocol: kubemodel.Protocol_TCP, Port: 80}
		x, y := kubemodel.PodID{Namespace: "x", Name: "a"}, kubemodel.PodID{Namespace: "y", Name: "a"}
		for i, m := range want {
			allowed, _ := m.Allowed(y, x, probe)
			fmt.Printf("stage %d: y/a -> x/a %s allowed: %v\n", i, probe, allowed)
		}
	}
	// Output:
	// update-pod-label-into-policy-selector follows "should deny ingress access to updated pod":
	// step 1: pod x/a labels {pod=a,target=isolated}
	// step 2: pod x/a labels {pod=a}
	// stage 0: y/a -> x/a TCP/80 allowed: true
	// stage 1: y/a -> x/a TCP/80 allowed: false
	// stage 2: y/a -> x/a TCP/80 allowed: true
}
