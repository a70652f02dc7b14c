// A delta that changes upstreams only (an EndpointSlice change) is applied to the serving
// snapshot's upstream table, sharing its compiled routing (runtime::update_upstreams). It must
// give the snapshot a full build of the same configuration gives (same routing answers, same
// upstreams and endpoints, same refusals), keep the old snapshot intact, share what did not change
// and give changed upstreams fresh round-robin positions.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "model/model.h"
#include "protocol/protocol.h"
#include "runtime/publisher.h"
#include "runtime/snapshot.h"

namespace tidegate::dataplane::runtime {
namespace {

using model::PathMatch;

constexpr size_t kWorkers = 3;

model::Upstream upstream(const std::string& name, std::vector<model::Endpoint> eps,
                         bool tls = false) {
  model::Upstream u{name, std::move(eps)};
  if (tls) u.tls = {true, "backend.internal", ""};
  return u;
}

// Hosts h0..h5 route to u0..u5 (h5 by its default route too); x0..x2 are named by no route.
model::Config base_config() {
  model::Config c;
  for (int i = 0; i < 6; ++i) {
    const std::string host = "h" + std::to_string(i) + ".example";
    const std::string up = "ns/u" + std::to_string(i) + ":80";
    c.virtual_hosts[host] = {host,
                             {{"/api", PathMatch::kPrefix, up, "ns/in"},
                              {"/", PathMatch::kPrefix, "ns/u0:80", "ns/in"}}};
    c.virtual_hosts[host].ssl_redirect = i == 2;
    c.upstreams[up] = upstream(up, {{"10.0.0." + std::to_string(i + 1), 8080}}, i == 3);
  }
  c.default_route = model::Route{"/", PathMatch::kPrefix, "ns/u5:80", "ns/default"};
  for (int i = 0; i < 3; ++i) {
    const std::string up = "ns/x" + std::to_string(i) + ":80";
    c.upstreams[up] = upstream(up, {{"10.0.1." + std::to_string(i + 1), 80}});
  }
  return c;
}

protocol::DeltaMsg delta(uint64_t version, uint64_t base, model::Delta d) {
  return protocol::DeltaMsg{version, base, std::move(d)};
}

std::string resolve(const Snapshot& s, const std::string& host, const std::string& path) {
  auto m = s.router->match(host, path);
  return m.route == nullptr ? "404" : m.route->upstream;
}

// Everything a request can see of a snapshot, compared field by field.
void expect_same(const Snapshot& got, const Snapshot& want, const std::string& where) {
  EXPECT_EQ(got.config(), want.config()) << where;
  for (const std::string host : {"h0.example", "h1.example", "h2.example", "h5.example", "other"}) {
    for (const std::string path : {"/", "/api", "/api/x", "/zzz"}) {
      EXPECT_EQ(resolve(got, host, path), resolve(want, host, path))
          << where << " " << host << path;
    }
  }
  EXPECT_EQ(got.ssl_redirect_hosts, want.ssl_redirect_hosts) << where;
  ASSERT_EQ(got.upstreams.size(), want.upstreams.size()) << where;
  for (const auto& [name, w] : want.upstreams) {
    const UpstreamState* g = got.upstream(name);
    ASSERT_NE(g, nullptr) << where << " " << name;
    EXPECT_EQ(g->name, w->name) << where;
    EXPECT_EQ(g->endpoints, w->endpoints) << where << " " << name;
    EXPECT_EQ(g->tls_context != nullptr, w->tls_context != nullptr) << where << " " << name;
    EXPECT_EQ(g->tls_server_name, w->tls_server_name) << where;
    EXPECT_EQ(g->tls_verify, w->tls_verify) << where;
    EXPECT_EQ(g->tls_key, w->tls_key) << where;
    ASSERT_NE(g->balancer, nullptr);
    // The balancer's table is parallel to the resolved endpoints.
    ASSERT_EQ(g->balancer->table().size(), g->endpoints.size()) << where << " " << name;
    for (uint32_t i = 0; i < g->endpoints.size(); ++i) {
      EXPECT_EQ(g->balancer->table().endpoint(i).address, endpoint_key(g->endpoints[i]));
    }
    EXPECT_EQ(g->balancer->workers(), kWorkers);
  }
  EXPECT_EQ(got.all_endpoints, want.all_endpoints) << where;
}

struct Harness {
  Publisher publisher{kWorkers};
  std::vector<std::shared_ptr<const Snapshot>> published;
  Harness() {
    publisher.add_sink([this](std::shared_ptr<const Snapshot> s) { published.push_back(s); });
  }
};

TEST(SnapshotIncrementalTest, RandomUpstreamDeltasEqualAFullBuild) {
  std::mt19937 rng(2024);
  auto below = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const std::vector<std::string> names = {"ns/u0:80", "ns/u1:80", "ns/u3:80", "ns/u5:80",
                                          "ns/x0:80", "ns/x1:80", "ns/x2:80", "ns/new:80"};
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(protocol::Snapshot{1, base_config()}), "");
  uint64_t version = 1;
  int accepted = 0, refused = 0, shared_routing = 0;
  for (int step = 0; step < 400; ++step) {
    const std::string where = "step " + std::to_string(step);
    std::shared_ptr<const Snapshot> before = h.publisher.current();
    const model::Config before_config = before->config();
    model::Delta d;
    for (int k = below(3); k >= 0; --k) {
      const std::string& name = names[below(static_cast<int>(names.size()))];
      if (below(5) == 0) {
        d.remove_upstreams.push_back(name);  // may be unknown or named by a route
        continue;
      }
      std::vector<model::Endpoint> eps;
      for (int e = below(4); e > 0; --e) {
        model::Endpoint ep{"10.0.2." + std::to_string(below(4) + 1), 8080};
        if (below(20) == 0) ep.address = below(2) ? "not-an-ip" : "fd00::" + std::to_string(e);
        eps.push_back(ep);  // sometimes a duplicate
      }
      d.upsert_upstreams.push_back(upstream(name, eps, below(4) == 0));
    }
    // What a full build of the same configuration gives.
    auto applied = model::apply(before_config, d);
    std::string want_error = applied.error;
    std::shared_ptr<const Snapshot> want;
    if (want_error.empty()) {
      want = build_snapshot(version + 1, applied.config, kWorkers, &want_error);
    }
    std::string got_error = h.publisher.apply_delta(delta(version + 1, version, d));
    ASSERT_EQ(got_error.empty(), want_error.empty())
        << where << ": " << got_error << " / " << want_error;
    if (d.upsert_upstreams.size() + d.remove_upstreams.size() == 1) {
      EXPECT_EQ(got_error, want_error) << where;  // with several problems the order may differ
    }
    if (!got_error.empty()) {
      ++refused;
      EXPECT_EQ(h.publisher.current(), before) << where;
      EXPECT_EQ(before->config(), before_config) << where;
      continue;
    }
    ++accepted;
    ++version;
    auto cur = h.publisher.current();
    ASSERT_NE(cur, before);
    EXPECT_EQ(cur->version, version);
    expect_same(*cur, *want, where);
    if (cur->routing == before->routing) ++shared_routing;
    // Unchanged upstreams are the same objects; changed ones are new.
    for (const auto& [name, state] : cur->upstreams) {
      auto old = before->upstreams.find(name);
      const bool same = old != before->upstreams.end() && old->second->model == state->model;
      EXPECT_EQ(old != before->upstreams.end() && old->second == state, same) << where << name;
    }
    // The old snapshot is untouched.
    EXPECT_EQ(before->config(), before_config) << where;
    if (HasFailure()) return;
  }
  EXPECT_GT(accepted, 150);
  EXPECT_GT(refused, 50);
  EXPECT_GT(shared_routing, 150);
}

TEST(SnapshotIncrementalTest, UpstreamOnlyDeltaSharesRoutingAndOtherDeltasDoNot) {
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(protocol::Snapshot{1, base_config()}), "");
  auto first = h.publisher.current();

