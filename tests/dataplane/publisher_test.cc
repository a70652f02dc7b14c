// Tests for the data plane's one root: snapshots and deltas are applied all or nothing, a refusal
// names the problem and changes nothing, and a published snapshot never changes afterwards.

#include "runtime/publisher.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "protocol/protocol.h"
#include "tls/tls_context.h"

namespace tidegate::dataplane::runtime {
namespace {

using model::PathMatch;

// ---- Builders ----

model::Route route(PathMatch match, std::string path, std::string upstream = "default/web:80") {
  return model::Route{std::move(path), match, std::move(upstream), "default/web"};
}

model::VirtualHost vhost(std::string host, std::vector<model::Route> routes) {
  return model::VirtualHost{std::move(host), std::move(routes)};
}

model::Upstream upstream(std::string name,
                         std::vector<model::Endpoint> eps = {{"10.0.0.1", 8080}}) {
  return model::Upstream{std::move(name), std::move(eps)};
}

model::Config config(std::vector<model::VirtualHost> hosts,
                     std::vector<model::Upstream> ups = {upstream("default/web:80")}) {
  model::Config c;
  for (auto& h : hosts) c.virtual_hosts[h.host] = std::move(h);
  for (auto& u : ups) c.upstreams[u.name] = std::move(u);
  return c;
}

model::Config base_config() {
  return config({vhost("foo.com", {route(PathMatch::kPrefix, "/")}),
                 vhost("bar.com", {route(PathMatch::kExact, "/x")})});
}

// `c` with a certificate `name` for `host`, with the given PEM text.
model::Config with_certificate(model::Config c, const std::string& name, const std::string& host,
                               std::string cert_pem, std::string key_pem) {
  c.certificates[name] = {name, std::move(cert_pem), std::move(key_pem)};
  c.tls_hosts[host] = {host, name};
  return c;
}

// A real certificate and key (self-signed, generated once per test run).
const std::pair<std::string, std::string>& good_pem() {
  static const auto pem = [] {
    std::pair<std::string, std::string> p;
    std::string error;
    EXPECT_TRUE(dataplane::tls::generate_self_signed(&p.first, &p.second, &error)) << error;
    return p;
  }();
  return pem;
}

protocol::Snapshot snapshot(uint64_t version, model::Config c) { return {version, std::move(c)}; }

protocol::DeltaMsg delta(uint64_t version, uint64_t base, model::Delta d) {
  return {version, base, std::move(d)};
}

// A publisher with one sink that records every snapshot it receives.
struct Harness {
  Publisher publisher{2};
  std::vector<std::shared_ptr<const Snapshot>> published;
  Harness() {
    publisher.add_sink([this](std::shared_ptr<const Snapshot> s) { published.push_back(s); });
  }
};

// The upstream the router picks, or "404".
std::string resolve(const Snapshot& s, std::string_view host, std::string_view path) {
  auto m = s.router->match(host, path);
  return m.route ? m.route->upstream : "404";
}

// ---- Snapshots ----

TEST(PublisherTest, ValidSnapshotIsPublished) {
  Harness h;
  EXPECT_FALSE(h.publisher.ready());
  EXPECT_EQ(h.publisher.current(), nullptr);

  EXPECT_EQ(h.publisher.apply_snapshot(snapshot(10, base_config())), "");
  EXPECT_TRUE(h.publisher.ready());
  EXPECT_EQ(h.publisher.version(), 10u);
  EXPECT_EQ(h.publisher.applied(), 1u);
  EXPECT_EQ(h.publisher.rejected(), 0u);
  auto cur = h.publisher.current();
  ASSERT_NE(cur, nullptr);
  EXPECT_EQ(cur->version, 10u);
  EXPECT_EQ(cur->config(), base_config());
  ASSERT_EQ(h.published.size(), 1u);
  EXPECT_EQ(h.published[0], cur);  // the sinks get the very object that is current
  ASSERT_NE(cur->router, nullptr);
  EXPECT_EQ(resolve(*cur, "foo.com", "/anything"), "default/web:80");
  EXPECT_EQ(resolve(*cur, "nope.com", "/"), "404");
  const UpstreamState* up = cur->upstream("default/web:80");
  ASSERT_NE(up, nullptr);
  ASSERT_EQ(up->endpoints.size(), 1u);
  EXPECT_EQ(up->endpoints[0].address().to_string(), "10.0.0.1");
  EXPECT_EQ(up->endpoints[0].port(), 8080);
  EXPECT_EQ(cur->upstream("missing"), nullptr);
  EXPECT_EQ(cur->all_endpoints.size(), 1u);
}

struct InvalidCase {
  std::string name;
  model::Config config;
  std::string want;  // substring of the NACK reason
};

std::vector<InvalidCase> invalid_configs() {
  return {
      {"unknown upstream",
       config({vhost("foo.com", {route(PathMatch::kPrefix, "/", "default/missing:80")})}),
       "unknown upstream \"default/missing:80\""},
      {"invalid host", config({vhost("Foo.com", {route(PathMatch::kPrefix, "/")})}),
       "invalid host \"Foo.com\""},
      {"regex that RE2 rejects", config({vhost("foo.com", {route(PathMatch::kRegex, "/a[")})}),
       "invalid regex \"/a[\""},
      {"lookbehind (not RE2 syntax)",
       config({vhost("foo.com", {route(PathMatch::kRegex, "/(?<=a)b")})}), "invalid regex"},
      {"path without a slash", config({vhost("foo.com", {route(PathMatch::kExact, "x")})}),
       "path \"x\" does not start with '/'"},
      {"endpoint address that is not an IP",
       config({vhost("foo.com", {route(PathMatch::kPrefix, "/")})},
              {upstream("default/web:80", {{"web.default.svc", 80}})}),
       "bad address \"web.default.svc\""},
      {"duplicate endpoint",
       config({}, {upstream("default/web:80", {{"10.0.0.1", 80}, {"10.0.0.1", 80}})}),
       "duplicate endpoint 10.0.0.1:80"},
      {"certificate that does not parse",
       with_certificate(base_config(), "default/bad", "foo.com", "garbage", "garbage"),
       "certificate default/bad"},
      {"key that does not belong to the certificate",
       with_certificate(base_config(), "default/mixed", "foo.com", good_pem().first,
                        [] {
                          std::string cert, key, error;
                          dataplane::tls::generate_self_signed(&cert, &key, &error);
                          return key;
                        }()),
       "certificate default/mixed"},
      {"TLS host with an unknown certificate",
       [] {
         model::Config c = base_config();
         c.tls_hosts["foo.com"] = {"foo.com", "default/missing"};
         return c;
       }(),
       "unknown certificate \"default/missing\""},
  };
}

TEST(PublisherTest, InvalidFirstSnapshotIsRefusedAndNothingIsServed) {
  for (const auto& c : invalid_configs()) {
    Harness h;
    std::string reason = h.publisher.apply_snapshot(snapshot(5, c.config));
    EXPECT_NE(reason.find(c.want), std::string::npos)
        << c.name << ": reason \"" << reason << "\", want it to contain \"" << c.want << "\"";
    EXPECT_FALSE(h.publisher.ready()) << c.name;
    EXPECT_EQ(h.publisher.version(), 0u) << c.name;
    EXPECT_EQ(h.publisher.current(), nullptr) << c.name;
    EXPECT_TRUE(h.published.empty()) << c.name;
    EXPECT_EQ(h.publisher.rejected(), 1u) << c.name;
    EXPECT_EQ(h.publisher.applied(), 0u) << c.name;
  }
}

TEST(PublisherTest, InvalidSnapshotLeavesTheCurrentOneInPlace) {
  for (const auto& c : invalid_configs()) {
    Harness h;
    ASSERT_EQ(h.publisher.apply_snapshot(snapshot(1, base_config())), "") << c.name;
    auto before = h.publisher.current();
    std::string reason = h.publisher.apply_snapshot(snapshot(2, c.config));
    EXPECT_NE(reason.find(c.want), std::string::npos) << c.name << ": " << reason;
    EXPECT_EQ(h.publisher.current(), before) << c.name;
    EXPECT_EQ(h.publisher.current()->config(), base_config()) << c.name;
    EXPECT_EQ(h.publisher.version(), 1u) << c.name;
    EXPECT_TRUE(h.publisher.ready()) << c.name;
    EXPECT_EQ(h.published.size(), 1u) << c.name;
  }
}

TEST(PublisherTest, EveryProblemIsInTheReason) {
  Harness h;
  model::Config c = config({vhost("Bad.com", {route(PathMatch::kRegex, "(", "nope")})});
  std::string reason = h.publisher.apply_snapshot(snapshot(1, c));
  EXPECT_NE(reason.find("invalid host \"Bad.com\""), std::string::npos) << reason;
  EXPECT_NE(reason.find("invalid regex"), std::string::npos) << reason;
  EXPECT_NE(reason.find("unknown upstream \"nope\""), std::string::npos) << reason;
}

// ---- Deltas ----

TEST(PublisherTest, DeltaBeforeAnySnapshotIsRefused) {
  Harness h;
  model::Delta d;
  d.upsert_upstreams = {upstream("default/api:80")};
  std::string reason = h.publisher.apply_delta(delta(2, 0, d));
  EXPECT_NE(reason.find("send a snapshot"), std::string::npos) << reason;
  EXPECT_FALSE(h.publisher.ready());
  EXPECT_EQ(h.publisher.current(), nullptr);
  EXPECT_EQ(h.publisher.rejected(), 1u);
}

struct BadDeltaCase {
  std::string name;
  uint64_t base;
  model::Delta delta;
  std::string want;
};

TEST(PublisherTest, BadDeltasAreRefusedAndChangeNothing) {
  model::Delta remove_unknown_host;
  remove_unknown_host.remove_virtual_hosts = {"nope.com"};
  model::Delta remove_unknown_upstream;
  remove_unknown_upstream.remove_upstreams = {"default/nope:80"};
  model::Delta bad_regex;
  bad_regex.upsert_virtual_hosts = {vhost("foo.com", {route(PathMatch::kRegex, "/x(")})};
  model::Delta dangling;  // removes the upstream that routes still use
  dangling.remove_upstreams = {"default/web:80"};
  model::Delta partly_good;  // a good upsert and a bad removal: all or nothing
  partly_good.upsert_virtual_hosts = {vhost("new.com", {route(PathMatch::kPrefix, "/")})};
  partly_good.remove_virtual_hosts = {"bar.com", "gone.com"};
  model::Delta good;
  good.upsert_upstreams = {upstream("default/api:80")};
  model::Delta bad_certificate;
  bad_certificate.upsert_certificates = {{"default/bad", "garbage", "garbage"}};
  bad_certificate.upsert_tls_hosts = {{"foo.com", "default/bad"}};
  model::Delta remove_unknown_certificate;
  remove_unknown_certificate.remove_certificates = {"default/nope"};

  const std::vector<BadDeltaCase> cases = {
      {"base older than the serving version", 6, good, "delta base 6 does not match"},
      {"base newer than the serving version", 8, good, "serving version 7"},
      {"remove an unknown host", 7, remove_unknown_host,
       "remove of unknown virtual host \"nope.com\""},
      {"remove an unknown upstream", 7, remove_unknown_upstream,
       "remove of unknown upstream \"default/nope:80\""},
      {"regex that RE2 rejects", 7, bad_regex, "invalid regex \"/x(\""},
      {"leaves a route without its upstream", 7, dangling, "unknown upstream \"default/web:80\""},
      {"good and bad parts together", 7, partly_good, "\"gone.com\""},
      {"certificate that does not parse", 7, bad_certificate, "certificate default/bad"},
      {"remove an unknown certificate", 7, remove_unknown_certificate,
       "remove of unknown certificate \"default/nope\""},
  };
  for (const auto& c : cases) {
    Harness h;
    ASSERT_EQ(h.publisher.apply_snapshot(snapshot(7, base_config())), "");
    auto before = h.publisher.current();
    std::string reason = h.publisher.apply_delta(delta(8, c.base, c.delta));
    EXPECT_NE(reason.find(c.want), std::string::npos)
        << c.name << ": reason \"" << reason << "\", want it to contain \"" << c.want << "\"";
    EXPECT_EQ(h.publisher.current(), before) << c.name;
    EXPECT_EQ(before->config(), base_config()) << c.name;
    EXPECT_EQ(h.publisher.version(), 7u) << c.name;
    EXPECT_EQ(h.published.size(), 1u) << c.name;
    EXPECT_EQ(h.publisher.rejected(), 1u) << c.name;

    // The refused delta did not move the base: a good delta on 7 still applies.
    EXPECT_EQ(h.publisher.apply_delta(delta(9, 7, good)), "") << c.name;
    EXPECT_EQ(h.publisher.version(), 9u) << c.name;
  }
}

TEST(PublisherTest, ValidDeltaPublishesANewSnapshotAndLeavesTheOldOneAlone) {
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(snapshot(1, base_config())), "");
  // A request in flight holds the old snapshot.
  std::shared_ptr<const Snapshot> old = h.publisher.current();
  const model::Config old_config = old->config();

