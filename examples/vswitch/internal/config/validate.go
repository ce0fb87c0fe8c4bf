package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
)

// applyDefaults fills in the defaults of the daemon's own fields (the
// agent fills in its own).
func (c *Config) applyDefaults() {
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if len(c.Etcd.Endpoints) == 0 {
		c.Etcd.Endpoints = []string{DefaultEtcdEndpoint}
	}
	if c.Etcd.DialTimeout == 0 {
		c.Etcd.DialTimeout = DefaultDialTimeout
	}
	if c.VPP.Mode == "" {
		c.VPP.Mode = VPPSocket
	}
	if c.VPP.APISocket == "" {
		c.VPP.APISocket = DefaultVPPSocket
	}
	if c.Linux == "" {
		c.Linux = LinuxNetlink
	}
	if c.HTTP.Listen == "" {
		c.HTTP.Listen = DefaultHTTPListen
	}
	if c.Log.Format == "" {
		c.Log.Format = LogText
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
}

// Validate reports every invalid field of c (after defaults), each named
// by its path in the file; nil if c is valid. It reads the TLS and
// password files c names.
func (c Config) Validate() error {
	c.applyDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}

	if c.NodeName == "" {
		bad("nodeName", "required (-node-name)")
	}
	for i, ep := range c.Etcd.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			bad(fmt.Sprintf("etcd.endpoints[%d]", i), "%q: %v", ep, err)
		}
	}
	if c.Etcd.DialTimeout < 0 {
		bad("etcd.dialTimeout", "%v is negative", c.Etcd.DialTimeout)
	}
	errs = append(errs, c.Etcd.check()...)

	switch c.VPP.Mode {
	case VPPSocket, VPPSim:
	default:
		bad("vpp.mode", "%q is neither %q nor %q", c.VPP.Mode, VPPSocket, VPPSim)
	}
	if !filepath.IsAbs(c.VPP.APISocket) {
		bad("vpp.apiSocket", "%q is not an absolute path", c.VPP.APISocket)
	}
	switch c.Linux {
	case LinuxNetlink:
	case LinuxFake:
		if c.VPP.Mode != VPPSim {
			bad("linux", "%q is only for the VPP stand-in (vpp.mode %q): a real VPP needs real pod interfaces", LinuxFake, VPPSim)
		}
	default:
		bad("linux", "%q is neither %q nor %q", c.Linux, LinuxNetlink, LinuxFake)
	}

	if c.Uplink.AfPacketHostIf != "" && c.Uplink.VPPName != "" {
		bad("uplink", "set afPacketHostIf or vppName, not both")
	}
	if c.Uplink.VPPName != "" && c.Uplink.MACAddress != "" {
		bad("uplink.macAddress", "not used with vppName (a NIC keeps its MAC)")
	}
	checkIfName(c.Uplink.AfPacketHostIf, "uplink.afPacketHostIf", bad)
	checkMAC(c.Uplink.MACAddress, "uplink.macAddress", bad)
	if c.HostInterconnect.AfPacketHostIf != "" && c.HostInterconnect.TapHostIfName != "" {
		bad("hostInterconnect", "set afPacketHostIf or tapHostIfName, not both")
	}
	checkIfName(c.HostInterconnect.AfPacketHostIf, "hostInterconnect.afPacketHostIf", bad)
	checkIfName(c.HostInterconnect.TapHostIfName, "hostInterconnect.tapHostIfName", bad)
	checkMAC(c.HostInterconnect.MACAddress, "hostInterconnect.macAddress", bad)

	if err := checkListen(c.HTTP.Listen); err != nil {
		bad("http.listen", "%q: %v", c.HTTP.Listen, err)
	}
	switch c.Log.Format {
	case LogText, LogJSON:
	default:
		bad("log.format", "%q is neither %q nor %q", c.Log.Format, LogText, LogJSON)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Log.Level)); err != nil {
		bad("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	// The agent's own fields (durations included) and the IPAM plan,
	// named the same way.
	ac := c.Agent()
	if ac.NodeName == "" {
		ac.NodeName = "node" // reported above
	}
	if err := ac.Validate(); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	return errors.Join(errs...)
}

func checkEndpoint(ep string) error {
	host := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return err
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("scheme %q is neither http nor https", u.Scheme)
		}
		if u.Path != "" && u.Path != "/" {
			return errors.New("has a path")
		}
		host = u.Host
	}
	return checkListen(host)
}

// checkListen checks a host:port with a numeric port.
func checkListen(hostPort string) error {
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number 0-65535", port)
	}
	return nil
}

func checkIfName(name, field string, bad func(string, string, ...any)) {
	if len(name) > 15 {
		bad(field, "%q is longer than 15 bytes (a Linux interface name)", name)
	}
	if strings.ContainsAny(name, "/ \t\n") {
		bad(field, "%q is not a Linux interface name", name)
	}
}

func checkMAC(mac, field string, bad func(string, string, ...any)) {
	if mac == "" {
		return
	}
	if hw, err := net.ParseMAC(mac); err != nil || len(hw) != 6 {
		bad(field, "%q is not a MAC address aa:bb:cc:dd:ee:ff", mac)
	}
}