  model::Delta endpoints;
  endpoints.upsert_upstreams = {upstream("ns/u1:80", {{"10.0.9.9", 8080}})};
  ASSERT_EQ(h.publisher.apply_delta(delta(2, 1, endpoints)), "");
  auto second = h.publisher.current();
  EXPECT_EQ(second->routing, first->routing);
  EXPECT_EQ(second->router.get(), first->router.get());
  EXPECT_EQ(resolve(*second, "h1.example", "/api"), "ns/u1:80");
  EXPECT_EQ(second->upstream("ns/u1:80")->endpoints,
            (std::vector<Endpoint>{{boost::asio::ip::make_address("10.0.9.9"), 8080}}));
  EXPECT_TRUE(
      second->all_endpoints.contains(Endpoint{boost::asio::ip::make_address("10.0.9.9"), 8080}));
  EXPECT_FALSE(
      second->all_endpoints.contains(Endpoint{boost::asio::ip::make_address("10.0.0.2"), 8080}));
  ASSERT_EQ(h.published.size(), 2u);
  EXPECT_EQ(h.published[1], second);

  model::Delta hosts;
  hosts.upsert_virtual_hosts = {{"new.example", {{"/", PathMatch::kPrefix, "ns/x0:80", "ns/n"}}}};
  ASSERT_EQ(h.publisher.apply_delta(delta(3, 2, hosts)), "");
  auto third = h.publisher.current();
  EXPECT_NE(third->routing, second->routing);
  EXPECT_EQ(resolve(*third, "new.example", "/"), "ns/x0:80");
  // A full build keeps the states of upstreams that did not change, too.
  EXPECT_EQ(third->upstreams.at("ns/u1:80"), second->upstreams.at("ns/u1:80"));
}

