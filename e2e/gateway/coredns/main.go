// Command coredns stands in for registry.k8s.io/coredns/coredns:v1.12.2, the image of the
// `coredns` Deployment in the conformance suite's base manifests (gateway-conformance-infra; the
// UDPRoute tests' DNS backend). The suite waits for every pod of that namespace to be Ready before
// any test, so the pod must start even when only GATEWAY-HTTP runs. Its Corefile (a ConfigMap in
// the same manifests) names four plugins: errors, log, forward and whoami; this is CoreDNS v1.12.2
// (pinned in go.mod) with exactly those, so that the build stays small (the cluster's own CoreDNS,
// e2e/cluster/coredns, has neither forward nor whoami and would refuse that Corefile).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func init() {
	// The order in which the plugins handle a query: CoreDNS's own plugin.cfg order.
	dnsserver.Directives = []string{"errors", "log", "forward", "whoami"}
}

func main() {
	coremain.Run()
}
