package vppsim

import (
	"log/slog"
	"reflect"
	"sync"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/acl"
	"go.fd.io/govpp/binapi/af_packet"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/l2"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/binapi/vlib"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
)

// Config configures a [VPP]. The zero value is valid.
type Config struct {
	// Logger receives warnings about undecodable requests; New adds
	// component=vppsim. Default: discard.
	Logger *slog.Logger

	// HostInterfaces names the Linux interfaces that af_packet_create_v3 can
	// attach to (others give -71). Default: none.
	HostInterfaces []string

	// HostInterfaceExists, if set, is asked about names that are not in
	// HostInterfaces, for host interfaces that come and go (for example
	// the veth ends of pods made by a simulated pod server). It is called
	// with the stand-in's lock held and must not call into the stand-in.
	HostInterfaceExists func(name string) bool

	// VhostNet makes tap_create_v3 work; without it tap creation returns
	// -11, as on a host without /dev/vhost-net.
	VhostNet bool

	// Namespaces lists the Linux network namespaces that tap_create_v3 can
	// put the host side of a tap into, by name (as under /var/run/netns)
	// or path; another namespace gives -12, as VPP does when it cannot
	// open it (checked before /dev/vhost-net). Default: none.
	Namespaces []string

	// NICs names hardware interfaces (as VPP names DPDK NICs, e.g.
	// "GigabitEthernet0/8/0") that the VPP has from its start and after
	// every restart: admin down, without addresses, device type "dpdk".
	// They cannot be created or deleted over the API. Default: none.
	NICs []string

	// Hide lists message names (e.g. "ip_route_add_del") that this VPP does
	// not know, to simulate a VPP that lacks them or has changed their CRC.
	Hide []string

	// PID is reported in control_ping_reply. Default: 4242.
	PID uint32
}

// Interceptor is consulted for every request before the VPP handles it.
// Returning intercepted=true makes the VPP answer with the request's reply
// message carrying retval, without changing any state. It runs on an
// adapter goroutine, without VPP locks held, so it may call [VPP.Restart].
// Dump requests are not intercepted.
type Interceptor func(req api.Message) (retval int32, intercepted bool)

// Stats counts what the VPP processed.
type Stats struct {
	Requests uint64 // requests handled since New
	Writes   uint64 // of which requests that may change state (not dumps, pings, gets)
	Restarts uint64
}

// VPP is the in-memory VPP. It is safe for concurrent use.
type VPP struct {
	cfg     Config
	log     *slog.Logger                 // cfg.Logger with component=vppsim
	entries []msgEntry                   // by message ID - idBase
	byName  map[string]map[string]uint16 // name -> crc -> ID

	mu          sync.Mutex // guards the fields below
	st          *state
	gen         uint64
	stopped     bool
	interceptor Interceptor
	stats       Stats
}

type msgEntry struct {
	name     string // message name
	replyID  uint16 // ID of the reply (or details) message
	readOnly bool
	newMsg   func() api.Message
	newReply func() api.Message // for requests with a single reply
	handle   func(*state, api.Message) []api.Message
}

const idBase = 16

