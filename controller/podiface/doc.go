// Package podiface is the vocabulary shared by the pod server
// ([github.com/vswitchkit/vswitchkit/cniserver]) and the pod handlers
// ([github.com/vswitchkit/vswitchkit/render/podconn]): the kinds of pod
// interface ([Type]) and the annotation that selects one, what the handlers
// report back about an interface and its routes ([Interface], [Route]), and
// the durable record of one pod's attachment ([Attachment]).
//
// The event loop carries these values in [github.com/vswitchkit/vswitchkit/controller.AddPod] without
// interpreting them; nothing here talks to VPP or Linux.
//
// All types are plain values, safe for concurrent use once built.
package podiface
