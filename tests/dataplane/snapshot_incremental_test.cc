// A delta that changes upstreams only (an EndpointSlice change) is applied to the serving
// snapshot's upstream table, sharing its compiled routing (runtime::update_upstreams). It must
// give the snapshot a full build of the same configuration gives (same routing answers, same
// upstreams and endpoints, same refusals), keep the old snapshot intact, share what did not change
// and give changed upstreams fresh round-robin positions.

#include <gtest/gtest.h>

#include <memory>
#include <random>
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
    c.virtual_hosts[host] = {
        host,
        {{"/api", PathMatch::kPrefix, up, "ns/in"}, {"/", PathMatch::kPrefix, "ns/u0:80", "ns/in"}},
        i == 2};
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
    ASSERT_NE(g->round_robin, nullptr);
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
  EXPECT_TRUE(second->all_endpoints.contains({boost::asio::ip::make_address("10.0.9.9"), 8080}));
  EXPECT_FALSE(second->all_endpoints.contains({boost::asio::ip::make_address("10.0.0.2"), 8080}));
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
      {boost::asio::ip::make_address("10.0.1.2"), 80}));
}

TEST(SnapshotIncrementalTest, RoundRobinPositionsKeptForUnchangedUpstreamsResetForChanged) {
  Harness h;
  ASSERT_EQ(h.publisher.apply_snapshot(protocol::Snapshot{1, base_config()}), "");
  auto first = h.publisher.current();
  // Workers have been picking: their positions moved.
  for (size_t w = 0; w < kWorkers; ++w) {
    first->upstream("ns/u0:80")->round_robin[w].value = 100 + w;
    first->upstream("ns/u1:80")->round_robin[w].value = 200 + w;
  }
  model::Delta d;
  d.upsert_upstreams = {upstream("ns/u1:80", {{"10.0.9.1", 8080}, {"10.0.9.2", 8080}})};
  ASSERT_EQ(h.publisher.apply_delta(delta(2, 1, d)), "");
  auto second = h.publisher.current();
  for (size_t w = 0; w < kWorkers; ++w) {
    // Unchanged: the same counters, so a worker's rotation goes on across the update.
    EXPECT_EQ(second->upstream("ns/u0:80")->round_robin[w].value, 100 + w);
    // Changed: its endpoint list is new, so positions start again (worker w at endpoint w).
    EXPECT_EQ(second->upstream("ns/u1:80")->round_robin[w].value, w);
  }
  // The old snapshot's changed upstream keeps its own counters for requests still using it.
  EXPECT_EQ(first->upstream("ns/u1:80")->round_robin[0].value, 200u);
  EXPECT_EQ(first->upstream("ns/u1:80")->endpoints.size(), 1u);
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

}  // namespace
}  // namespace tidegate::dataplane::runtime