TEST(SnapshotIncrementalTest, RemovingAnUpstreamARouteNamesIsRefusedLikeAFullBuild) {
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(protocol::Snapshot{1, base_config()}), "");
  auto before = h.publisher.current();
  model::Delta d;
  d.remove_upstreams = {"ns/u5:80"};  // the default route and h5's /api
  std::string reason = h.publisher.apply_delta(delta(2, 1, d));
  EXPECT_NE(reason.find("host h5.example: unknown upstream \"ns/u5:80\""), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("default route: unknown upstream"), std::string::npos) << reason;
  EXPECT_EQ(h.publisher.current(), before);
  EXPECT_EQ(h.publisher.rejected(), 1u);

  // Removed and put back in the same delta (remove, then upsert, as model::apply): accepted.
  d.upsert_upstreams = {upstream("ns/u5:80", {{"10.0.3.1", 80}})};
  ASSERT_EQ(h.publisher.apply_delta(delta(2, 1, d)), "");
  EXPECT_EQ(h.publisher.current()->routing, before->routing);
  EXPECT_EQ(resolve(*h.publisher.current(), "nothing.example", "/"), "ns/u5:80");

  // An upstream no route names can go.
  model::Delta unused;
  unused.remove_upstreams = {"ns/x1:80"};
  ASSERT_EQ(h.publisher.apply_delta(delta(3, 2, unused)), "");
  EXPECT_EQ(h.publisher.current()->upstream("ns/x1:80"), nullptr);
  EXPECT_FALSE(h.publisher.current()->all_endpoints.contains(
      Endpoint{boost::asio::ip::make_address("10.0.1.2"), 80}));
}

