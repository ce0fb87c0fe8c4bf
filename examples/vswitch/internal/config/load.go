package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// flagDef is a command-line flag that overrides one field of the file.
type flagDef struct {
	name, field, usage string
	// def is the default -h shows: the field's default when neither the
	// file nor the flag sets it.
	def  string
	bool bool
	set  func(c *Config, v string) error
}

func str(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

func strList(p func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		*p(c) = out
		return nil
	}
}

func dur(p func(*Config) *Duration) func(*Config, string) error {
	return func(c *Config, v string) error { return p(c).UnmarshalText([]byte(v)) }
}

func addr(p func(*Config) *netip.Addr) func(*Config, string) error {
	return func(c *Config, v string) error {
		a, err := netip.ParseAddr(v)
		*p(c) = a
		return err
	}
}

func flags() []flagDef {
	return []flagDef{
		{name: "node-name", field: "nodeName", def: "none, required", usage: "this node's Kubernetes node name (required)", set: str(func(c *Config) *string { return &c.NodeName })},
		{name: "state-dir", field: "stateDir", def: DefaultStateDir, usage: "directory of the agent's local state", set: str(func(c *Config) *string { return &c.StateDir })},
		{name: "etcd-endpoints", field: "etcd.endpoints", def: DefaultEtcdEndpoint, usage: "comma-separated etcd client URLs (host:port, http://..., https://...)", set: strList(func(c *Config) *[]string { return &c.Etcd.Endpoints })},
		{name: "etcd-ca", field: "etcd.caFile", def: "none, the system's CAs when TLS is on", usage: "PEM file of the CAs of the etcd server certificates (enables TLS)", set: str(func(c *Config) *string { return &c.Etcd.CAFile })},
		{name: "etcd-cert", field: "etcd.certFile", def: "none", usage: "PEM client certificate for etcd (mutual TLS; with -etcd-key)", set: str(func(c *Config) *string { return &c.Etcd.CertFile })},
		{name: "etcd-key", field: "etcd.keyFile", def: "none", usage: "PEM key of -etcd-cert", set: str(func(c *Config) *string { return &c.Etcd.KeyFile })},
		{name: "etcd-server-name", field: "etcd.serverName", def: "the endpoint's host", usage: "name checked against the etcd server certificate", set: str(func(c *Config) *string { return &c.Etcd.ServerName })},
		{name: "etcd-user", field: "etcd.username", def: "none, the client certificate's user or no authentication", usage: "etcd user; the password from -etcd-password-file, the file's etcd.password or $" + EnvEtcdPassword, set: str(func(c *Config) *string { return &c.Etcd.Username })},
		{name: "etcd-password-file", field: "etcd.passwordFile", def: "none, $" + EnvEtcdPassword, usage: "file holding the etcd password", set: str(func(c *Config) *string { return &c.Etcd.PasswordFile })},
		{name: "etcd-dial-timeout", field: "etcd.dialTimeout", def: DefaultDialTimeout.String(), usage: "bound of one etcd connection and login attempt", set: dur(func(c *Config) *Duration { return &c.Etcd.DialTimeout })},
		{name: "vpp", field: "vpp.mode", def: VPPSocket, usage: `"socket" (a real VPP) or "sim" (the in-process stand-in)`, set: str(func(c *Config) *string { return &c.VPP.Mode })},
		{name: "vpp-socket", field: "vpp.apiSocket", def: DefaultVPPSocket, usage: "VPP's binary-API socket", set: str(func(c *Config) *string { return &c.VPP.APISocket })},
		{name: "linux", field: "linux", def: LinuxNetlink, usage: `pod side of pod interfaces: "netlink" or "fake" (only with -vpp=sim)`, set: str(func(c *Config) *string { return &c.Linux })},
		{name: "ip-family", field: "ipFamily", def: agent.IPv4, usage: `the cluster's IP family: "ipv4", "ipv6" or "dual"`, set: str(func(c *Config) *string { return &c.IPFamily })},
		{name: "services", field: "services", def: agent.ServicesNAT44, usage: `service renderer: "nat44" (NAT44-ED, IPv4), "cnat" (both families) or "none"`, set: str(func(c *Config) *string { return &c.Services })},
		{name: "ipam-store", field: "ipamStore", def: defaultIPAMStoreKind, usage: `where pod IP allocations are persisted: "bolt" or "etcd"`, set: str(func(c *Config) *string { return &c.IPAMStore })},
		{name: "pod-interface-type", field: "podInterfaceType", def: string(podiface.AfPacket), usage: `default pod interface type: "af_packet", "tap" or "memif"`, set: str(func(c *Config) *string { return &c.PodInterfaceType })},
		{name: "cni-socket", field: "cniSocket", def: cniserver.DefaultSocketPath, usage: "unix socket of the CNI server", set: str(func(c *Config) *string { return &c.CNISocket })},
		{name: "uplink-host-if", field: "uplink.afPacketHostIf", def: "none", usage: "Linux interface of the uplink (af_packet)", set: str(func(c *Config) *string { return &c.Uplink.AfPacketHostIf })},
		{name: "uplink-vpp-name", field: "uplink.vppName", def: "none", usage: "VPP interface of the uplink (a NIC VPP has)", set: str(func(c *Config) *string { return &c.Uplink.VPPName })},
		{name: "host-interconnect-host-if", field: "hostInterconnect.afPacketHostIf", def: "none", usage: "host end of the veth pair of the VPP-host link (af_packet)", set: str(func(c *Config) *string { return &c.HostInterconnect.AfPacketHostIf })},
		{name: "bgp-disabled", field: "bgp.disabled", def: "false", bool: true, usage: "turn BGP off", set: func(c *Config, v string) error {
			b, err := parseBool(v)
			c.BGP.Disabled = b
			return err
		}},
		{name: "bgp-listen-addresses", field: "bgp.listenAddresses", def: "all addresses", usage: "comma-separated addresses the BGP speaker listens on", set: func(c *Config, v string) error {
			var out []netip.Addr
			for s := range strings.SplitSeq(v, ",") {
				if s = strings.TrimSpace(s); s == "" {
					continue
				}
				a, err := netip.ParseAddr(s)
				if err != nil {
					return err
				}
				out = append(out, a)
			}
			c.BGP.ListenAddresses = out
			return nil
		}},
		{name: "bgp-ipv4", field: "bgp.ipv4", def: "the VPP address node sync publishes, else the InternalIP", usage: "this node's IPv4 next hop and router ID", set: addr(func(c *Config) *netip.Addr { return &c.BGP.IPv4 })},
		{name: "bgp-ipv6", field: "bgp.ipv6", def: "the VPP address node sync publishes, else the InternalIP", usage: "this node's IPv6 next hop", set: addr(func(c *Config) *netip.Addr { return &c.BGP.IPv6 })},
		{name: "http-listen", field: "http.listen", def: DefaultHTTPListen, usage: "host:port of /metrics, /healthz, /readyz and /debug/", set: str(func(c *Config) *string { return &c.HTTP.Listen })},
		{name: "log-format", field: "log.format", def: LogText, usage: `"text" or "json"`, set: str(func(c *Config) *string { return &c.Log.Format })},
		{name: "log-level", field: "log.level", def: "info", usage: `"debug", "info", "warn" or "error"`, set: str(func(c *Config) *string { return &c.Log.Level })},
	}
}