// New returns a running VPP with a fresh state (only local0).
func New(cfg Config) *VPP {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PID == 0 {
		cfg.PID = 4242
	}
	v := &VPP{cfg: cfg, log: cfg.Logger.With(slog.String("component", "vppsim")), byName: map[string]map[string]uint16{}}
	v.st = newState(&v.cfg)
	hidden := map[string]bool{}
	for _, h := range cfg.Hide {
		hidden[h] = true
	}
	for _, d := range handlers() {
		for _, m := range append([]api.Message{d.req, d.reply}, d.more...) {
			if m == nil || hidden[m.GetMessageName()] {
				continue
			}
			name, crc := m.GetMessageName(), m.GetCrcString()
			if _, dup := v.byName[name][crc]; dup {
				continue
			}
			e := msgEntry{name: name, newMsg: factory(m)}
			if m == d.req {
				e.handle = d.handle
				switch m.GetMessageName() {
				case "control_ping", "sw_interface_get_table", "nat44_show_running_config", "get_next_index",
					"acl_plugin_get_version", "acl_plugin_get_conn_table_max_entries", "cnat_get_snat_addresses":
					e.readOnly = true
				default:
					e.readOnly = !d.single
				}
				if d.single {
					e.newReply = factory(d.reply)
				}
			}
			if v.byName[name] == nil {
				v.byName[name] = map[string]uint16{}
			}
			v.byName[name][crc] = uint16(idBase + len(v.entries))
			v.entries = append(v.entries, e)
		}
	}
	for _, d := range handlers() {
		if id, ok := v.msgID(d.req.GetMessageName(), d.req.GetCrcString()); ok {
			v.entries[id-idBase].replyID, _ = v.msgID(d.reply.GetMessageName(), d.reply.GetCrcString())
		}
	}
	return v
}

func factory(m api.Message) func() api.Message {
	t := reflect.TypeOf(m).Elem()
	return func() api.Message { return reflect.New(t).Interface().(api.Message) }
}

func setRetval(m api.Message, retval int32) {
	f := reflect.ValueOf(m).Elem().FieldByName("Retval")
	if f.IsValid() && f.CanSet() && f.Kind() == reflect.Int32 {
		f.SetInt(int64(retval))
	}
}

// NewAdapter returns a new, disconnected GoVPP adapter for this VPP; pass
// it to core.Connect or core.AsyncConnect.
func (v *VPP) NewAdapter() *Adapter { return &Adapter{vpp: v} }

// SupportedMessages returns the request messages the stand-in answers.
func SupportedMessages() []api.Message {
	var out []api.Message
	for _, d := range handlers() {
		out = append(out, d.req)
	}
	return out
}

func (v *VPP) msgID(name, crc string) (uint16, bool) {
	id, ok := v.byName[name][crc]
	return id, ok
}

func (v *VPP) entryByID(id uint16) (msgEntry, bool) {
	i := int(id) - idBase
	if i < 0 || i >= len(v.entries) {
		return msgEntry{}, false
	}
	return v.entries[i], true
}

func (v *VPP) running() (uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gen, !v.stopped
}

func (v *VPP) alive(gen uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.stopped && v.gen == gen
}

// Restart simulates a VPP restart: all configuration is lost and every
// connection is dropped (pending replies are never sent, SendMsg fails with
// [ErrBrokenPipe] until the client disconnects and connects again).
func (v *VPP) Restart() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen++
	v.stopped = false
	v.st = newState(&v.cfg)
	v.stats.Restarts++
}

// Stop simulates a VPP that died: connections drop and Connect fails until
// [VPP.Start]. State is lost.
func (v *VPP) Stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen++
	v.stopped = true
	v.st = newState(&v.cfg)
	v.stats.Restarts++
}

// Start starts a stopped VPP with a fresh state. It does nothing if the VPP
// is running.
func (v *VPP) Start() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stopped = false
}

// SetInterceptor installs (or, with nil, removes) a request interceptor.
func (v *VPP) SetInterceptor(f Interceptor) {
	v.mu.Lock()
	v.interceptor = f
	v.mu.Unlock()
}

// Stats returns counters.
func (v *VPP) Stats() Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stats
}

// handlerDef describes one supported request.
type handlerDef struct {
	req, reply api.Message
	single     bool // reply is the one reply (not details of a dump)
	handle     func(*state, api.Message) []api.Message
	// more are further messages the handler answers with (the final reply
	// of a *_get request after its details).
	more []api.Message
}