TEST(SnapshotIncrementalTest, BalancersKeptForUnchangedUpstreamsCarriedOverForChanged) {
  Harness h;
  model::Config config = base_config();
  config.upstreams["ns/u1:80"].endpoints = {{"10.0.9.1", 8080}, {"10.0.9.2", 8080}};
  config.upstreams["ns/u1:80"].policy.mut().load_balance = model::LoadBalance::kLeastConn;
  ASSERT_EQ(h.publisher.apply_snapshot(protocol::Snapshot{1, config}), "");
  auto first = h.publisher.current();
  const UpstreamState* u1 = first->upstream("ns/u1:80");
  EXPECT_EQ(u1->balancer->table().policy().method, balancer::Method::kLeastConn);
  // Worker 2 has an attempt in flight on 10.0.9.2 when the endpoints change.
  const uint32_t busy = u1->balancer->table().find("10.0.9.2:8080");
  ASSERT_NE(busy, balancer::EndpointTable::kNone);
  u1->balancer->worker(2).on_start(busy);

  model::Delta d;
  d.upsert_upstreams = {upstream("ns/u1:80", {{"10.0.9.2", 8080}, {"10.0.9.3", 8080}})};
  d.upsert_upstreams[0].policy.mut().load_balance = model::LoadBalance::kLeastConn;
  ASSERT_EQ(h.publisher.apply_delta(delta(2, 1, d)), "");
  auto second = h.publisher.current();
  // Unchanged: the same state, balancer included.
  EXPECT_EQ(second->upstreams.at("ns/u0:80"), first->upstreams.at("ns/u0:80"));
  // Changed: a new balancer whose worker 2 still sees the attempt begun under the old one, so
  // least_conn sends its next request to the idle new endpoint.
  const UpstreamState* u1b = second->upstream("ns/u1:80");
  ASSERT_NE(u1b->balancer, u1->balancer);
  const uint32_t kept = u1b->balancer->table().find("10.0.9.2:8080");
  ASSERT_NE(kept, balancer::EndpointTable::kNone);
  EXPECT_EQ(u1b->balancer->worker(2).in_flight(kept), 1u);
  EXPECT_EQ(u1b->balancer->worker(1).in_flight(kept), 0u);
  EXPECT_EQ(u1b->balancer->worker(2).pick({}), u1b->balancer->table().find("10.0.9.3:8080"));
  // The attempt ends on the old balancer (its request holds the old snapshot): the new one sees it.
  u1->balancer->worker(2).on_finish(busy, std::chrono::milliseconds(1), false, {});
  EXPECT_EQ(u1b->balancer->worker(2).in_flight(kept), 0u);

  // A TLS-only change: a new state, the same balancer (endpoints and policy are unchanged).
  model::Delta tls;
  tls.upsert_upstreams = {d.upsert_upstreams[0]};
  tls.upsert_upstreams[0].tls = {true, "backend.internal", ""};
  ASSERT_EQ(h.publisher.apply_delta(delta(3, 2, tls)), "");
  auto third = h.publisher.current();
  EXPECT_NE(third->upstream("ns/u1:80"), u1b);
  EXPECT_EQ(third->upstream("ns/u1:80")->balancer, u1b->balancer);

  // A policy change: upstream-hash-by overrides load-balance.
  model::Delta hash = tls;
  hash.upsert_upstreams[0].policy.mut().hash_by = "$http_x_user";
  ASSERT_EQ(h.publisher.apply_delta(delta(4, 3, hash)), "");
  const auto& table = h.publisher.current()->upstream("ns/u1:80")->balancer->table();
  EXPECT_EQ(table.policy().method, balancer::Method::kConsistentHash);
  ASSERT_NE(table.policy().hash_by, nullptr);
  EXPECT_EQ(table.policy().hash_by->text(), "$http_x_user");
}