func parseBool(v string) (bool, error) {
	switch v {
	case "", "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", v)
}

// Flags returns the command-line flags and the file fields they override,
// for documentation.
func Flags() [][2]string {
	var out [][2]string
	for _, f := range flags() {
		out = append(out, [2]string{"-" + f.name, f.field})
	}
	return out
}

// Error is a configuration error: a bad command line, an unreadable file,
// or fields that are invalid. It is immutable.
type Error struct {
	// File is the configuration file, if one was given.
	File string
	// Problems are the individual problems, each naming its field.
	Problems []error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration")
	if e.File != "" {
		b.WriteString(" (file " + e.File + ")")
	}
	b.WriteString(":")
	for _, p := range e.Problems {
		for line := range strings.SplitSeq(p.Error(), "\n") {
			b.WriteString("\n  " + line)
		}
	}
	return b.String()
}

// Unwrap returns the problems.
func (e *Error) Unwrap() []error { return e.Problems }

// FilesOnly reports whether every problem is with a file the configuration
// names rather than with the configuration itself: the configuration file,
// a TLS file or the password file is missing, unreadable, or does not hold
// what the field wants. What is written is valid, the machine does not (or
// not yet) match it; the daemon exits with its start-up status then, and
// with its configuration status when any problem is the configuration's.
func (e *Error) FilesOnly() bool {
	for _, p := range e.Problems {
		var fp *fileError
		if !errors.As(p, &fp) {
			return false
		}
	}
	return len(e.Problems) > 0
}

// fileError is a problem with a file the configuration names.
type fileError struct{ err error }

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// fileProblem marks err as a problem with a file (see Error.FilesOnly).
func fileProblem(err error) error { return &fileError{err} }

