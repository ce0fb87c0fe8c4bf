package boltstore_test

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/boltstore"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		crashChild(path) // never returns
	}
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, path string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path, boltstore.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func alloc(ns, name, addr string) ipam.Allocation {
	return ipam.Allocation{Pod: kubemodel.PodID{Namespace: ns, Name: name}, Addr: netip.MustParseAddr(addr)}
}

// The Store contract and the crash test of ipamtest. A crash here closes
// the file (what the kernel does when the process dies: committed
// transactions are on disk, the lock is released); TestCrashKill kills a
// real process.
func TestStoreConformance(t *testing.T) {
	pathOf := map[ipam.Store]string{}
	ipamtest.TestStore(t, ipamtest.StoreHarness{
		Open: func(t *testing.T) ipam.Store {
			p := filepath.Join(t.TempDir(), "ipam.db")
			s := open(t, p)
			pathOf[s] = p
			return s
		},
		Crash: func(t *testing.T, s ipam.Store) ipam.Store {
			require.NoError(t, s.(*boltstore.Store).Close())
			return open(t, pathOf[s])
		},
	})
}

func TestLayout(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	require.NoError(t, s.PutAllocation(ctx, alloc("default", "web-0", "10.1.5.2")))
	require.NoError(t, s.PutAllocation(ctx, alloc("kube-system", "dns", "fd00::5")))
	held := ipam.Allocation{Pod: kubemodel.PodID{Namespace: "default", Name: "held"}, Addr: netip.MustParseAddr("10.1.5.4"), ContainerID: "3f2a9c0e51d4"}
	require.NoError(t, s.PutAllocation(ctx, held))
	require.Error(t, s.PutAllocation(ctx, alloc("a/b", "c", "10.0.0.1")), "'/' in a namespace")
	require.Error(t, s.PutAllocation(ctx, ipam.Allocation{Pod: kubemodel.PodID{Namespace: "a", Name: "b"}}), "invalid address")
	require.NoError(t, s.Close())
	require.Error(t, s.PutAllocation(ctx, alloc("default", "web-1", "10.1.5.3")), "closed")

	// The file as another program sees it; add an undecodable record and
	// a bucket of someone else.
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("ipam"))
		assert.Equal(t, "10.1.5.2", string(b.Get([]byte("default/web-0"))))
		assert.Equal(t, "fd00::5", string(b.Get([]byte("kube-system/dns"))))
		assert.Equal(t, "10.1.5.4 3f2a9c0e51d4", string(b.Get([]byte("default/held"))), "address, space, holder")
		require.NoError(t, b.Put([]byte("garbage"), []byte("10.1.5.9")))
		require.NoError(t, b.Put([]byte("ns/empty"), []byte("10.1.5.8 ")))
		// written before holders were recorded: still read
		require.NoError(t, b.Put([]byte("ns/old-format"), []byte("10.1.5.7")))
		other, err := tx.CreateBucket([]byte("other"))
		require.NoError(t, err)
		return other.Put([]byte("default/x"), []byte("10.1.5.7"))
	}))
	require.NoError(t, db.Close())

	s = open(t, path)
	got, err := s.ListAllocations(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []ipam.Allocation{alloc("default", "web-0", "10.1.5.2"), alloc("kube-system", "dns", "fd00::5"), held, alloc("ns", "old-format", "10.1.5.7")}, got)

	// Another bucket of the same file is another store.
	require.NoError(t, s.Close())
	s2, err := boltstore.Open(path, boltstore.Config{Bucket: "other"})
	require.NoError(t, err)
	defer s2.Close()
	got, err = s2.ListAllocations(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ipam.Allocation{alloc("default", "x", "10.1.5.7")}, got)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s2.PutAllocation(cancelled, alloc("a", "b", "10.0.0.1")), context.Canceled)
	require.ErrorIs(t, s2.DeleteAllocation(cancelled, kubemodel.PodID{Namespace: "a", Name: "b"}), context.Canceled)
	_, err = s2.ListAllocations(cancelled)
	require.ErrorIs(t, err, context.Canceled)
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipam.db")
	s := open(t, path)
	_, err := boltstore.Open(path, boltstore.Config{LockTimeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, boltstore.ErrLocked)
	require.NoError(t, s.Close())
	s2, err := boltstore.Open(path, boltstore.Config{})
	require.NoError(t, err, "the lock is released by Close")
	require.NoError(t, s2.Close())

	_, err = boltstore.Open(path, boltstore.Config{LockTimeout: -1})
	require.ErrorContains(t, err, "LockTimeout")
	_, err = boltstore.Open(filepath.Join(dir, "missing", "ipam.db"), boltstore.Config{})
	require.Error(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk"), []byte("not a bbolt file, not at all"), 0o600))
	_, err = boltstore.Open(filepath.Join(dir, "junk"), boltstore.Config{})
	require.Error(t, err)
}

const childEnv = "BOLTSTORE_CRASH_CHILD"

// crashChild is the agent killed by TestCrashKill: it allocates addresses
// for five pods that the Kubernetes state does not show yet, prints them,
// and waits to be killed, holding the file.
func crashChild(path string) {
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	s, err := boltstore.Open(path, boltstore.Config{})
	if err != nil {
		fail(err)
	}
	i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: s})
	if err != nil {
		fail(err)
	}
	if err := i.Resync(controller.NewDBResync(), staleState(), 1, nil); err != nil {
		fail(err)
	}
	for n := range 5 {
		a, err := i.AllocatePodAddr(kubemodel.PodID{Namespace: "default", Name: fmt.Sprint("unreflected-", n)})
		if err != nil {
			fail(err)
		}
		fmt.Println(a)
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}

