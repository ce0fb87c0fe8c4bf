//go:build !linux

package linuxpod

import (
	"context"
	"errors"
	"net"

	"github.com/vswitchkit/vswitchkit/cniserver"
)

// Linux implements cniserver.Linux; on this system every method fails.
type Linux struct{}

// New returns the netlink implementation.
func New() *Linux { return &Linux{} }

var _ cniserver.Linux = (*Linux)(nil)

var errUnsupported = errors.Join(errors.ErrUnsupported, errors.New("linuxpod: netlink needs Linux"))

// EnsureVeth fails: not on Linux.
func (*Linux) EnsureVeth(context.Context, cniserver.Veth) (net.HardwareAddr, error) {
	return nil, errUnsupported
}

// ConfigureLink fails: not on Linux.
func (*Linux) ConfigureLink(context.Context, string, cniserver.LinkConfig) (net.HardwareAddr, error) {
	return nil, errUnsupported
}

// DeleteLink fails: not on Linux.
func (*Linux) DeleteLink(context.Context, string, string) error { return errUnsupported }

// InspectLink fails: not on Linux.
func (*Linux) InspectLink(context.Context, string, string) (cniserver.LinkState, error) {
	return cniserver.LinkState{}, errUnsupported
}