  model::Delta d;
  d.upsert_virtual_hosts = {vhost("foo.com", {route(PathMatch::kPrefix, "/", "default/api:80")})};
  d.remove_virtual_hosts = {"bar.com"};
  d.upsert_upstreams = {upstream("default/api:80", {{"10.0.0.9", 9090}})};
  d.default_route_changed = true;
  d.default_route = route(PathMatch::kPrefix, "/");
  EXPECT_EQ(h.publisher.apply_delta(delta(2, 1, d)), "");

  auto cur = h.publisher.current();
  ASSERT_NE(cur, old);
  EXPECT_EQ(cur->version, 2u);
  EXPECT_EQ(h.publisher.version(), 2u);
  EXPECT_EQ(h.publisher.applied(), 2u);
  auto want = model::apply(old_config, d);
  ASSERT_EQ(want.error, "");
  EXPECT_EQ(cur->config(), want.config);
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_EQ(h.published[1], cur);
  EXPECT_EQ(resolve(*cur, "foo.com", "/"), "default/api:80");
  EXPECT_EQ(resolve(*cur, "bar.com", "/x"), "default/web:80");  // via the new default route
  ASSERT_NE(cur->upstream("default/api:80"), nullptr);

  // The old snapshot is exactly what it was: config, router and upstreams.
  EXPECT_EQ(old->version, 1u);
  EXPECT_EQ(old->config(), old_config);
  EXPECT_EQ(old->config(), base_config());
  EXPECT_EQ(resolve(*old, "foo.com", "/"), "default/web:80");
  EXPECT_EQ(resolve(*old, "bar.com", "/x"), "default/web:80");
  EXPECT_EQ(resolve(*old, "bar.com", "/y"), "404");
  EXPECT_EQ(old->upstream("default/api:80"), nullptr);
  EXPECT_EQ(h.published[0], old);
}

// A Gateway programmed before any route attaches: the delta holds a listener and nothing else.
// It is not an upstream-only delta (those keep the compiled routing): the listener must be in the
// snapshot, or the next delta, naming it from a host, is refused.
TEST(PublisherTest, AListenerAloneIsAppliedAndHostsCanNameItNext) {
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(snapshot(1, base_config())), "");
  model::Delta d;
  d.upsert_listeners = {{"ns/gw:80", 20080, false}};
  EXPECT_EQ(h.publisher.apply_delta(delta(2, 1, d)), "");
  EXPECT_TRUE(h.publisher.current()->routing->config.listeners.contains("ns/gw:80"));

