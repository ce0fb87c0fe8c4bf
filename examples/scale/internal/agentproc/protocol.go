// Package agentproc runs the measured agent of the scale envelope in a
// process of its own, so that its memory is the agent's alone: the scale
// program re-executes itself with [EnvConfig] set, and [Main] runs one full
// agent (agent, the daemon's wiring) on the VPP stand-in
// with simulated Linux, against the runner's etcd.
//
// The two processes talk over two pipes: the runner sends [Command]s as
// JSON lines on file descriptor 3 of the child, the child sends [Report]s
// as JSON lines on file descriptor 4. Timestamps are wall-clock Unix
// nanoseconds, comparable between the two processes of one machine.
package agentproc

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/af_packet"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/vxlan"
)

// EnvConfig is the environment variable that holds the child's [Config]
// (JSON); a process started with it set runs [Main].
const EnvConfig = "VSWITCHKIT_SCALE_AGENT"

// File descriptors of the child's pipes (ExtraFiles 0 and 1).
const (
	CommandFD = 3
	ReportFD  = 4
)

// IsChild tells whether this process was started as the agent child.
func IsChild() bool { return os.Getenv(EnvConfig) != "" }

// Mode is what the child does.
type Mode string

// Modes: Prepare starts the agent so that the runner adds the measured
// node's pods through its pod server (it reports Ready once the agent
// serves pods); Measure starts it again on the same state and reports the
// start-up, then serves probes.
const (
	Prepare Mode = "prepare"
	Measure Mode = "measure"
)

// Config configures the child.
type Config struct {
	Mode      Mode
	Etcd      string // etcd client URL
	NodeName  string
	StateDir  string
	CNISocket string
	// ProfilePrefix, when set, starts the names of the profiles the child
	// writes: <prefix>cpu-startup.pprof (start to programmed),
	// <prefix>cpu-changes.pprof (the incremental changes) and
	// <prefix>heap.pprof (after start-up) and <prefix>heap-end.pprof (at
	// the end: its allocations minus heap.pprof's are the changes').
	ProfilePrefix string
	// Stable is how long the agent must stay fully programmed, with no
	// event processed, for the start-up to count as done. Default 300ms.
	Stable time.Duration
	// Debug logs the agent at debug level to stderr (default: warnings).
	Debug bool
}

// Command is sent by the runner.
type Command struct {
	// Op is "probe" (report when the VPP stand-in has received every
	// request in Want, answered with "armed" then "seen"), "stats",
	// "events" (how long the loop took for the events processed since
	// the last "events") or "quit".
	Op   string
	ID   int
	Want []string
}

// Report is sent by the child.
type Report struct {
	// Type is "ready" (Prepare: the agent serves pods), "programmed"
	// (Measure: start-up done; Startup is set), "armed" and "seen" (a
	// probe; At is when its last request reached the stand-in), "stats"
	// (Stats is set), "error" (Err is set; the child exits).
	Type    string
	ID      int      `json:",omitempty"`
	At      int64    `json:",omitempty"`
	Startup *Startup `json:",omitempty"`
	Stats   *Stats   `json:",omitempty"`
	Events  []Events `json:",omitempty"`
	Err     string   `json:",omitempty"`
}

// Startup describes the agent's start-up. Times are Unix nanoseconds.
type Startup struct {
	Main int64 // the child's main began
	// ResyncStart is when the loop began the start-up resync: the
	// watcher had read, decoded and delivered the etcd snapshot.
	ResyncStart int64
	// ResyncDone is when its handlers were done: the agent had computed
	// its desired state (then the driver applies it to VPP).
	ResyncDone int64
	// Programmed is when every VPP key was configured (and stayed so).
	Programmed int64
	Stats
}

// Stats are counters and gauges of the child.
type Stats struct {
	VPPRequests    uint64 // requests the VPP stand-in handled
	DriverRequests uint64 // requests the driver sent (dumps and pings included)
	Keys           int    // keys desired in the driver
	Configured     int
	Pending        int
	Failed         int
	Events         uint64 // events the loop processed
	EventErrors    uint64 // of which failed
	// Policies, PolicyPeers and PolicyIsolated are the policy processor's
	// valid NetworkPolicies, pods known as peers (its peer index) and
	// local pods isolated for ingress.
	Policies, PolicyPeers, PolicyIsolated int
	Memory
	LiveHeap uint64 // heap after a forced GC, bytes
	HeapSys  uint64 // heap memory obtained from the OS, bytes
}

