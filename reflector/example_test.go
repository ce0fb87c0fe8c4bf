package reflector_test

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// The reflector writes every pod, service, endpoints, node and namespace of
// the cluster into etcd under the keys that the watcher reads. client-go's
// fake clientset stands in for the API server; the etcd is a real one,
// in-process.
func Example() {
	dir, _ := os.MkdirTemp("", "reflector-example")
	defer os.RemoveAll(dir)
	srv, err := etcdtest.Start(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	etcd, _ := srv.Client()
	defer etcd.Close()

	kube := fake.NewSimpleClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.PodSpec{NodeName: "node1"},
		Status:     corev1.PodStatus{PodIP: "10.1.1.2", Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	})
	r, err := reflector.New(etcd, reflector.KubernetesResources(kube), reflector.Config{Identity: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	// Wait until the pod is written (an application would run a watcher).
	for s := r.Stats(); s.Resources[kubemodel.PodResource].Objects < 1 || s.Resources[kubemodel.PodPeerResource].Objects < 1; s = r.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	// Pods are stored per node (kubemodel.LayoutNodePods).
	key := reflector.DefaultPrefix + kubemodel.NodePodKey("node1", "default", "web")
	resp, _ := etcd.Get(ctx, key)
	var pod kubemodel.Pod
	_ = proto.Unmarshal(resp.Kvs[0].Value, &pod)
	fmt.Println(key, pod.GetNodeName(), pod.GetIpAddress())

	leader, _ := etcd.Get(ctx, reflector.DefaultElectionPrefix, clientv3.WithPrefix())
	fmt.Println("leader:", string(leader.Kvs[0].Value))
	s := r.Stats()
	fmt.Println("puts:", s.Puts, "pods:", s.Resources[kubemodel.PodResource].Objects, "peer records:", s.Resources[kubemodel.PodPeerResource].Objects)

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// /vswitchkit/k8s/nodepod/node1/default/web node1 10.1.1.2
	// leader: example
	// puts: 2 pods: 1 peer records: 1
	// Run: context canceled
}