// staleState is the Kubernetes state both agents see: one old pod.
func staleState() controller.KubeStateData {
	ks := controller.NewKubeStateData()
	ks[kubemodel.PodResource] = controller.KeyValuePairs{
		kubemodel.PodKey("default", "old"): &kubemodel.Pod{Namespace: "default", Name: "old", IpAddress: "10.1.5.2"},
	}
	return ks
}

// The crash test with a real crash: an agent process allocates addresses
// for pods not yet in the Kubernetes state and is killed (SIGKILL); the
// restarted agent (this process) allocates more: no duplicates. While the
// first agent runs, a second one cannot open the file.
func TestCrashKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	held := map[netip.Addr]bool{netip.MustParseAddr("10.1.5.2"): true}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		a, err := netip.ParseAddr(sc.Text())
		require.NoError(t, err, "child: %s", sc.Text())
		require.False(t, held[a], "child handed out %s twice", a)
		held[a] = true
	}
	require.Len(t, held, 6)

	_, err = boltstore.Open(path, boltstore.Config{LockTimeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, boltstore.ErrLocked, "a second agent while the first runs")

	require.NoError(t, cmd.Process.Kill())
	killed = true
	require.ErrorContains(t, cmd.Wait(), "killed")

	s := open(t, path)
	i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: s})
	require.NoError(t, err)
	require.NoError(t, i.Resync(controller.NewDBResync(), staleState(), 1, nil))
	for n := range 5 {
		a, err := i.AllocatePodAddr(kubemodel.PodID{Namespace: "default", Name: fmt.Sprint("after-", n)})
		require.NoError(t, err)
		require.False(t, held[a], "duplicate %s after the crash", a)
		held[a] = true
	}
	got := []string{}
	for _, a := range i.Allocations() {
		got = append(got, a.Pod.Name+"="+a.Addr.String())
	}
	assert.Equal(t, "old=10.1.5.2 unreflected-0=10.1.5.3 unreflected-1=10.1.5.4 unreflected-2=10.1.5.5 unreflected-3=10.1.5.6 unreflected-4=10.1.5.7 "+
		"after-0=10.1.5.8 after-1=10.1.5.9 after-2=10.1.5.10 after-3=10.1.5.11 after-4=10.1.5.12", strings.Join(got, " "))
}