  model::Delta next;
  model::VirtualHost scoped = vhost("*", {route(PathMatch::kPrefix, "/", "default/web:80")});
  scoped.listener = "ns/gw:80";
  next.upsert_virtual_hosts = {scoped};
  EXPECT_EQ(h.publisher.apply_delta(delta(3, 2, next)), "");
  auto cur = h.publisher.current();
  auto m = cur->router_for("ns/gw:80").match("any.example", "/");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->upstream, "default/web:80");

  model::Delta gone;
  gone.remove_listeners = {"ns/gw:80"};
  gone.remove_virtual_hosts = {model::host_key(scoped)};
  EXPECT_EQ(h.publisher.apply_delta(delta(4, 3, gone)), "");
  EXPECT_TRUE(h.publisher.current()->routing->config.listeners.empty());
  EXPECT_EQ(h.publisher.current()->router_for("ns/gw:80").match("any.example", "/").route, nullptr);
}

TEST(PublisherTest, ChainOfDeltasMatchesTheModel) {
  Harness h;
  model::Config expected = base_config();
  ASSERT_EQ(h.publisher.apply_snapshot(snapshot(100, expected)), "");
  const std::vector<model::Config> steps = {
      config({vhost("foo.com", {route(PathMatch::kPrefix, "/")})}),
      config({vhost("foo.com", {route(PathMatch::kExact, "/a")}), vhost("*.foo.com", {})}),
      config({}, {}),
      base_config(),
  };
  uint64_t version = 100;
  for (const auto& next : steps) {
    std::string reason =
        h.publisher.apply_delta(delta(version + 1, version, model::diff(expected, next)));
    ASSERT_EQ(reason, "") << "step to version " << version + 1;
    ++version;
    expected = next;
    EXPECT_EQ(h.publisher.current()->config(), expected);
    EXPECT_EQ(h.publisher.version(), version);
  }
  EXPECT_EQ(h.published.size(), steps.size() + 1);
}