// check validates the TLS and authentication settings, reading the files.
func (e Etcd) check() []error {
	var errs []error
	if _, err := e.tlsConfig(); err != nil {
		errs = append(errs, err)
	}
	if _, err := e.password(); err != nil {
		errs = append(errs, err)
	}
	if e.Username == "" && (e.Password != "" || e.PasswordFile != "") {
		errs = append(errs, errors.New("etcd.username: required with a password"))
	}
	if e.Password != "" && e.PasswordFile != "" {
		errs = append(errs, errors.New("etcd.passwordFile: set password or passwordFile, not both"))
	}
	return errs
}

// tlsConfig returns the client TLS configuration, nil without TLS.
func (e Etcd) tlsConfig() (*tls.Config, error) {
	if e.CAFile == "" && e.CertFile == "" && e.KeyFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: e.ServerName}
	var errs []error
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		switch {
		case err != nil:
			errs = append(errs, fileProblem(fmt.Errorf("etcd.caFile: %w", err)))
		default:
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				errs = append(errs, fileProblem(fmt.Errorf("etcd.caFile: %s holds no PEM certificate", e.CAFile)))
			}
			tc.RootCAs = pool
		}
	}
	switch {
	case e.CertFile != "" && e.KeyFile == "":
		errs = append(errs, errors.New("etcd.keyFile: required with etcd.certFile"))
	case e.CertFile == "" && e.KeyFile != "":
		errs = append(errs, errors.New("etcd.certFile: required with etcd.keyFile"))
	case e.CertFile != "":
		cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			errs = append(errs, fileProblem(fmt.Errorf("etcd.certFile: %w", err)))
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, errors.Join(errs...)
}

// password returns the etcd password ("" without a user).
func (e Etcd) password() (string, error) {
	if e.Username == "" {
		return "", nil
	}
	switch {
	case e.Password != "":
		return e.Password, nil
	case e.PasswordFile != "":
		b, err := os.ReadFile(e.PasswordFile)
		if err != nil {
			return "", fileProblem(fmt.Errorf("etcd.passwordFile: %w", err))
		}
		pw := strings.TrimSpace(string(b))
		if pw == "" {
			return "", fileProblem(fmt.Errorf("etcd.passwordFile: %s is empty", e.PasswordFile))
		}
		return pw, nil
	case os.Getenv(EnvEtcdPassword) != "":
		return os.Getenv(EnvEtcdPassword), nil
	}
	return "", fmt.Errorf("etcd.password: required with etcd.username (or etcd.passwordFile, or $%s)", EnvEtcdPassword)
}

// EtcdClientConfig returns the etcd client configuration: endpoints, TLS
// (files read now), user and password. etcd's own logging is discarded.
func (c Config) EtcdClientConfig() (clientv3.Config, error) {
	c.applyDefaults()
	tc, err := c.Etcd.tlsConfig()
	if err != nil {
		return clientv3.Config{}, err
	}
	pw, err := c.Etcd.password()
	if err != nil {
		return clientv3.Config{}, err
	}
	return clientv3.Config{
		Endpoints:            c.Etcd.Endpoints,
		DialTimeout:          time.Duration(c.Etcd.DialTimeout),
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		TLS:                  tc,
		Username:             c.Etcd.Username,
		Password:             pw,
		Logger:               zap.NewNop(),
	}, nil
}

// Agent returns the agent's configuration.
func (c Config) Agent() agent.Config {
	c.applyDefaults()
	return agent.Config{
		NodeName:             c.NodeName,
		StateDir:             c.StateDir,
		KubeStatePrefix:      c.KubeStatePrefix,
		ExternalConfigPrefix: c.ExternalConfigPrefix,
		IPFamily:             c.IPFamily,
		IPAM:                 c.IPAM,
		IPAM6:                c.IPAM6,
		Services:             c.Services,
		IPAMStore:            c.IPAMStore,
		PodInterfaceType:     podiface.Type(c.PodInterfaceType),
		CNISocket:            c.CNISocket,
		Uplink: nodeconn.Uplink{
			Name: c.Uplink.Name, AfPacketHostIf: c.Uplink.AfPacketHostIf, VPPName: c.Uplink.VPPName,
			Address: c.Uplink.Address, MACAddress: c.Uplink.MACAddress,
		},
		HostInterconnect: nodeconn.HostInterconnect{
			Name: c.HostInterconnect.Name, AfPacketHostIf: c.HostInterconnect.AfPacketHostIf,
			TapHostIfName: c.HostInterconnect.TapHostIfName, MACAddress: c.HostInterconnect.MACAddress,
		},
		BGP: agent.BGPConfig{
			Disabled: c.BGP.Disabled, ListenAddresses: c.BGP.ListenAddresses, IPv4: c.BGP.IPv4, IPv6: c.BGP.IPv6,
		},
		HealingDelay:       time.Duration(c.HealingDelay),
		MaxHealingDelay:    time.Duration(c.MaxHealingDelay),
		LocalFallbackDelay: time.Duration(c.LocalFallbackDelay),
		StopTimeout:        time.Duration(c.StopTimeout),
	}
}
