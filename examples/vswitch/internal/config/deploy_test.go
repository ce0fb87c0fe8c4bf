package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/config"
)

// TestDeployConfig: the daemon's configuration in deploy/config.yaml (the
// ConfigMap the DaemonSet mounts) decodes strictly and is valid once the
// DaemonSet's flags (-node-name, -etcd-endpoints) and the etcd Secret's
// files are there.
func TestDeployConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "config.yaml"))
	require.NoError(t, err)
	var cm struct {
		Data map[string]string `json:"data"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cm))
	doc, ok := cm.Data["vswitch.yaml"]
	require.True(t, ok, "no vswitch.yaml in deploy/config.yaml")

	dir := t.TempDir()
	files, err := etcdtest.GenerateCerts(dir)
	require.NoError(t, err)
	doc = strings.NewReplacer("/etc/vswitchkit/etcd/ca.crt", files.CAFile,
		"/etc/vswitchkit/etcd/client.crt", files.ClientCert, "/etc/vswitchkit/etcd/client.key", files.ClientKey).Replace(doc)
	var cfg config.Config
	require.NoError(t, config.Decode([]byte(doc), &cfg))
	cfg.NodeName = "worker-1"
	cfg.Etcd.Endpoints = []string{"https://10.0.0.10:2379"}
	require.NoError(t, cfg.Validate())
}