TEST(SnapshotIncrementalTest, AffinityCookiePathComesFromTheConfigurationOrTheRoute) {
  model::Config config = base_config();
  config.upstreams["ns/u1:80"].policy.mut().affinity = model::SessionAffinity{};
  model::SessionAffinity explicit_path;
  explicit_path.cookie_name = "route";
  explicit_path.path = "/app";
  explicit_path.max_age_seconds = 60;
  explicit_path.same_site = model::SameSite::kNone;
  config.upstreams["ns/u2:80"].policy.mut().affinity = explicit_path;
  std::string error;
  auto snap = build_snapshot(1, config, kWorkers, &error);
  ASSERT_NE(snap, nullptr) << error;
  const UpstreamState& u1 = *snap->upstream("ns/u1:80");
  const UpstreamState& u2 = *snap->upstream("ns/u2:80");
  EXPECT_FALSE(snap->upstream("ns/u0:80")->affinity.has_value());
  ASSERT_TRUE(u1.affinity.has_value());
  EXPECT_EQ(u1.affinity->config().cookie_name, "INGRESSCOOKIE");
  model::Route prefix{"/api", PathMatch::kPrefix, "ns/u1:80", "ns/in"};
  model::Route exact{"/api/v1", PathMatch::kExact, "ns/u1:80", "ns/in"};
  model::Route regex{"/api/v[0-9]+", PathMatch::kRegex, "ns/u1:80", "ns/in"};
  model::Route odd{"/a;b", PathMatch::kPrefix, "ns/u1:80", "ns/in"};
  EXPECT_EQ(affinity_cookie_path(u1, &prefix), "/api");
  EXPECT_EQ(affinity_cookie_path(u1, &exact), "/api/v1");
  EXPECT_EQ(affinity_cookie_path(u1, &regex), "/");
  EXPECT_EQ(affinity_cookie_path(u1, &odd), "/");  // not a cookie path
  EXPECT_EQ(affinity_cookie_path(u1, nullptr), "/");
  EXPECT_EQ(affinity_cookie_path(u2, &prefix), "/app");
  EXPECT_EQ(affinity_cookie_path(u2, &regex), "/app");
  const std::string value =
      balancer::CookieAffinity::cookie_value(u2.balancer->table().endpoint_hash(0));
  EXPECT_EQ(u2.affinity->set_cookie(u2.balancer->table(), 0, affinity_cookie_path(u2, &prefix)),
            "route=" + value + "; Path=/app; Max-Age=60; Secure; HttpOnly; SameSite=None");
}

TEST(SnapshotIncrementalTest, EndpointKeysAreCanonicalAndDuplicatesAfterParsingAreRefused) {
  EXPECT_EQ(endpoint_key({boost::asio::ip::make_address("10.0.0.1"), 8080}), "10.0.0.1:8080");
  EXPECT_EQ(endpoint_key({boost::asio::ip::make_address("0.0.0.0"), 1}), "0.0.0.0:1");
  EXPECT_EQ(endpoint_key({boost::asio::ip::make_address("255.254.100.9"), 65535}),
            "255.254.100.9:65535");
  EXPECT_EQ(endpoint_key({boost::asio::ip::make_address("fd00:0::1"), 80}), "[fd00::1]:80");
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(protocol::Snapshot{1, base_config()}), "");
  auto before = h.publisher.current();
  // Two spellings of one address: the model sees two endpoints, the balancer one. Refused (the
  // controller writes canonical addresses, so only a hand-made configuration gets here).
  model::Delta d;
  d.upsert_upstreams = {upstream("ns/x0:80", {{"fd00:0::1", 80}, {"fd00::1", 80}})};
  std::string reason = h.publisher.apply_delta(delta(2, 1, d));
  EXPECT_NE(reason.find("upstream ns/x0:80: endpoint [fd00::1]:80 is listed twice"),
            std::string::npos)
      << reason;
  EXPECT_EQ(h.publisher.current(), before);
  // The full build refuses it the same way.
  model::Config config = base_config();
  config.upstreams["ns/x0:80"].endpoints = {{"fd00:0::1", 80}, {"fd00::1", 80}};
  EXPECT_EQ(h.publisher.apply_snapshot(protocol::Snapshot{3, config}), reason);
}

TEST(SnapshotIncrementalTest, BadUpstreamIsRefusedAndNothingChanges) {
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(protocol::Snapshot{1, base_config()}), "");
  auto before = h.publisher.current();
  struct Case {
    std::string name;
    model::Upstream up;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"bad address", upstream("ns/u1:80", {{"10.0.0.300", 80}}),
       "upstream ns/u1:80: bad address \"10.0.0.300\""},
      {"duplicate", upstream("ns/u1:80", {{"10.0.0.7", 80}, {"10.0.0.7", 80}}),
       "upstream ns/u1:80: duplicate endpoint 10.0.0.7:80"},
      {"port 0", upstream("ns/new:80", {{"10.0.0.7", 0}}),
       "upstream ns/new:80: endpoint 10.0.0.7 has port 0"},
      {"TLS settings without TLS", model::Upstream{"ns/u1:80", {}, {false, "x", ""}},
       "upstream ns/u1:80: TLS settings without TLS"},
  };
  for (const auto& c : cases) {
    model::Delta d;
    d.upsert_upstreams = {upstream("ns/x0:80", {{"10.0.5.5", 80}}), c.up};
    EXPECT_EQ(h.publisher.apply_delta(delta(2, 1, d)), c.want) << c.name;
    EXPECT_EQ(h.publisher.current(), before) << c.name;
    EXPECT_EQ(h.published.size(), 1u) << c.name;
  }
  model::Delta unknown;
  unknown.remove_upstreams = {"ns/nope:80"};
  EXPECT_EQ(h.publisher.apply_delta(delta(2, 1, unknown)),
            "remove of unknown upstream \"ns/nope:80\"");
  EXPECT_EQ(h.publisher.current(), before);
}

