// Gateway listeners in a snapshot (model::Listener; docs/gateway-api.md, "One address per
// Gateway"): each listener gets a router and TLS names of its own, built from the hosts scoped
// to it; the data plane's own listeners keep seeing only the unscoped hosts.
#include <gtest/gtest.h>

#include <string>

#include "model/model.h"
#include "runtime/snapshot.h"

namespace tidegate::dataplane::runtime {
namespace {

model::Route to(const std::string& upstream) {
  model::Route r;
  r.path = "/";
  r.upstream = upstream;
  r.ingress = "ns/test";
  return r;
}

model::Config config() {
  model::Config c;
  c.upstreams["ns/shared:80"] = {"ns/shared:80", {{"10.0.0.1", 80}}};
  c.upstreams["ns/a:80"] = {"ns/a:80", {{"10.0.0.2", 80}}};
  c.upstreams["ns/b:80"] = {"ns/b:80", {{"10.0.0.3", 80}}};
  c.virtual_hosts["*"] = {"*", {to("ns/shared:80")}};
  c.virtual_hosts["*"].ssl_redirect = true;
  c.listeners["ns/gw-a:80"] = {"ns/gw-a:80", 20000, false};
  c.listeners["ns/gw-b:443"] = {"ns/gw-b:443", 20001, true};
  model::VirtualHost a{"*", {to("ns/a:80")}};
  a.listener = "ns/gw-a:80";
  c.virtual_hosts[model::host_key(a)] = a;
  model::VirtualHost b{"b.com", {to("ns/b:80")}};
  b.listener = "ns/gw-b:443";
  c.virtual_hosts[model::host_key(b)] = b;
  c.certificates["ns/shared"] = {"ns/shared", "SHARED CERT", "KEY"};
  c.certificates["ns/b"] = {"ns/b", "B CERT", "KEY"};
  c.tls_hosts["b.com"] = {"b.com", "ns/shared"};
  model::TlsHost tb{"b.com", "ns/b"};
  tb.listener = "ns/gw-b:443";
  c.tls_hosts[model::host_key(tb)] = tb;
  return c;
}

std::string upstream_of(const router::Router& r, std::string_view host) {
  auto m = r.match(host, "/");
  return m.route == nullptr ? "404" : m.route->upstream;
}

TEST(SnapshotListenerTest, EachListenerRoutesAndNamesCertificatesOnItsOwn) {
  std::string error;
  auto snap = build_snapshot(1, config(), 1, &error);
  ASSERT_NE(snap, nullptr) << error;

  EXPECT_EQ(upstream_of(snap->router_for(""), "b.com"), "ns/shared:80");
  EXPECT_EQ(upstream_of(snap->router_for("ns/gw-a:80"), "b.com"), "ns/a:80");
  EXPECT_EQ(upstream_of(snap->router_for("ns/gw-b:443"), "b.com"), "ns/b:80");
  EXPECT_EQ(upstream_of(snap->router_for("ns/gw-b:443"), "c.com"), "404");
  EXPECT_EQ(upstream_of(snap->router_for("ns/gone:80"), "b.com"), "404");

  const TlsEntry* shared = snap->find_tls("b.com");
  const TlsEntry* own = snap->find_tls("ns/gw-b:443", "b.com");
  ASSERT_TRUE(shared && shared->certificate && own && own->certificate);
  EXPECT_EQ(shared->certificate->name, "ns/shared");
  EXPECT_EQ(own->certificate->name, "ns/b");
  EXPECT_EQ(snap->find_tls("ns/gw-b:443", "c.com"), nullptr);  // the default certificate
  EXPECT_EQ(snap->find_tls("ns/gw-a:80", "b.com"), nullptr);

  // Redirect sets are the shared listeners' only; the model round-trips through the snapshot.
  EXPECT_TRUE(snap->ssl_redirect_hosts.contains("*"));
  EXPECT_EQ(snap->ssl_redirect_hosts.size(), 1u);
  EXPECT_EQ(snap->config(), config());
}

TEST(SnapshotListenerTest, AnInvalidListenerIsRefused) {
  model::Config c = config();
  c.listeners["ns/gw-a:80"].port = 20001;  // the port of ns/gw-b:443
  std::string error;
  EXPECT_EQ(build_snapshot(1, c, 1, &error), nullptr);
  EXPECT_NE(error.find("share port 20001"), std::string::npos) << error;
}

}  // namespace
}  // namespace tidegate::dataplane::runtime
