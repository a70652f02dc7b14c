// Command coredns is the one-node test cluster's DNS server: CoreDNS (pinned in go.mod) with only
// the plugins a cluster's kube-dns needs, so that the build stays small (e2e/cluster/README.md).
// Nothing is forwarded: the cluster has no network beyond this machine, so names outside
// cluster.local are refused at once instead of timing out.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// The order in which the plugins handle a query; it follows CoreDNS's own plugin.cfg.
	dnsserver.Directives = []string{
		"ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes",
	}
}

func main() {
	coremain.Run()
}