// A full build of many upstreams (two threads build them: runtime/snapshot.cc) gives the tables
// that adding the same upstreams one delta at a time gives; an upstream that cannot be built is
// reported, the first in name order, wherever it falls.
TEST(SnapshotIncrementalTest, AFullBuildOfManyUpstreamsEqualsOneByDeltas) {
  auto name_of = [](int i) {
    std::string n = std::to_string(i);
    return "ns/app-" + std::string(5 - n.size(), '0') + n + ":80";  // name order is index order
  };
  model::Config config;
  for (int i = 0; i < 1600; ++i) {
    config.upstreams[name_of(i)] =
        upstream(name_of(i),
                 {{"10.2." + std::to_string(i % 7) + "." + std::to_string(i % 5 + 1),
                   static_cast<uint16_t>(8000 + i % 3)}},
                 i % 97 == 0);
  }
  std::string error;
  auto full = build_snapshot(1, config, kWorkers, &error);
  ASSERT_NE(full, nullptr) << error;
  model::Config one;
  one.upstreams[name_of(0)] = config.upstreams.at(name_of(0));
  auto by_deltas = build_snapshot(1, one, kWorkers, &error);
  ASSERT_NE(by_deltas, nullptr) << error;
  for (int i = 1; i < 1600; i += 100) {
    std::vector<model::Upstream> more;
    for (int j = i; j < std::min(1600, i + 100); ++j)
      more.push_back(config.upstreams.at(name_of(j)));
    by_deltas = update_upstreams(by_deltas->version + 1, *by_deltas, more, {}, kWorkers, &error);
    ASSERT_NE(by_deltas, nullptr) << error;
  }
  EXPECT_EQ(full->config(), by_deltas->config());
  EXPECT_EQ(full->upstreams.size(), 1600u);
  EXPECT_EQ(full->all_endpoints, by_deltas->all_endpoints);  // counts included
  for (const auto& [name, up] : config.upstreams) {
    const UpstreamState* a = full->upstream(name);
    const UpstreamState* b = by_deltas->upstream(name);
    ASSERT_NE(a, nullptr) << name;
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(a->name, name);
    EXPECT_EQ(a->model, up);
    EXPECT_EQ(a->endpoints, b->endpoints) << name;
    EXPECT_EQ(a->config_tag, b->config_tag) << name;
    EXPECT_EQ(a->tls_context != nullptr, up.tls.enabled) << name;
  }

  // A CA bundle without a certificate (refused by the build, not by the model's checks) early,
  // late, or both.
  auto broken = [&](std::initializer_list<int> at) {
    model::Config c = config;
    for (int i : at) c.upstreams[name_of(i)].tls = {true, "backend.internal", "not a PEM bundle"};
    std::string why;
    EXPECT_EQ(build_snapshot(2, c, kWorkers, &why), nullptr);
    return why;
  };
  const std::string early = broken({3});
  const std::string late = broken({1590});
  EXPECT_NE(early.find(name_of(3)), std::string::npos) << early;
  EXPECT_NE(late.find(name_of(1590)), std::string::npos) << late;
  EXPECT_EQ(broken({3, 1590}), early);
  EXPECT_EQ(broken({1590, 1200}), broken({1200}));

  // The routing fails too (a client-certificate CA that is not one): an upstream's error is still
  // the one reported, as when the upstreams were built before the routing.
  model::Config bad_routing = config;
  model::ClientAuth auth;
  auth.ca_pem = "not a PEM bundle";
  bad_routing.tls_hosts["a.example"] = model::TlsHost{"a.example", "", auth};
  std::string why;
  EXPECT_EQ(build_snapshot(2, bad_routing, kWorkers, &why), nullptr);
  EXPECT_EQ(why.rfind("TLS host a.example", 0), 0u) << why;
  for (int at : {3, 1590}) {
    model::Config both = bad_routing;
    both.upstreams[name_of(at)].tls = {true, "backend.internal", "not a PEM bundle"};
    EXPECT_EQ(build_snapshot(2, both, kWorkers, &why), nullptr);
    EXPECT_EQ(why, broken({at})) << at;
  }
}

