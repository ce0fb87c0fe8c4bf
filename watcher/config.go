package watcher

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Defaults of [Config] and [EtcdConfig] fields.
const (
	DefaultEndpoint             = "127.0.0.1:2379"
	DefaultDialTimeout          = 5 * time.Second
	DefaultKeepAliveTime        = 10 * time.Second
	DefaultKeepAliveTimeout     = 5 * time.Second
	DefaultKubeStatePrefix      = kubemodel.DefaultPrefix
	DefaultMirrorFallbackDelay  = 5 * time.Second
	DefaultMirrorWriteDelay     = 100 * time.Millisecond
	DefaultRetryMinBackoff      = 100 * time.Millisecond
	DefaultRetryMaxBackoff      = 5 * time.Second
	DefaultQueueFullTimeout     = 10 * time.Second
	DefaultSnapshotPageSize     = 1000
	DefaultRequestTimeout       = 30 * time.Second
	defaultPushMinBackoff       = time.Millisecond
	defaultPushMaxBackoff       = 100 * time.Millisecond
	defaultMirrorOpenLockTimout = time.Second
)

// EtcdConfig tells the watcher how to reach etcd when it creates its own
// client ([New]). The zero value connects to [DefaultEndpoint] without TLS
// and without authentication.
//
// EtcdConfig is a plain value; a copy is safe for concurrent use. Its
// [EtcdConfig.LogValue] hides the password, so logging the config with slog
// is safe; do not print it with fmt verbs.
type EtcdConfig struct {
	// Endpoints are the etcd client URLs ("host:port", "http://host:port" or
	// "https://host:port"). Default: [DefaultEndpoint].
	Endpoints []string
	// DialTimeout bounds one connection attempt. Default:
	// [DefaultDialTimeout].
	DialTimeout time.Duration
	// KeepAliveTime and KeepAliveTimeout: the client pings the server after
	// KeepAliveTime without traffic and drops the connection when no answer
	// comes within KeepAliveTimeout, so a silently dead connection (a
	// partition without a reset) is noticed, reconnected and followed by a
	// DBResync. etcd servers refuse pings more often than every 5s by
	// default. Defaults: [DefaultKeepAliveTime], [DefaultKeepAliveTimeout].
	KeepAliveTime    time.Duration
	KeepAliveTimeout time.Duration
	// CAFile is a PEM file of the certificate authorities that sign the etcd
	// server certificates. Setting CAFile, CertFile or KeyFile enables TLS.
	// Empty with TLS enabled: the system roots.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and its key for
	// mutual TLS. Both or neither must be set.
	CertFile string
	KeyFile  string
	// ServerName overrides the name checked against the server certificate.
	// Default: the host of the endpoint.
	ServerName string
	// Username and Password authenticate against etcd (role-based access
	// control). Both or neither must be set. The password is never logged.
	Username string
	Password string
}

// LogValue implements slog.LogValuer without the password.
func (c EtcdConfig) LogValue() slog.Value {
	pw := ""
	if c.Password != "" {
		pw = "<redacted>"
	}
	return slog.GroupValue(
		slog.Any("endpoints", c.Endpoints),
		slog.Duration("dial_timeout", c.DialTimeout),
		slog.Duration("keepalive_time", c.KeepAliveTime),
		slog.Duration("keepalive_timeout", c.KeepAliveTimeout),
		slog.String("ca_file", c.CAFile),
		slog.String("cert_file", c.CertFile),
		slog.String("key_file", c.KeyFile),
		slog.String("server_name", c.ServerName),
		slog.String("username", c.Username),
		slog.String("password", pw),
	)
}

// String describes c without the password.
func (c EtcdConfig) String() string { return c.LogValue().String() }

func (c EtcdConfig) tlsEnabled() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// tlsConfig builds the client TLS configuration from the files; nil when TLS
// is not enabled. It reads files, so it is called from Run, not New.
func (c EtcdConfig) tlsConfig() (*tls.Config, error) {
	if !c.tlsEnabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read etcd CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA file %s: no PEM certificate found", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			// The error names the files and the problem, never key material.
			return nil, fmt.Errorf("load etcd client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (c *EtcdConfig) validate() []error {
	var errs []error
	if len(c.Endpoints) == 0 {
		c.Endpoints = []string{DefaultEndpoint}
	}
	for i, ep := range c.Endpoints {
		if strings.TrimSpace(ep) == "" {
			errs = append(errs, fmt.Errorf("Etcd.Endpoints[%d] is empty", i))
		}
	}
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "Etcd.DialTimeout", Value: &c.DialTimeout, Default: DefaultDialTimeout},
		{Name: "Etcd.KeepAliveTime", Value: &c.KeepAliveTime, Default: DefaultKeepAliveTime},
		{Name: "Etcd.KeepAliveTimeout", Value: &c.KeepAliveTimeout, Default: DefaultKeepAliveTimeout},
	})...)
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("Etcd.CertFile and Etcd.KeyFile must be set together"))
	}
	if (c.Username == "") != (c.Password == "") {
		errs = append(errs, errors.New("Etcd.Username and Etcd.Password must be set together"))
	}
	return errs
}