TEST(PublisherTest, GatewayWildcardCertificatesCoverAnyDepth) {
  // "**.bar.com" (a Gateway API listener's "*.bar.com"): one or more labels, after exact names
  // and one-label wildcards, the longest suffix first.
  Harness h;
  const auto& [cert, key] = good_pem();
  model::Config c = with_certificate(base_config(), "default/deep", "**.bar.com", cert, key);
  c = with_certificate(c, "default/deeper", "**.x.bar.com", cert, key);
  c = with_certificate(c, "default/one", "*.x.bar.com", cert, key);
  ASSERT_EQ(h.publisher.apply_snapshot(snapshot(1, c)), "");
  auto cur = h.publisher.current();
  auto name_of = [&](std::string_view host) -> std::string {
    const TlsEntry* e = cur->find_tls(host);
    return e == nullptr ? "none" : e->certificate->name;
  };
  EXPECT_EQ(name_of("a.bar.com"), "default/deep");
  EXPECT_EQ(name_of("a.b.c.bar.com"), "default/deep");
  EXPECT_EQ(name_of("y.x.bar.com"), "default/one");
  EXPECT_EQ(name_of("z.y.x.bar.com"), "default/deeper");
  EXPECT_EQ(name_of("bar.com"), "none");
  EXPECT_EQ(name_of("a..bar.com"), "none");

  // "*": the certificate of every name no other entry covers (a Gateway's HTTPS listener
  // without a hostname); the others keep theirs.
  c = with_certificate(c, "default/any", "*", cert, key);
  ASSERT_EQ(h.publisher.apply_snapshot(snapshot(2, c)), "");
  cur = h.publisher.current();
  EXPECT_EQ(name_of("bar.com"), "default/any");
  EXPECT_EQ(name_of("unknown-example.org"), "default/any");
  EXPECT_EQ(name_of("localhost"), "default/any");
  EXPECT_EQ(name_of("a.bar.com"), "default/deep");
}