// The tables of a snapshot that many upstreams share endpoints in: random deltas (upserts of new
// and known names, removes, removes of unknown names, a remove and an upsert of one name) applied
// one after the other must give the upstreams and the endpoint counts a build from scratch of the
// same configuration gives, and leave every earlier snapshot as it was.
TEST(SnapshotIncrementalTest, RandomDeltasOnManyUpstreamsEqualAFullBuild) {
  std::mt19937 rng(77);
  auto below = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  auto name_of = [](int i) { return "ns/app-" + std::to_string(i) + ":80"; };
  auto random_upstream = [&](const std::string& name) {
    std::set<model::Endpoint> eps;  // the model's endpoints are sorted and unique
    for (int e = below(4); e > 0; --e) {
      // 48 addresses among hundreds of upstreams: most endpoints are in several upstreams.
      eps.insert({"10.1." + std::to_string(below(6)) + "." + std::to_string(below(8) + 1), 80});
    }
    return upstream(name, std::vector<model::Endpoint>(eps.begin(), eps.end()));
  };
  auto endpoint_counts = [](const Snapshot& s) {
    std::map<std::string, uint32_t> out;
    for (const auto& [e, n] : s.all_endpoints) out[endpoint_key(e)] = n;
    return out;
  };
  model::Config config;
  for (int i = 0; i < 500; ++i) config.upstreams[name_of(i)] = random_upstream(name_of(i));
  std::string error;
  std::shared_ptr<const Snapshot> cur = build_snapshot(1, config, kWorkers, &error);
  ASSERT_NE(cur, nullptr) << error;
  struct Kept {
    std::shared_ptr<const Snapshot> snap;
    model::Config config;
    std::map<std::string, uint32_t> endpoints;
  };
  std::vector<Kept> kept;
  int refused = 0;
  for (int step = 0; step < 300; ++step) {
    const std::string where = "step " + std::to_string(step);
    model::Delta d;
    for (int k = below(5); k >= 0; --k) {
      const std::string name = name_of(below(560));  // some names are new
      switch (below(6)) {
        case 0:
          d.remove_upstreams.push_back(name);  // may be unknown
          break;
        case 1:
          d.remove_upstreams.push_back(name);
          d.upsert_upstreams.push_back(random_upstream(name));
          break;
        default:
          d.upsert_upstreams.push_back(random_upstream(name));
      }
    }
    auto applied = model::apply(config, d);
    auto next = update_upstreams(cur->version + 1, *cur, d.upsert_upstreams, d.remove_upstreams,
                                 kWorkers, &error);
    if (!applied.error.empty()) {
      EXPECT_EQ(next, nullptr) << where;
      EXPECT_EQ(error, applied.error) << where;
      ++refused;
      continue;
    }
    ASSERT_NE(next, nullptr) << where << ": " << error;
    auto want = build_snapshot(next->version, applied.config, kWorkers, &error);
    ASSERT_NE(want, nullptr) << where << ": " << error;
    EXPECT_EQ(next->config(), want->config()) << where;
    EXPECT_EQ(next->upstreams.size(), want->upstreams.size()) << where;
    EXPECT_EQ(next->all_endpoints, want->all_endpoints) << where;  // counts included
    for (const auto& [name, state] : want->upstreams) {
      const UpstreamState* g = next->upstream(name);
      ASSERT_NE(g, nullptr) << where << " " << name;
      EXPECT_EQ(g->endpoints, state->endpoints) << where << " " << name;
    }
    if (step % 25 == 0) kept.push_back({cur, config, endpoint_counts(*cur)});
    config = std::move(applied.config);
    cur = std::move(next);
    if (HasFailure()) return;
  }
  EXPECT_GT(refused, 10);
  // Every snapshot kept is as it was when the next one was made from it.
  for (const auto& k : kept) {
    EXPECT_EQ(k.snap->config(), k.config);
    EXPECT_EQ(endpoint_counts(*k.snap), k.endpoints);
    for (const auto& [name, up] : k.config.upstreams) {
      ASSERT_NE(k.snap->upstream(name), nullptr) << name;
      EXPECT_EQ(k.snap->upstream(name)->model, up);
    }
  }
}

