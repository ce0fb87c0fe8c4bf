package nodesync_test

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/nodesync/internal/etcdtest"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
)

// runOnce runs node name against db until it has its ID and returns it;
// the state is saved to ls.
func runOnce(t *testing.T, db testDB, name string, ls nodesync.LocalState) uint32 {
	t.Helper()
	ns, err := nodesync.New(name, db, &controllertest.EventRecorder{}, nodesync.Config{LocalState: ls})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ns.Run(ctx) }()
	<-ns.Ready()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	return ns.GetNodeID()
}

func TestOfflineStart(t *testing.T) {
	const delay = 5 * time.Second
	tests := []struct {
		name string
		// meanwhile changes the cluster after node-a stopped, before it
		// restarts with the DB unreachable.
		meanwhile func(t *testing.T, db *nodesynctest.MemDB)
		// wantErr is what Run returns once the DB is back (nil: it goes on).
		wantErr error
	}{
		{"claim still ours: confirmed", func(*testing.T, *nodesynctest.MemDB) {}, nil},
		{"released meanwhile", func(t *testing.T, db *nodesynctest.MemDB) {
			_, err := nodesync.ReleaseNode(context.Background(), db, "", "node-a")
			require.NoError(t, err)
		}, nodesync.ErrNodeReleased},
		{"released and the ID taken by another node", func(t *testing.T, db *nodesynctest.MemDB) {
			_, err := nodesync.ReleaseNode(context.Background(), db, "", "node-a")
			require.NoError(t, err)
			require.Equal(t, uint32(2), runOnce(t, db, "node-c", nil))
		}, nodesync.ErrNodeIDLost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := nodesynctest.NewMemDB()
				seedNode(t, db, 1, "node-b", vppIP("192.168.16.2", "192.168.16.0/24"))
				ls := nodesync.NewStateFile(filepath.Join(t.TempDir(), "nodesync.json"))
				require.Equal(t, uint32(2), runOnce(t, db, "node-a", ls))
				tc.meanwhile(t, db)

				db.SetConnected(false)
				h := launchHarness(t, db, "node-a", nodesync.Config{LocalState: ls, LocalFallbackDelay: delay}, &controllertest.EventRecorder{})
				start := time.Now()
				h.waitReady()
				require.Equal(t, delay, time.Since(start), "starts from local state after LocalFallbackDelay")
				require.Equal(t, uint32(2), h.ns.GetNodeID())
				h.resync(1)
				require.Equal(t, nodesync.IPsWithNetworks{ipNet("192.168.16.2", "192.168.16.0/24")},
					h.ns.GetAllNodes()["node-b"].VppIPAddresses, "other nodes come from the saved records")

				db.SetConnected(true)
				if tc.wantErr != nil {
					err := <-h.done
					h.done <- err
					require.ErrorIs(t, err, tc.wantErr)
					st, ok, lerr := ls.Load()
					require.NoError(t, lerr)
					require.True(t, ok)
					require.Zero(t, st.NodeID, "the lost ID is forgotten locally")
					return
				}
				h.pump(1) // the records read once the ID is confirmed
				putRecord(t, db, &nodesyncmodel.VswitchNode{Id: 3, Name: "node-d"})
				got := h.pump(1)
				require.Len(t, got, 1, "the watch runs after the confirmation")
				require.Equal(t, "node-d", got[0].NodeName)
			})
		})
	}
}

// TestLocalStateNotUsedWhileDBAnswers: a node whose saved ID was released
// while it was down, restarting with the DB reachable, gets a new ID and
// never uses the old one.
func TestLocalStateNotUsedWhileDBAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := nodesynctest.NewMemDB()
		ls := nodesync.NewStateFile(filepath.Join(t.TempDir(), "nodesync.json"))
		require.Equal(t, uint32(1), runOnce(t, db, "node-a", ls))
		_, err := nodesync.ReleaseNode(context.Background(), db, "", "node-a")
		require.NoError(t, err)
		require.Equal(t, uint32(1), runOnce(t, db, "node-c", nil))

		h := startHarness(t, db, "node-a", nodesync.Config{LocalState: ls})
		require.Equal(t, uint32(2), h.ns.GetNodeID())
		st, _, err := ls.Load()
		require.NoError(t, err)
		require.Equal(t, uint32(2), st.NodeID, "the new ID is saved")
	})
}

