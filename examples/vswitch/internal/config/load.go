package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
)

// flagDef is a command-line flag that overrides one field of the file.
type flagDef struct {
	name, field, usage string
	bool               bool
	set                func(c *Config, v string) error
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
		{name: "node-name", field: "nodeName", usage: "this node's Kubernetes node name (required)", set: str(func(c *Config) *string { return &c.NodeName })},
		{name: "state-dir", field: "stateDir", usage: "directory of the agent's local state", set: str(func(c *Config) *string { return &c.StateDir })},
		{name: "etcd-endpoints", field: "etcd.endpoints", usage: "comma-separated etcd client URLs (host:port, http://..., https://...)", set: strList(func(c *Config) *[]string { return &c.Etcd.Endpoints })},
		{name: "etcd-ca", field: "etcd.caFile", usage: "PEM file of the CAs of the etcd server certificates (enables TLS)", set: str(func(c *Config) *string { return &c.Etcd.CAFile })},
		{name: "etcd-cert", field: "etcd.certFile", usage: "PEM client certificate for etcd (mutual TLS; with -etcd-key)", set: str(func(c *Config) *string { return &c.Etcd.CertFile })},
		{name: "etcd-key", field: "etcd.keyFile", usage: "PEM key of -etcd-cert", set: str(func(c *Config) *string { return &c.Etcd.KeyFile })},
		{name: "etcd-server-name", field: "etcd.serverName", usage: "name checked against the etcd server certificate", set: str(func(c *Config) *string { return &c.Etcd.ServerName })},
		{name: "etcd-user", field: "etcd.username", usage: "etcd user; the password from -etcd-password-file, the file's etcd.password or $" + EnvEtcdPassword, set: str(func(c *Config) *string { return &c.Etcd.Username })},
		{name: "etcd-password-file", field: "etcd.passwordFile", usage: "file holding the etcd password", set: str(func(c *Config) *string { return &c.Etcd.PasswordFile })},
		{name: "etcd-dial-timeout", field: "etcd.dialTimeout", usage: "bound of one etcd connection and login attempt", set: dur(func(c *Config) *Duration { return &c.Etcd.DialTimeout })},
		{name: "vpp", field: "vpp.mode", usage: `"socket" (a real VPP) or "sim" (the in-process stand-in)`, set: str(func(c *Config) *string { return &c.VPP.Mode })},
		{name: "vpp-socket", field: "vpp.apiSocket", usage: "VPP's binary-API socket", set: str(func(c *Config) *string { return &c.VPP.APISocket })},
		{name: "linux", field: "linux", usage: `pod side of pod interfaces: "netlink" or "fake" (only with -vpp=sim)`, set: str(func(c *Config) *string { return &c.Linux })},
		{name: "ipam-store", field: "ipamStore", usage: `where pod IP allocations are persisted: "bolt" or "etcd"`, set: str(func(c *Config) *string { return &c.IPAMStore })},
		{name: "pod-interface-type", field: "podInterfaceType", usage: `default pod interface type: "af_packet", "tap" or "memif"`, set: str(func(c *Config) *string { return &c.PodInterfaceType })},
		{name: "cni-socket", field: "cniSocket", usage: "unix socket of the CNI server", set: str(func(c *Config) *string { return &c.CNISocket })},
		{name: "uplink-host-if", field: "uplink.afPacketHostIf", usage: "Linux interface of the uplink (af_packet)", set: str(func(c *Config) *string { return &c.Uplink.AfPacketHostIf })},
		{name: "uplink-vpp-name", field: "uplink.vppName", usage: "VPP interface of the uplink (a NIC VPP has)", set: str(func(c *Config) *string { return &c.Uplink.VPPName })},
		{name: "host-interconnect-host-if", field: "hostInterconnect.afPacketHostIf", usage: "host end of the veth pair of the VPP-host link (af_packet)", set: str(func(c *Config) *string { return &c.HostInterconnect.AfPacketHostIf })},
		{name: "bgp-disabled", field: "bgp.disabled", bool: true, usage: "turn BGP off", set: func(c *Config, v string) error {
			b, err := parseBool(v)
			c.BGP.Disabled = b
			return err
		}},
		{name: "bgp-listen-addresses", field: "bgp.listenAddresses", usage: "comma-separated addresses the BGP speaker listens on", set: func(c *Config, v string) error {
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
		{name: "bgp-ipv4", field: "bgp.ipv4", usage: "this node's IPv4 next hop and router ID", set: addr(func(c *Config) *netip.Addr { return &c.BGP.IPv4 })},
		{name: "bgp-ipv6", field: "bgp.ipv6", usage: "this node's IPv6 next hop", set: addr(func(c *Config) *netip.Addr { return &c.BGP.IPv6 })},
		{name: "http-listen", field: "http.listen", usage: "host:port of /metrics, /healthz, /readyz and /debug/", set: str(func(c *Config) *string { return &c.HTTP.Listen })},
		{name: "log-format", field: "log.format", usage: `"text" or "json"`, set: str(func(c *Config) *string { return &c.Log.Format })},
		{name: "log-level", field: "log.level", usage: `"debug", "info", "warn" or "error"`, set: str(func(c *Config) *string { return &c.Log.Level })},
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

// Load parses the command line args (without the program name): -config
// names the YAML file, every other flag overrides one of its fields. It
// returns the configuration with the defaults filled in once every field
// is valid, else an *Error that lists every problem; flag.ErrHelp (after
// printing the usage to usage) for -h. Load reads the files the
// configuration names (TLS, password) but starts nothing.
func Load(args []string, usage io.Writer) (Config, error) {
	fs := flag.NewFlagSet("vswitch", flag.ContinueOnError)
	fs.SetOutput(usage)
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
		usage := fmt.Sprintf("%s (%s)", d.usage, d.field)
		if d.bool {
			fs.BoolFunc(d.name, usage, record)
		} else {
			fs.Func(d.name, usage, record)
		}
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: vswitch [-config FILE] [flags]\n\nThe vswitchkit per-node daemon: programs VPP for this node's pods, services and BGP.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, err
		}
		return Config{}, &Error{Problems: []error{err}}
	}
	if fs.NArg() > 0 {
		return Config{}, &Error{Problems: []error{fmt.Errorf("unexpected arguments: %q", fs.Args())}}
	}
	var cfg Config
	if *file != "" {
		doc, err := os.ReadFile(*file)
		if err != nil {
			return Config{}, &Error{File: *file, Problems: []error{err}}
		}
		if err := Decode(doc, &cfg); err != nil {
			return Config{}, &Error{File: *file, Problems: unjoin(err)}
		}
	}
	var problems []error
	for _, s := range set {
		if err := s.def.set(&cfg, s.value); err != nil {
			problems = append(problems, fmt.Errorf("%s (-%s): %w", s.def.field, s.def.name, err))
		}
	}
	if len(problems) == 0 {
		if err := cfg.Validate(); err != nil {
			problems = unjoin(err)
		}
	}
	if len(problems) > 0 {
		return Config{}, &Error{File: *file, Problems: problems}
	}
	cfg.applyDefaults()
	return cfg, nil
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