// One changed upstream of thousands: the new snapshot shares all but the changed leaves of both
// tables with the one before, and a reader of the old snapshot still sees the old endpoints.
TEST(SnapshotIncrementalTest, AnUpdateSharesTheTablesItDoesNotChange) {
  model::Config config;
  for (int i = 0; i < 5000; ++i) {
    const std::string name = "ns/app-" + std::to_string(i) + ":80";
    config.upstreams[name] =
        upstream(name, {{"10.2." + std::to_string(i / 250) + "." + std::to_string(i % 250), 80}});
  }
  std::string error;
  auto old = build_snapshot(1, config, kWorkers, &error);
  ASSERT_NE(old, nullptr) << error;
  const size_t upstream_leaves = old->upstreams.shared_leaves_with(old->upstreams);
  const size_t endpoint_leaves = old->all_endpoints.shared_leaves_with(old->all_endpoints);
  auto next = update_upstreams(2, *old, {upstream("ns/app-7:80", {{"10.9.9.9", 80}})}, {}, kWorkers,
                               &error);
  ASSERT_NE(next, nullptr) << error;
  EXPECT_EQ(next->upstreams.shared_leaves_with(old->upstreams), upstream_leaves - 1);
  // The old endpoint's leaf and the new one's (possibly the same leaf).
  EXPECT_GE(next->all_endpoints.shared_leaves_with(old->all_endpoints), endpoint_leaves - 2);
  EXPECT_EQ(next->upstreams.size(), 5000u);
  EXPECT_EQ(next->all_endpoints.size(), 5000u);
  const Endpoint before{boost::asio::ip::make_address("10.2.0.7"), 80};
  const Endpoint after{boost::asio::ip::make_address("10.9.9.9"), 80};
  EXPECT_TRUE(old->all_endpoints.contains(before));
  EXPECT_FALSE(old->all_endpoints.contains(after));
  EXPECT_EQ(old->upstream("ns/app-7:80")->endpoints, std::vector<Endpoint>{before});
  EXPECT_FALSE(next->all_endpoints.contains(before));
  EXPECT_TRUE(next->all_endpoints.contains(after));
  EXPECT_EQ(next->upstream("ns/app-7:80")->endpoints, std::vector<Endpoint>{after});
  // Unchanged states are the same objects.
  EXPECT_EQ(next->upstreams.at("ns/app-8:80"), old->upstreams.at("ns/app-8:80"));

  // An upsert that changes nothing copies nothing.
  auto same = update_upstreams(3, *next,
                               {upstream("ns/app-8:80", config.upstreams["ns/app-8:80"].endpoints)},
                               {}, kWorkers, &error);
  ASSERT_NE(same, nullptr) << error;
  EXPECT_EQ(same->upstreams.shared_leaves_with(next->upstreams), upstream_leaves);
  EXPECT_EQ(same->all_endpoints.shared_leaves_with(next->all_endpoints),
            next->all_endpoints.shared_leaves_with(next->all_endpoints));

  // Removing an unknown upstream is refused and names it.
  EXPECT_EQ(update_upstreams(3, *next, {}, {"ns/nope:80"}, kWorkers, &error), nullptr);
  EXPECT_EQ(error, "remove of unknown upstream \"ns/nope:80\"");
}

}  // namespace
}  // namespace tidegate::dataplane::runtime