// Load parses the command line args (without the program name): -config
// names the YAML file, every other flag overrides one of its fields. It
// returns the configuration with the defaults filled in once every field
// is valid, else an *Error that lists every problem at once: those of the
// command line, of the file (YAML, duplicate and unknown keys, values of
// the wrong type) and of the values (the semantic checks, of the file's
// fields with the flags applied, leaving out fields already reported). Only
// a command line that cannot be read to its end (an unknown flag, a flag
// without its value, an argument that is no flag) stops the checks of the
// values, and a file that is not YAML at all those of the file. For -h it
// prints the usage, with every flag's field and default, to usage and
// returns flag.ErrHelp. Load reads the files the configuration names (TLS,
// password) but starts nothing.
func Load(args []string, usage io.Writer) (Config, error) {
	fs := flag.NewFlagSet("vswitch", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in the Error, the usage only for -h
	fs.Usage = func() {}
	file := fs.String("config", "", "YAML configuration file; flags override its fields")
	defs := flags()
	type setFlag struct {
		def   flagDef
		value string
	}
	var set []setFlag
	for _, d := range defs {
		record := func(v string) error {
			set = append(set, setFlag{d, v})
			return nil
		}
		usage := fmt.Sprintf("%s (%s; default: %s)", d.usage, d.field, d.def)
		if d.bool {
			fs.BoolFunc(d.name, usage, record)
		} else {
			fs.Func(d.name, usage, record)
		}
	}
	var problems []error
	cmdlineOK := true
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(usage)
			fmt.Fprintf(usage, "Usage: vswitch [-config FILE] [flags]\n\nThe vswitchkit per-node daemon: programs VPP for this node's pods, services and BGP.\nFlags override the fields of the file (named in parentheses).\n\n")
			fs.PrintDefaults()
			fmt.Fprintf(usage, "\n%s\n", ExitStatuses)
			return Config{}, err
		}
		problems = append(problems, fmt.Errorf("%w (vswitch -h lists the flags)", err))
		cmdlineOK = false
	} else if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments: %q (flags come first; vswitch -h lists them)", fs.Args()))
		cmdlineOK = false
	}
	var cfg Config
	fileOK := true
	if *file != "" {
		doc, err := os.ReadFile(*file)
		if err != nil {
			problems = append(problems, fileProblem(err))
			fileOK = false
		} else {
			var parsed bool
			var errs []error
			parsed, errs = decode(doc, &cfg)
			problems = append(problems, errs...)
			fileOK = parsed
		}
	}
	for _, s := range set {
		if err := s.def.set(&cfg, s.value); err != nil {
			problems = append(problems, fmt.Errorf("%s (-%s): %w", s.def.field, s.def.name, err))
		}
	}
	if cmdlineOK && fileOK {
		if err := cfg.Validate(); err != nil {
			for _, p := range unjoin(err) {
				if !coveredBy(p, problems) {
					problems = append(problems, p)
				}
			}
		}
	}
	if len(problems) > 0 {
		return Config{}, &Error{File: *file, Problems: problems}
	}
	cfg.applyDefaults()
	return cfg, nil
}

// ExitStatuses documents the daemon's exit statuses; -h prints it.
const ExitStatuses = `Exit statuses:
  0  stopped by SIGTERM or SIGINT (or -h)
  1  failed while running, after it was ready (logged)
  2  invalid command line or configuration (every problem is listed)
  3  could not start: the configuration is valid but the machine does not match it
     (a file it names is missing or unreadable, the state directory is unusable or
     held by another daemon, the HTTP address is taken, VPP's API socket is missing,
     etcd refuses the login, or the agent failed before it was ready)`

// fieldOf returns the field a problem names ("ipam.serviceCIDR",
// "etcd.endpoints[1]"), "" if it names none.
func fieldOf(err error) string {
	msg := err.Error()
	i := strings.IndexFunc(msg, func(r rune) bool {
		return !(r == '.' || r == '[' || r == ']' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})
	if i <= 0 || !(strings.HasPrefix(msg[i:], ": ") || strings.HasPrefix(msg[i:], " (-")) {
		return ""
	}
	return msg[:i]
}

// coveredBy reports whether a problem of the checks of the values is about
// a field (or a part of one) that earlier problems already name: a value
// that did not decode, or was given twice, is not checked again.
func coveredBy(p error, earlier []error) bool {
	f := fieldOf(p)
	if f == "" {
		return false
	}
	for _, e := range earlier {
		g := fieldOf(e)
		if g != "" && (f == g || strings.HasPrefix(f, g+".") || strings.HasPrefix(f, g+"[")) {
			return true
		}
	}
	return false
}

// unjoin returns the errors joined in err (err itself if it is not a
// join), flattened.
func unjoin(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, unjoin(e)...)
	}
	return out
}