// Config configures a [Watcher]. The zero value is valid: it watches the
// built-in Kubernetes resources under [DefaultKubeStatePrefix] on etcd at
// [DefaultEndpoint], watches no external configuration and keeps no mirror.
//
// Config is a plain value; a copy is safe for concurrent use.
type Config struct {
	// Etcd tells how to reach etcd when the watcher creates its own client
	// with [New]. Ignored by [NewWithClient].
	Etcd EtcdConfig

	// KubeStatePrefix is the etcd key prefix under which the Kubernetes state
	// is stored; resource keys (such as kubemodel.PodKey values) are relative
	// to it (kubemodel.EtcdKey builds the full key). Only the range that
	// holds the registered resources is read and watched: the prefix
	// followed by the longest common root of the resources' key prefixes
	// ("k8s/" for the built-in ones), so other records beside that root
	// (nodesync, IPAM) are never seen. Default: [DefaultKubeStatePrefix].
	KubeStatePrefix string

	// ExternalConfigPrefix is this node's external-configuration prefix.
	// Keys below it, relative to it, become the keys of
	// controller.DBResync.ExternalConfig and
	// controller.ExternalConfigChange.UpdatedKVs. Values are serialized
	// google.protobuf.Any messages (see the package documentation).
	// Default: empty, no external configuration is watched. It must differ
	// from KubeStatePrefix; if one contains the other, each key belongs to
	// the longer prefix that matches it.
	ExternalConfigPrefix string

	// ExternalConfigSource is the Source of the ExternalConfigChange events.
	// Default: controller.RemoteDBSource, the source under which the event
	// loop keeps the ExternalConfig of DBResync.
	ExternalConfigSource string

	// ExternalConfigTypes resolves the type URLs of external-configuration
	// values. Default: protoregistry.GlobalTypes (every generated message
	// linked into the program).
	ExternalConfigTypes protoregistry.MessageTypeResolver

	// Resources are added to the built-in kubemodel.Resources(). Names and
	// key prefixes must be unique among all resources; when key prefixes
	// nest, a key belongs to the longest one that matches.
	Resources []kubemodel.Resource

	// NodeName is the node whose agent the watcher serves: of the values
	// stored per node (kubemodel.Resource.NodeKeyPrefix: the pods), the
	// watcher reads and watches this node's alone in the per-node layout
	// (kubemodel.LayoutNodePods), and in the flat layout it reads every
	// pod and keeps this node's (as [NodePods] does). Default: empty,
	// every node's values.
	NodeName string

	// Keep, when set, chooses the Kubernetes values the watcher delivers
	// and keeps: a value for which it returns false is treated as absent.
	// It is not decoded (nor checked), not in a DBResync and not
	// mirrored; a change to it is not delivered, except that a key whose
	// value stops being kept is delivered as deleted and one whose value
	// starts being kept as added. [NodePods] keeps only one node's pods,
	// which is all a node's agent needs of the cluster's pods, at a
	// fraction of the memory and start-up time. Keep is called on the Run
	// goroutine, before decoding, with the resource name, the key
	// (relative to KubeStatePrefix) and the value as stored in etcd (the
	// resource's message in binary protobuf), which it must neither modify
	// nor keep. Default: nil, every value is kept.
	Keep func(resource, key string, raw []byte) bool

	// SnapshotPageSize is the number of keys one request of a snapshot
	// reads: a snapshot is read in pages at the revision of the first one,
	// and a failed page is repeated alone. Default:
	// [DefaultSnapshotPageSize].
	SnapshotPageSize int

	// RequestTimeout bounds one request of a snapshot read (a page). It
	// is long because a request that times out is repeated: when thousands
	// of agents start at once, etcd is slow for everyone, and a short
	// timeout only makes it do the same work again. While the fallback to
	// the mirror is pending, the requests end at MirrorFallbackDelay at
	// the latest. Default: [DefaultRequestTimeout].
	RequestTimeout time.Duration

	// MirrorPath is the bbolt file of the local mirror. Default: empty, no
	// mirror (and no start-up without etcd).
	MirrorPath string

	// MirrorFallbackDelay is how long Run tries to read the start-up snapshot
	// from etcd before it delivers the mirrored state (DBResync with
	// Local=true). Default: [DefaultMirrorFallbackDelay].
	MirrorFallbackDelay time.Duration

	// MirrorWriteDelay is how long changes accumulate before they are
	// written to the mirror in one transaction (one fsync for a burst,
	// and none while a change is being processed); the mirror lags etcd
	// by about that much. Default: [DefaultMirrorWriteDelay].
	MirrorWriteDelay time.Duration

	// RetryMinBackoff and RetryMaxBackoff bound the exponential backoff
	// between failed attempts to read a snapshot or to restart a lost
	// watch (doubling from the minimum, each wait jittered by ±50%, so that
	// the watchers of a cluster's agents do not retry in waves), and
	// between failed writes of the mirror (±20%), and the gRPC reconnect backoff
	// of a client made by [New].
	// Defaults: [DefaultRetryMinBackoff], [DefaultRetryMaxBackoff].
	RetryMinBackoff time.Duration
	RetryMaxBackoff time.Duration

	// QueueFullTimeout is how long a change is retried while the event loop
	// answers controller.ErrQueueFull. After it, the watcher stops
	// delivering changes one by one and delivers a fresh DBResync instead
	// (retried for as long as needed), so no change is ever dropped
	// silently. Default: [DefaultQueueFullTimeout].
	QueueFullTimeout time.Duration

	// Logger receives lifecycle messages (Info), degraded states (Warn) and
	// one Debug record per delivered event. Values are never logged, keys
	// are. Default: discard.
	Logger *slog.Logger
}