// TestNotReadyErrorSaysWhy: the start-up resync that times out names what
// is missing.
func TestNotReadyErrorSaysWhy(t *testing.T) {
	tests := []struct {
		name  string
		ls    func(t *testing.T) nodesync.LocalState
		wants []string
	}{
		{"no local state", func(*testing.T) nodesync.LocalState { return nil },
			[]string{"database not connected since", "no local state (Config.LocalState is nil)"}},
		{"empty local state", func(t *testing.T) nodesync.LocalState {
			return nodesync.NewStateFile(filepath.Join(t.TempDir(), "state.json"))
		}, []string{"database not connected since", "nothing saved in local state", "state.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := nodesynctest.NewDisconnectedMemDB()
				h := launchHarness(t, db, "node-a", nodesync.Config{LocalState: tc.ls(t), StartupTimeout: time.Minute}, &controllertest.EventRecorder{})
				err := h.ns.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn())
				require.ErrorIs(t, err, nodesync.ErrNotReady)
				for _, w := range tc.wants {
					require.Contains(t, err.Error(), w)
				}
				require.NotContains(t, err.Error(), "is Run running")
			})
		})
	}
	t.Run("Run not called", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ns, err := nodesync.New("node-a", nodesynctest.NewMemDB(), &controllertest.EventRecorder{}, nodesync.Config{StartupTimeout: time.Second})
			require.NoError(t, err)
			err = ns.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn())
			require.ErrorContains(t, err, "Run has not been called")
		})
	})
}

// TestOfflineStartEtcd: the node restarts while etcd is down, starts with
// its saved ID, and confirms it when etcd is back.
func TestOfflineStartEtcd(t *testing.T) {
	srv := etcdtest.StartServer(t)
	endpoint := "http://" + srv.Endpoint()
	ls := nodesync.NewStateFile(filepath.Join(t.TempDir(), "nodesync.json"))
	newDB := func() *etcddb.DB {
		db, err := etcddb.New(etcddb.Config{Endpoints: []string{endpoint}, DialTimeout: 200 * time.Millisecond, RetryBackoff: 10 * time.Millisecond})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- db.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return db
	}
	db := newDB()
	connected := make(chan struct{})
	db.OnConnect(func() error { close(connected); return nil })
	<-connected
	seedNode(t, etcdDBAdapter{db}, 1, "node-b", vppIP("192.168.16.2", "192.168.16.0/24"))
	require.Equal(t, uint32(2), runOnce(t, etcdDBAdapter{db}, "node-a", ls))

	srv.Stop()
	db2 := newDB() // connects only once etcd is back
	h := launchHarness(t, etcdDBAdapter{db2}, "node-a", nodesync.Config{LocalState: ls, LocalFallbackDelay: 100 * time.Millisecond}, &controllertest.EventRecorder{})
	h.waitReady()
	require.Equal(t, uint32(2), h.ns.GetNodeID())
	h.resync(1)
	require.Equal(t, uint32(1), h.ns.GetAllNodes()["node-b"].ID)

	require.NoError(t, srv.Restart())
	h.pump(1) // the records read once the ID is confirmed
	select {
	case err := <-h.done:
		t.Fatalf("Run ended after the confirmation: %v", err)
	default:
	}
	_, err := db.NewBroker(testPrefix).Put(context.Background(), "node/node-d", &nodesyncmodel.VswitchNode{Id: 3, Name: "node-d"})
	require.NoError(t, err)
	got := h.pump(1)
	require.Len(t, got, 1)
	require.Equal(t, "node-d", got[0].NodeName)
}

// etcdDBAdapter lets an etcddb.DB made by etcddb.New serve as a testDB for
// the helpers that only write through the nodesync interfaces.
type etcdDBAdapter struct{ *etcddb.DB }

func (etcdDBAdapter) PutRaw(string, []byte) int64 { panic("not supported") }
func (etcdDBAdapter) Keys() []string              { panic("not supported") }
func (etcdDBAdapter) Value(string) ([]byte, bool) { panic("not supported") }
