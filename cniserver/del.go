package cniserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/vswitchkit/vswitchkit/controller"
)

// del serves DEL: idempotent, an unknown attachment is a success.
func (s *Server) del(ctx context.Context, r *request) error {
	a, ok, unlock, err := s.acquire(ctx, r.id)
	if err != nil {
		return err
	}
	defer unlock()
	if !ok {
		// Nothing recorded: no AddPod was ever pushed for it. A veth can
		// only be left if the store lost its record; its name tells.
		return s.linux.DeleteLink(ctx, "", HostIfName(r.id.ContainerID, r.id.IfName))
	}
	return s.remove(ctx, a)
}

// remove disconnects a recorded attachment: DeletePod (handlers treat an
// unknown pod as done), the veth, then the record. On error the record
// stays for the next DEL or GC. The caller holds a.ID's lock.
func (s *Server) remove(ctx context.Context, a Attachment) error {
	ev := controller.NewDeletePodEvent(a.Pod, a.ID.ContainerID)
	if _, err := s.pushAndWait(ctx, ev); err != nil {
		return fmt.Errorf("DeletePod %s (container %s): %w", a.Pod, a.ID.ContainerID, err)
	}
	if err := s.removeLinux(ctx, a); err != nil {
		return err
	}
	return s.forget(ctx, a.ID)
}

// removeLinux deletes the veth of the attachment (both ends: the pod end
// goes with the host end, wherever it is). A tap is VPP's to delete, and
// goes with the namespace anyway.
func (s *Server) removeLinux(ctx context.Context, a Attachment) error {
	if a.HostIfName == "" {
		return nil
	}
	if err := s.linux.DeleteLink(ctx, "", a.HostIfName); err != nil {
		return fmt.Errorf("delete veth %s: %w", a.HostIfName, err)
	}
	return nil
}

// gc serves GC: it removes the attachments of the network that the
// runtime no longer lists. Attachments with a request in progress when GC
// starts, or stored again since, are left alone. It goes on after an error
// and returns all of them.
func (s *Server) gc(ctx context.Context, r *request) error {
	if err := s.load(ctx); err != nil {
		return err
	}
	valid := make(map[AttachmentID]bool, len(r.conf.ValidAttachments))
	for _, v := range r.conf.ValidAttachments {
		valid[AttachmentID{ContainerID: v.ContainerID, IfName: v.IfName}] = true
	}
	type candidate struct {
		id  AttachmentID
		gen uint64
	}
	var stale []candidate
	s.mu.Lock()
	for id, c := range s.atts {
		if c.a.Network == r.conf.Name && !valid[id] && !s.locks.busy(id) {
			stale = append(stale, candidate{id, c.gen})
		}
	}
	s.mu.Unlock()

	var errs []error
	for _, c := range stale {
		unlock, err := s.locks.lock(ctx, c.id)
		if err != nil {
			errs = append(errs, err)
			break
		}
		a, gen, ok := s.get(c.id)
		if ok && gen == c.gen {
			s.log.Info("GC removes a stale attachment", slog.String("attachment", c.id.String()), slog.String("pod", a.Pod.String()))
			if err := s.remove(ctx, a); err != nil {
				errs = append(errs, fmt.Errorf("attachment %s: %w", c.id, err))
			}
		}
		unlock()
	}
	if err := errors.Join(errs...); err != nil {
		return types.NewError(types.ErrTryAgainLater, "GC could not remove every stale attachment", err.Error())
	}
	return nil
}