// withDefaults fills in defaults and reports every bad field.
func (c Config) withDefaults() (Config, error) {
	errs := c.Etcd.validate()
	if c.KubeStatePrefix == "" {
		c.KubeStatePrefix = DefaultKubeStatePrefix
	}
	if c.ExternalConfigPrefix != "" && c.ExternalConfigPrefix == c.KubeStatePrefix {
		errs = append(errs, fmt.Errorf("ExternalConfigPrefix %q equals KubeStatePrefix", c.ExternalConfigPrefix))
	}
	if c.NodeName != "" {
		if err := kubemodel.ValidateName(c.NodeName); err != nil {
			errs = append(errs, fmt.Errorf("NodeName: %w", err))
		}
	}
	if c.ExternalConfigSource == "" {
		c.ExternalConfigSource = controller.RemoteDBSource
	}
	if c.ExternalConfigTypes == nil {
		c.ExternalConfigTypes = protoregistry.GlobalTypes
	}
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "MirrorFallbackDelay", Value: &c.MirrorFallbackDelay, Default: DefaultMirrorFallbackDelay},
		{Name: "MirrorWriteDelay", Value: &c.MirrorWriteDelay, Default: DefaultMirrorWriteDelay},
		{Name: "RetryMinBackoff", Value: &c.RetryMinBackoff, Default: DefaultRetryMinBackoff},
		{Name: "RetryMaxBackoff", Value: &c.RetryMaxBackoff, Default: DefaultRetryMaxBackoff},
		{Name: "QueueFullTimeout", Value: &c.QueueFullTimeout, Default: DefaultQueueFullTimeout},
		{Name: "RequestTimeout", Value: &c.RequestTimeout, Default: DefaultRequestTimeout},
	})...)
	errs = append(errs, cfgutil.Ints([]cfgutil.Int{
		{Name: "SnapshotPageSize", Value: &c.SnapshotPageSize, Default: DefaultSnapshotPageSize},
	})...)
	if c.RetryMaxBackoff < c.RetryMinBackoff {
		errs = append(errs, fmt.Errorf("RetryMaxBackoff %v is less than RetryMinBackoff %v", c.RetryMaxBackoff, c.RetryMinBackoff))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("watcher config: %w", err)
	}
	return c, nil
}

// NodePods returns a [Config.Keep] function that keeps the pods of the
// node named nodeName (kubemodel.Pod.NodeName) and every value of the
// other resources. A pod that is not scheduled yet is left out until it
// is scheduled on that node. It reads the node name from the encoded pod
// without decoding the rest; a value it cannot read is kept (and then
// reported as a bad value when it does not decode).
//
// Deprecated: set [Config.NodeName]: it keeps the same pods in the flat
// layout, and in the per-node layout the other nodes' pods are not even
// sent.
func NodePods(nodeName string) func(resource, key string, raw []byte) bool {
	return func(resource, _ string, raw []byte) bool {
		if resource != kubemodel.PodResource {
			return true
		}
		name, ok := podNodeName(raw)
		return !ok || string(name) == nodeName
	}
}

// podNodeNameField is the field number of kubemodel.Pod's node_name.
var podNodeNameField = (&kubemodel.Pod{}).ProtoReflect().Descriptor().Fields().ByName("node_name").Number()

// podNodeName returns the node name of an encoded kubemodel.Pod (the last
// node_name field, as decoding takes it); ok is false if raw is not a
// well-formed message.
func podNodeName(raw []byte) (name []byte, ok bool) {
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return nil, false
		}
		raw = raw[n:]
		if num == podNodeNameField && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(raw)
			if n < 0 {
				return nil, false
			}
			name, raw = v, raw[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, raw); n < 0 {
			return nil, false
		}
		raw = raw[n:]
	}
	return name, true
}
