package ipam_test

import (
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

type podID = kubemodel.PodID

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
