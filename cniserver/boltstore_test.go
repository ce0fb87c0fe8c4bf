package cniserver_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

func TestBoltStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", "cni.db")
	s, err := cniserver.OpenBoltStore(path)
	require.NoError(t, err)

	a := cniserver.Attachment{
		ID: cniserver.AttachmentID{ContainerID: "c1", IfName: "eth0"}, Network: "net",
		Pod: kubemodel.PodID{Namespace: "ns", Name: "p"}, Netns: "/run/netns/p", Type: podiface.AfPacket,
		HostIfName: cniserver.HostIfName("c1", "eth0"), HostMAC: "02:00:00:00:00:01",
		Interfaces: []podiface.Interface{{HostName: "eth0", Type: podiface.AfPacket,
			IPAddresses: []string{"10.1.1.2/24"}, MAC: "02:00:00:00:00:02", GatewayMAC: "02:fe:00:00:00:01"}},
		Routes: []podiface.Route{{Network: "0.0.0.0/0", Gateway: "10.1.1.1"}},
		Ready:  true,
	}
	b := cniserver.Attachment{ID: cniserver.AttachmentID{ContainerID: "c2", IfName: "net1"}, Network: "net"}
	require.NoError(t, s.PutAttachment(ctx, a))
	require.NoError(t, s.PutAttachment(ctx, b))
	b.Ready = true
	require.NoError(t, s.PutAttachment(ctx, b), "replace")
	require.NoError(t, s.DeleteAttachment(ctx, cniserver.AttachmentID{ContainerID: "c9", IfName: "eth0"}), "missing")

	// The file is locked while open.
	_, err = cniserver.OpenBoltStore(path)
	assert.ErrorContains(t, err, "locked by another process")
	require.NoError(t, s.Close())

	// Reopened: everything is there.
	s, err = cniserver.OpenBoltStore(path)
	require.NoError(t, err)
	list, err := s.ListAttachments(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []cniserver.Attachment{a, b}, list)
	require.NoError(t, s.DeleteAttachment(ctx, a.ID))
	list, err = s.ListAttachments(ctx)
	require.NoError(t, err)
	assert.Equal(t, []cniserver.Attachment{b}, list)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, s.PutAttachment(cancelled, a), context.Canceled)
	require.NoError(t, s.Close())

	// A record that cannot be decoded is reported, not skipped.
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("cni-attachments")).Put([]byte("c3/eth0"), []byte("{broken"))
	}))
	require.NoError(t, db.Close())
	s, err = cniserver.OpenBoltStore(path)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.ListAttachments(ctx)
	assert.ErrorContains(t, err, `decode attachment "c3/eth0"`)
}