func handlers() []handlerDef {
	return []handlerDef{
		{&memclnt.ControlPing{}, &memclnt.ControlPingReply{}, true, (*state).controlPing, nil},
		{&interfaces.CreateLoopback{}, &interfaces.CreateLoopbackReply{}, true, (*state).createLoopback, nil},
		{&interfaces.DeleteLoopback{}, &interfaces.DeleteLoopbackReply{}, true, (*state).deleteLoopback, nil},
		{&interfaces.SwInterfaceSetFlags{}, &interfaces.SwInterfaceSetFlagsReply{}, true, (*state).setFlags, nil},
		{&interfaces.SwInterfaceAddDelAddress{}, &interfaces.SwInterfaceAddDelAddressReply{}, true, (*state).addDelAddress, nil},
		{&interfaces.SwInterfaceTagAddDel{}, &interfaces.SwInterfaceTagAddDelReply{}, true, (*state).tagAddDel, nil},
		{&interfaces.SwInterfaceSetTable{}, &interfaces.SwInterfaceSetTableReply{}, true, (*state).setTable, nil},
		{&interfaces.SwInterfaceGetTable{}, &interfaces.SwInterfaceGetTableReply{}, true, (*state).getTable, nil},
		{&interfaces.SwInterfaceDump{}, &interfaces.SwInterfaceDetails{}, false, (*state).ifDump, nil},
		{&ip.IPTableAddDel{}, &ip.IPTableAddDelReply{}, true, (*state).tableAddDel, nil},
		{&ip.IPTableDump{}, &ip.IPTableDetails{}, false, (*state).tableDump, nil},
		{&ip.IPRouteAddDel{}, &ip.IPRouteAddDelReply{}, true, (*state).routeAddDel, nil},
		{&ip.IPRouteDump{}, &ip.IPRouteDetails{}, false, (*state).routeDump, nil},
		{&ip.IPAddressDump{}, &ip.IPAddressDetails{}, false, (*state).addressDump, nil},
		{&af_packet.AfPacketCreateV3{}, &af_packet.AfPacketCreateV3Reply{}, true, (*state).afPacketCreate, nil},
		{&af_packet.AfPacketDelete{}, &af_packet.AfPacketDeleteReply{}, true, (*state).afPacketDelete, nil},
		{&af_packet.AfPacketDump{}, &af_packet.AfPacketDetails{}, false, (*state).afPacketDump, nil},
		{&tapv2.TapCreateV3{}, &tapv2.TapCreateV3Reply{}, true, (*state).tapCreate, nil},
		{&tapv2.TapDeleteV2{}, &tapv2.TapDeleteV2Reply{}, true, (*state).tapDelete, nil},
		{&tapv2.SwInterfaceTapV2Dump{}, &tapv2.SwInterfaceTapV2Details{}, false, (*state).tapDump, nil},
		{&memif.MemifSocketFilenameAddDelV2{}, &memif.MemifSocketFilenameAddDelV2Reply{}, true, (*state).memifSocketAddDel, nil},
		{&memif.MemifSocketFilenameDump{}, &memif.MemifSocketFilenameDetails{}, false, (*state).memifSocketDump, nil},
		{&memif.MemifCreateV2{}, &memif.MemifCreateV2Reply{}, true, (*state).memifCreate, nil},
		{&memif.MemifDelete{}, &memif.MemifDeleteReply{}, true, (*state).memifDelete, nil},
		{&memif.MemifDump{}, &memif.MemifDetails{}, false, (*state).memifDump, nil},
		{&vlib.AddNodeNext{}, &vlib.AddNodeNextReply{}, true, (*state).addNodeNext, nil},
		{&vxlan.VxlanAddDelTunnelV3{}, &vxlan.VxlanAddDelTunnelV3Reply{}, true, (*state).vxlanAddDel, nil},
		{&vxlan.VxlanTunnelV2Dump{}, &vxlan.VxlanTunnelV2Details{}, false, (*state).vxlanDump, nil},
		{&l2.BridgeDomainAddDelV2{}, &l2.BridgeDomainAddDelV2Reply{}, true, (*state).bdAddDel, nil},
		{&l2.BridgeDomainDump{}, &l2.BridgeDomainDetails{}, false, (*state).bdDump, nil},
		{&l2.SwInterfaceSetL2Bridge{}, &l2.SwInterfaceSetL2BridgeReply{}, true, (*state).setL2Bridge, nil},
		{&nat44_ed.Nat44EdPluginEnableDisable{}, &nat44_ed.Nat44EdPluginEnableDisableReply{}, true, (*state).natEnableDisable, nil},
		{&nat44_ed.Nat44ShowRunningConfig{}, &nat44_ed.Nat44ShowRunningConfigReply{}, true, (*state).natRunningConfig, nil},
		{&nat44_ed.Nat44InterfaceAddDelFeature{}, &nat44_ed.Nat44InterfaceAddDelFeatureReply{}, true, (*state).natFeature, nil},
		{&nat44_ed.Nat44InterfaceDump{}, &nat44_ed.Nat44InterfaceDetails{}, false, (*state).natInterfaceDump, nil},
		{&nat44_ed.Nat44AddDelAddressRange{}, &nat44_ed.Nat44AddDelAddressRangeReply{}, true, (*state).natAddressRange, nil},
		{&nat44_ed.Nat44AddressDump{}, &nat44_ed.Nat44AddressDetails{}, false, (*state).natAddressDump, nil},
		{&nat44_ed.Nat44AddDelStaticMappingV2{}, &nat44_ed.Nat44AddDelStaticMappingV2Reply{}, true, (*state).natStaticAddDel, nil},
		{&nat44_ed.Nat44StaticMappingDump{}, &nat44_ed.Nat44StaticMappingDetails{}, false, (*state).natStaticDump, nil},
		{&nat44_ed.Nat44AddDelIdentityMapping{}, &nat44_ed.Nat44AddDelIdentityMappingReply{}, true, (*state).natIdentityAddDel, nil},
		{&nat44_ed.Nat44IdentityMappingDump{}, &nat44_ed.Nat44IdentityMappingDetails{}, false, (*state).natIdentityDump, nil},
		{&nat44_ed.Nat44AddDelLbStaticMapping{}, &nat44_ed.Nat44AddDelLbStaticMappingReply{}, true, (*state).natLBAddDel, nil},
		{&nat44_ed.Nat44LbStaticMappingAddDelLocal{}, &nat44_ed.Nat44LbStaticMappingAddDelLocalReply{}, true, (*state).natLBLocal, nil},
		{&nat44_ed.Nat44LbStaticMappingDump{}, &nat44_ed.Nat44LbStaticMappingDetails{}, false, (*state).natLBDump, nil},
		{&nat44_ed.Nat44ForwardingEnableDisable{}, &nat44_ed.Nat44ForwardingEnableDisableReply{}, true, (*state).natForwarding, nil},
		{&nat44_ed.Nat44EdAddDelOutputInterface{}, &nat44_ed.Nat44EdAddDelOutputInterfaceReply{}, true, (*state).natOutputAddDel, nil},
		{&nat44_ed.Nat44EdOutputInterfaceGet{}, &nat44_ed.Nat44EdOutputInterfaceDetails{}, false, (*state).natOutputGet,
			[]api.Message{&nat44_ed.Nat44EdOutputInterfaceGetReply{}}},
		{&nat44_ed.Nat44AddDelInterfaceAddr{}, &nat44_ed.Nat44AddDelInterfaceAddrReply{}, true, (*state).natInterfaceAddr, nil},
		{&nat44_ed.Nat44InterfaceAddrDump{}, &nat44_ed.Nat44InterfaceAddrDetails{}, false, (*state).natInterfaceAddrDump, nil},
		{&vlib.GetNextIndex{}, &vlib.GetNextIndexReply{}, true, (*state).getNextIndex, nil},
		{&interfaces.SwInterfaceSetUnnumbered{}, &interfaces.SwInterfaceSetUnnumberedReply{}, true, (*state).setUnnumbered, nil},
		{&ip.IPUnnumberedDump{}, &ip.IPUnnumberedDetails{}, false, (*state).unnumberedDump, nil},
		{&ip_neighbor.IPNeighborAddDel{}, &ip_neighbor.IPNeighborAddDelReply{}, true, (*state).neighborAddDel, nil},
		{&ip_neighbor.IPNeighborDump{}, &ip_neighbor.IPNeighborDetails{}, false, (*state).neighborDump, nil},
		{&acl.ACLPluginGetVersion{}, &acl.ACLPluginGetVersionReply{}, true, (*state).aclGetVersion, nil},
		{&acl.ACLPluginGetConnTableMaxEntries{}, &acl.ACLPluginGetConnTableMaxEntriesReply{}, true, (*state).aclConnTableMax, nil},
		{&acl.ACLAddReplace{}, &acl.ACLAddReplaceReply{}, true, (*state).aclAddReplace, nil},
		{&acl.ACLDel{}, &acl.ACLDelReply{}, true, (*state).aclDel, nil},
		{&acl.ACLDump{}, &acl.ACLDetails{}, false, (*state).aclDump, nil},
		{&acl.ACLInterfaceSetACLList{}, &acl.ACLInterfaceSetACLListReply{}, true, (*state).aclInterfaceSetList, nil},
		{&acl.ACLInterfaceAddDel{}, &acl.ACLInterfaceAddDelReply{}, true, (*state).aclInterfaceAddDel, nil},
		{&acl.ACLInterfaceListDump{}, &acl.ACLInterfaceListDetails{}, false, (*state).aclInterfaceListDump, nil},
		{&cnat.CnatTranslationUpdate{}, &cnat.CnatTranslationUpdateReply{}, true, (*state).cnatTranslationUpdate, nil},
		{&cnat.CnatTranslationDel{}, &cnat.CnatTranslationDelReply{}, true, (*state).cnatTranslationDel, nil},
		{&cnat.CnatTranslationDump{}, &cnat.CnatTranslationDetails{}, false, (*state).cnatTranslationDump, nil},
		{&cnat.CnatSessionDump{}, &cnat.CnatSessionDetails{}, false, (*state).cnatSessionDump, nil},
		{&cnat.CnatSessionPurge{}, &cnat.CnatSessionPurgeReply{}, true, (*state).cnatSessionPurge, nil},
		{&cnat.CnatSetSnatAddresses{}, &cnat.CnatSetSnatAddressesReply{}, true, (*state).cnatSetSnatAddresses, nil},
		{&cnat.CnatSetSnatAddressesV2{}, &cnat.CnatSetSnatAddressesV2Reply{}, true, (*state).cnatSetSnatAddressesV2, nil},
		{&cnat.CnatGetSnatAddresses{}, &cnat.CnatGetSnatAddressesReply{}, true, (*state).cnatGetSnatAddresses, nil},
		{&cnat.CnatSnatAddressesDump{}, &cnat.CnatSnatAddressesDetails{}, false, (*state).cnatSnatAddressesDump, nil},
		{&cnat.CnatSnatPolicyAddDelExcludePfx{}, &cnat.CnatSnatPolicyAddDelExcludePfxReply{}, true, (*state).cnatExcludePfx, nil},
		{&cnat.CnatSnatPolicyAddDelIf{}, &cnat.CnatSnatPolicyAddDelIfReply{}, true, (*state).cnatSnatPolicyIf, nil},
		{&cnat.CnatSetSnatPolicy{}, &cnat.CnatSetSnatPolicyReply{}, true, (*state).cnatSetSnatPolicy, nil},
		{&cnat.FeatureCnatEnableDisable{}, &cnat.FeatureCnatEnableDisableReply{}, true, (*state).cnatFeature, nil},
	}
}
