package cniservertest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
)

// The Linux contract itself is tested against FakeLinux and the netlink
// implementation together, in package linuxpod. These tests cover what
// only the fake has.

func TestFakeLinuxExtras(t *testing.T) {
	ctx := context.Background()
	f := cniservertest.NewFakeLinux()
	require.NoError(t, f.AddNetns("/run/netns/a"))
	require.Error(t, f.AddNetns("/run/netns/a"), "exists")
	require.Error(t, f.AddNetns(""), "the host namespace always exists")
	assert.Nil(t, f.Links("/run/netns/none"))

	_, err := f.EnsureVeth(ctx, cniserver.Veth{HostName: "vsk1", PeerName: "vsp1", Netns: "/run/netns/a", IfName: "eth0"})
	require.NoError(t, err)
	require.NoError(t, f.AddLink("/run/netns/a", "tap0", "tap"))
	assert.ErrorIs(t, f.AddLink("/run/netns/a", "tap0", "tap"), cniserver.ErrLinkExists)
	assert.ErrorIs(t, f.AddLink("/run/netns/none", "tap0", "tap"), cniserver.ErrNetnsNotFound)

	// Deleting a namespace deletes its veth ends' peers.
	f.DeleteNetns("/run/netns/a")
	assert.Empty(t, f.Links(""))
	assert.Nil(t, f.Links("/run/netns/a"))

	// Fault injection and call counts.
	f.SetFuncs(cniservertest.LinuxFuncs{InspectLink: func(context.Context, string, string) error { return cniservertest.ErrInjected }})
	_, err = f.InspectLink(ctx, "", "x")
	assert.ErrorIs(t, err, cniservertest.ErrInjected)
	assert.Equal(t, 1, f.Calls()["InspectLink"])
	assert.Equal(t, 1, f.Calls()["EnsureVeth"])
}

func TestMemStore(t *testing.T) {
	ctx := context.Background()
	s := cniservertest.NewMemStore()
	a := cniserver.Attachment{ID: cniserver.AttachmentID{ContainerID: "c", IfName: "eth0"}, Network: "n"}
	require.NoError(t, s.PutAttachment(ctx, a))
	list, err := s.ListAttachments(ctx)
	require.NoError(t, err)
	assert.Equal(t, []cniserver.Attachment{a}, list)
	s.SetFuncs(cniservertest.StoreFuncs{DeleteAttachment: func(cniserver.AttachmentID) error { return errors.New("disk on fire") }})
	assert.Error(t, s.DeleteAttachment(ctx, a.ID))
	assert.Len(t, s.Records(), 1, "a failed delete keeps the record")
	s.SetFuncs(cniservertest.StoreFuncs{})
	require.NoError(t, s.DeleteAttachment(ctx, a.ID))
	assert.Empty(t, s.Records())
}