TEST(PublisherTest, CertificatesArePublishedWithTheirHosts) {
  Harness h;
  const auto& [cert, key] = good_pem();
  model::Config c = with_certificate(base_config(), "default/foo-cert", "*.foo.com", cert, key);
  ASSERT_EQ(h.publisher.apply_snapshot(snapshot(1, c)), "");
  auto cur = h.publisher.current();
  const TlsEntry* wildcard = cur->find_tls("www.foo.com");
  ASSERT_NE(wildcard, nullptr);
  EXPECT_EQ(wildcard->certificate->name, "default/foo-cert");
  EXPECT_EQ(cur->find_tls("foo.com"), nullptr);  // "*.foo.com" takes one more label only
  EXPECT_EQ(cur->find_tls("a.www.foo.com"), nullptr);

  // Removing the certificate and its host by delta takes it out of the next snapshot only.
  model::Delta d;
  d.remove_certificates = {"default/foo-cert"};
  d.remove_tls_hosts = {"*.foo.com"};
  ASSERT_EQ(h.publisher.apply_delta(delta(2, 1, d)), "");
  EXPECT_EQ(h.publisher.current()->find_tls("www.foo.com"), nullptr);
  ASSERT_NE(cur->find_tls("www.foo.com"), nullptr);
  EXPECT_EQ(cur->find_tls("www.foo.com")->certificate->cert_pem, cert);
}

TEST(PublisherTest, SnapshotReplacesWhateverWasServed) {
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(snapshot(1, base_config())), "");
  model::Config other = config({vhost("other.com", {route(PathMatch::kPrefix, "/")})});
  ASSERT_EQ(h.publisher.apply_snapshot(snapshot(2, other)), "");
  EXPECT_EQ(h.publisher.current()->config(), other);
  EXPECT_EQ(resolve(*h.publisher.current(), "foo.com", "/"), "404");
  EXPECT_EQ(h.published.size(), 2u);
}

TEST(PublisherTest, EverySinkGetsEverySnapshot) {
  Publisher p(1);
  std::vector<uint64_t> a, b;
  p.add_sink([&](std::shared_ptr<const Snapshot> s) { a.push_back(s->version); });
  p.add_sink([&](std::shared_ptr<const Snapshot> s) { b.push_back(s->version); });
  ASSERT_EQ(p.apply_snapshot(snapshot(1, base_config())), "");
  ASSERT_NE(p.apply_snapshot(snapshot(2, config({vhost("A", {})}))), "");
  model::Delta d;
  d.remove_virtual_hosts = {"bar.com"};
  ASSERT_EQ(p.apply_delta(delta(3, 1, d)), "");
  EXPECT_EQ(a, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(b, a);
}

}  // namespace
}  // namespace tidegate::dataplane::runtime