// Events summarizes the processing of the events of one kind by the
// agent's loop (from the loop's history).
type Events struct {
	Kind         string // event name; for Kubernetes changes with the operation and resource
	N            int
	P50, P99     time.Duration
	Max          time.Duration
	SlowHandler  string        // the handler that took longest in the slowest event
	SlowDuration time.Duration // how long it took
}

// Probe signatures: the requests the runner waits for. They name what the
// request does, so that the runner can tell the stand-in holds a change.

// RouteAdd and RouteDel are the signatures of a route add or delete.
func RouteAdd(p netip.Prefix) string { return "route-add " + p.String() }

// RouteDel is the signature of a route delete.
func RouteDel(p netip.Prefix) string { return "route-del " + p.String() }

// VxlanAdd is the signature of the creation of a VXLAN tunnel to dst.
func VxlanAdd(dst netip.Addr) string { return "vxlan-add " + dst.String() }

// VxlanDel is the signature of the deletion of a VXLAN tunnel to dst.
func VxlanDel(dst netip.Addr) string { return "vxlan-del " + dst.String() }

// LBAdd is the signature of the creation of a load-balanced NAT44 mapping
// of frontend ext.
func LBAdd(ext netip.AddrPort) string { return "lb-add " + ext.String() }

// LBDel is the signature of the deletion of a load-balanced mapping.
func LBDel(ext netip.AddrPort) string { return "lb-del " + ext.String() }

// LBLocalAdd is the signature of a backend added to the load-balanced
// mapping of frontend ext.
func LBLocalAdd(ext, local netip.AddrPort) string {
	return "lb-local-add " + ext.String() + " " + local.String()
}

// LBLocalDel is the signature of a backend removed from a mapping.
func LBLocalDel(ext, local netip.AddrPort) string {
	return "lb-local-del " + ext.String() + " " + local.String()
}

func addDel(add bool, what string) string {
	if add {
		return what + "-add"
	}
	return what + "-del"
}

func addrPort(a [4]byte, port uint16) string {
	return netip.AddrPortFrom(netip.AddrFrom4(a), port).String()
}

// signature returns the probe signature of a request, "" for requests no
// probe waits for.
func signature(m api.Message) string {
	switch r := m.(type) {
	case *ip.IPRouteAddDel:
		return addDel(r.IsAdd, "route") + " " + r.Route.Prefix.String()
	case *vxlan.VxlanAddDelTunnelV3:
		return addDel(r.IsAdd, "vxlan") + " " + r.DstAddress.String()
	case *nat44_ed.Nat44AddDelLbStaticMapping:
		return addDel(r.IsAdd, "lb") + " " + addrPort(r.ExternalAddr, r.ExternalPort)
	case *nat44_ed.Nat44LbStaticMappingAddDelLocal:
		return addDel(r.IsAdd, "lb-local") + " " + addrPort(r.ExternalAddr, r.ExternalPort) + " " + addrPort(r.Local.Addr, r.Local.Port)
	case *nat44_ed.Nat44AddDelStaticMappingV2:
		return addDel(r.IsAdd, "static") + " " + addrPort(r.ExternalIPAddress, r.ExternalPort)
	case *af_packet.AfPacketCreateV3:
		return "afpacket-add " + r.HostIfName
	}
	return ""
}

// Memory is what /proc/<pid>/status says about a process's memory, in
// bytes.
type Memory struct {
	RSS     uint64 // VmRSS: resident now
	PeakRSS uint64 // VmHWM: the peak of VmRSS
	RSSAnon uint64 // RssAnon: of RSS, anonymous memory (the Go heap, stacks)
	RSSFile uint64 // RssFile: of RSS, file pages (mapped files: bbolt)
}

// ReadMemory reads the Memory of this process.
func ReadMemory() Memory {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Memory{}
	}
	return ParseStatus(raw)
}

// ParseStatus returns the Memory in the content of /proc/<pid>/status.
func ParseStatus(raw []byte) Memory {
	var m Memory
	fields := map[string]*uint64{"VmRSS": &m.RSS, "VmHWM": &m.PeakRSS, "RssAnon": &m.RSSAnon, "RssFile": &m.RSSFile}
	for line := range strings.Lines(string(raw)) {
		name, value, ok := strings.Cut(line, ":")
		dst := fields[name]
		if !ok || dst == nil {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err == nil {
			*dst = kb << 10
		}
	}
	return m
}

// EncodeConfig returns the environment entry that starts a child with cfg.
func EncodeConfig(cfg Config) (string, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("agent child config: %w", err)
	}
	return EnvConfig + "=" + string(raw), nil
}
