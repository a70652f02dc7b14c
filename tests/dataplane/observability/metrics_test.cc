// Tests for the data plane's metrics: every series and label shows up in the scrape with the
// value recorded, per-route ids come from the snapshot's router, the label-set bound holds,
// label sets no routing table holds any more leave the scrape and are reused from zero, and
// shards written by several threads at once fold into exact totals.

#include "observability/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "router/router.h"
#include "runtime/snapshot.h"

namespace tidegate::dataplane::observability {
namespace {

namespace http = boost::beast::http;
using namespace std::chrono_literals;

// "series{labels}" -> value, from the text exposition. Fails the test on a malformed line.
std::map<std::string, double> parse(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    if (space == std::string::npos) continue;
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

double value(const std::map<std::string, double>& series, const std::string& key) {
  auto it = series.find(key);
  EXPECT_NE(it, series.end()) << "no series " << key;
  return it == series.end() ? -1 : it->second;
}

const std::string kWeb = R"(ingress="web",namespace="shop",host="foo.com",service="web-svc")";

model::Route route(std::string path, std::string upstream, std::string ingress) {
  return model::Route{std::move(path), model::PathMatch::kPrefix, std::move(upstream),
                      std::move(ingress)};
}

// docs/observability.md states the memory per label set.
static_assert(sizeof(RouteSlots) == 1048);

TEST(MetricsTest, LabelsComeFromTheRouteAndVirtualHost) {
  auto l = route_labels("foo.com", route("/", "shop/web-svc:8080", "shop/web"));
  EXPECT_EQ(l, (RouteLabels{"web", "shop", "foo.com", "web-svc"}));
  auto d = route_labels("", route("/", "other/svc:http", "other/fallback"));
  EXPECT_EQ(d, (RouteLabels{"fallback", "other", "", "svc"}));
  // A GRPCRoute method match (ranked by precedence_length) names its service and method; a
  // service-only match its service; a regex, or any other route, neither.
  model::Route grpc = route("/shop.v1.Cart/AddItem", "shop/cart:9000", "shop/cart");
  grpc.match = model::PathMatch::kExact;
  grpc.precedence_length = 4096 * 12 + 8;
  EXPECT_EQ(route_labels("*", grpc),
            (RouteLabels{"cart", "shop", "*", "cart", "shop.v1.Cart", "AddItem"}));
  grpc.path = "/shop.v1.Cart/";
  grpc.match = model::PathMatch::kPrefix;
  EXPECT_EQ(route_labels("*", grpc),
            (RouteLabels{"cart", "shop", "*", "cart", "shop.v1.Cart", ""}));
  grpc.path = "/shop.v1.Cart/Add.*";
  grpc.match = model::PathMatch::kRegex;
  EXPECT_EQ(route_labels("*", grpc), (RouteLabels{"cart", "shop", "*", "cart", "", ""}));
  model::Route plain = route("/shop.v1.Cart/AddItem", "shop/cart:9000", "shop/cart");
  plain.match = model::PathMatch::kExact;  // an Ingress path of the same text
  EXPECT_EQ(route_labels("*", plain), (RouteLabels{"cart", "shop", "*", "cart", "", ""}));
}

TEST(MetricsTest, ProtocolAndGrpcStatusSeries) {
  Metrics metrics(2);
  const LabelSetId web = metrics.intern({"web", "shop", "foo.com", "web-svc"});
  const LabelSetId cart = metrics.intern({"cart", "shop", "*", "cart", "shop.v1.Cart", "AddItem"});
  EXPECT_NE(cart, metrics.intern({"cart", "shop", "*", "cart", "shop.v1.Cart", "Remove"}));
  RequestObservation h1{web, http::verb::get, 200, 1, 1, 1ms, 1ms};
  RequestObservation h2 = h1;
  h2.http2 = true;
  metrics.worker(0).record_request(h1);
  metrics.worker(1).record_request(h1);
  metrics.worker(1).record_request(h2);
  RequestObservation call{cart, http::verb::post, 200, 1, 1, 1ms, 1ms, true, 0};
  metrics.worker(0).record_request(call);
  call.grpc_status = 14;
  metrics.worker(1).record_request(call);
  metrics.worker(1).record_request(call);
  call.grpc_status = 17;  // not a code: counted as a request, no gRPC status series
  metrics.worker(1).record_request(call);
  const auto s = parse(metrics.scrape());
  EXPECT_EQ(value(s, "tidegate_protocol_requests_total{" + kWeb + ",protocol=\"http/1.1\"}"), 2);
  EXPECT_EQ(value(s, "tidegate_protocol_requests_total{" + kWeb + ",protocol=\"h2\"}"), 1);
  const std::string cart_labels =
      R"(ingress="cart",namespace="shop",host="*",service="cart",grpc_service="shop.v1.Cart",)"
      R"(grpc_method="AddItem")";
  EXPECT_EQ(value(s, "tidegate_protocol_requests_total{" + cart_labels + ",protocol=\"h2\"}"), 4);
  EXPECT_EQ(value(s, "tidegate_grpc_responses_total{" + cart_labels + ",grpc_status=\"0\"}"), 1);
  EXPECT_EQ(value(s, "tidegate_grpc_responses_total{" + cart_labels + ",grpc_status=\"14\"}"), 2);
  for (const auto& [key, v] : s) {
    EXPECT_EQ(key.find("grpc_status=\"17\""), std::string::npos) << key;
    // Routes that are not GRPCRoute method matches carry no gRPC labels at all.
    if (key.find("ingress=\"web\"") != std::string::npos) {
      EXPECT_EQ(key.find("grpc_"), std::string::npos) << key;
    }
  }
}

TEST(MetricsTest, MethodAndStatusClassesAreBounded) {
  EXPECT_EQ(method_of(http::verb::get), Method::kGet);
  EXPECT_EQ(method_of(http::verb::delete_), Method::kDelete);
  EXPECT_EQ(method_of(http::verb::propfind), Method::kOther);
  EXPECT_EQ(method_of(http::verb::unknown), Method::kOther);
  EXPECT_STREQ(to_string(Method::kOptions), "OPTIONS");
  EXPECT_EQ(status_class(0), 0u);
  EXPECT_EQ(status_class(99), 0u);
  EXPECT_EQ(status_class(101), 1u);
  EXPECT_EQ(status_class(200), 2u);
  EXPECT_EQ(status_class(308), 3u);
  EXPECT_EQ(status_class(499), 4u);
  EXPECT_EQ(status_class(599), 5u);
  EXPECT_EQ(status_class(600), 0u);
}

TEST(MetricsTest, ScrapeHasEverySeriesWithItsLabels) {
  Metrics metrics(2);
  const LabelSetId web = metrics.intern({"web", "shop", "foo.com", "web-svc"});
  EXPECT_EQ(metrics.intern({"web", "shop", "foo.com", "web-svc"}), web);  // interned once
  auto& w0 = metrics.worker(0);
  auto& w1 = metrics.worker(1);

  RequestObservation get{web, http::verb::get, 200, 100, 1000, 3ms, 2ms};
  w0.record_request(get);
  w1.record_request(get);
  w0.record_request({web, http::verb::post, 503, 10, 20, 30ms, -1ns});  // no upstream response
  w1.record_request({web, http::verb::propfind, 404, 1, 2, 0ns, 0ns});
  w0.record_request({kNoRouteLabels, http::verb::get, 404, 50, 60, 1ms, -1ns});
  w0.record_upstream_connect(web, 300us);
  w1.record_upstream_connect(web, 2s);
  w0.record_rate_limited(web);
  w1.record_substitution({.labels = web,
                          .responses = 2,
                          .bytes_in = 4096,
                          .bytes_out = 4100,
                          .replacements = 9,
                          .forced_releases = 1,
                          .abandoned = 1,
                          .skipped_by_memo = 7,
                          .rules_skipped = 20});
  w0.record_substitution({.labels = web, .compressed_passthrough = 1});
  w0.record_substitution({.labels = web, .skipped_by_memo = 1, .rules_skipped = 3});
  w0.connection_opened();
  w0.connection_opened();
  w1.connection_opened();
  w0.connection_closed();
  w0.tls_handshake(true);
  w1.tls_handshake(true);
  w1.tls_handshake(false);
  w0.tunnel_opened();
  w1.tunnel_opened();
  w1.tunnel_closed();
  metrics.config().applied(42, std::chrono::system_clock::time_point(1'700'000'000'500ms));
  metrics.config().rejected();
  metrics.config().rejected();

  const std::string text = metrics.scrape();
  const auto s = parse(text);

  // Requests by route labels, method and status class.
  EXPECT_EQ(value(s, "tidegate_requests_total{" + kWeb + R"(,method="GET",status="2xx"})"), 2);
  EXPECT_EQ(value(s, "tidegate_requests_total{" + kWeb + R"(,method="POST",status="5xx"})"), 1);
  EXPECT_EQ(value(s, "tidegate_requests_total{" + kWeb + R"(,method="OTHER",status="4xx"})"), 1);
  EXPECT_EQ(
      value(
          s,
          R"(tidegate_requests_total{ingress="",namespace="",host="",service="",method="GET",status="4xx"})"),
      1);
  EXPECT_EQ(s.count("tidegate_requests_total{" + kWeb + R"(,method="GET",status="5xx"})"), 0u)
      << "cells never incremented are not exported";

  // Request latency: 3 ms, 3 ms, 30 ms, 0 ms.
  const std::string rd = "tidegate_request_duration_seconds";
  EXPECT_EQ(value(s, rd + "_count{" + kWeb + "}"), 4);
  EXPECT_NEAR(value(s, rd + "_sum{" + kWeb + "}"), 0.036, 1e-9);
  EXPECT_EQ(value(s, rd + "_bucket{" + kWeb + R"(,le="0.005"})"), 3);
  EXPECT_EQ(value(s, rd + "_bucket{" + kWeb + R"(,le="0.025"})"), 3);
  EXPECT_EQ(value(s, rd + "_bucket{" + kWeb + R"(,le="0.05"})"), 4);
  EXPECT_EQ(value(s, rd + "_bucket{" + kWeb + R"(,le="+Inf"})"), 4);

  // Upstream latency: only the three requests that had an upstream response.
  const std::string ud = "tidegate_upstream_response_duration_seconds";
  EXPECT_EQ(value(s, ud + "_count{" + kWeb + "}"), 3);
  EXPECT_NEAR(value(s, ud + "_sum{" + kWeb + "}"), 0.004, 1e-9);
  EXPECT_EQ(value(s, ud + "_bucket{" + kWeb + R"(,le="0.005"})"), 3);

  // Upstream connect: 300 us and 2 s (past the last finite bound).
  const std::string cd = "tidegate_upstream_connect_duration_seconds";
  EXPECT_EQ(value(s, cd + "_count{" + kWeb + "}"), 2);
  EXPECT_NEAR(value(s, cd + "_sum{" + kWeb + "}"), 2.0003, 1e-9);
  EXPECT_EQ(value(s, cd + "_bucket{" + kWeb + R"(,le="0.00025"})"), 0);
  EXPECT_EQ(value(s, cd + "_bucket{" + kWeb + R"(,le="0.0005"})"), 1);
  EXPECT_EQ(value(s, cd + "_bucket{" + kWeb + R"(,le="1"})"), 1);
  EXPECT_EQ(value(s, cd + "_bucket{" + kWeb + R"(,le="+Inf"})"), 2);

  EXPECT_EQ(value(s, "tidegate_request_bytes_total{" + kWeb + "}"), 211);
  EXPECT_EQ(value(s, "tidegate_response_bytes_total{" + kWeb + "}"), 2022);
  EXPECT_EQ(value(s, "tidegate_rate_limited_requests_total{" + kWeb + "}"), 1);
  EXPECT_EQ(value(s, "tidegate_substitution_input_bytes_total{" + kWeb + "}"), 4096);
  EXPECT_EQ(value(s, "tidegate_substitution_output_bytes_total{" + kWeb + "}"), 4100);
  EXPECT_EQ(value(s, "tidegate_substitution_responses_total{" + kWeb + "}"), 2);
  EXPECT_EQ(value(s, "tidegate_substitution_replacements_total{" + kWeb + "}"), 9);
  EXPECT_EQ(value(s, "tidegate_substitution_forced_releases_total{" + kWeb + "}"), 1);
  EXPECT_EQ(value(s, "tidegate_substitution_abandoned_total{" + kWeb + "}"), 1);
  EXPECT_EQ(value(s, "tidegate_substitution_skipped_by_memo_total{" + kWeb + "}"), 8);
  EXPECT_EQ(value(s, "tidegate_substitution_rules_skipped_total{" + kWeb + "}"), 23);
  EXPECT_EQ(value(s, "tidegate_substitution_compressed_passthrough_total{" + kWeb + "}"), 1);
  EXPECT_EQ(
      s.count(
          R"(tidegate_substitution_responses_total{ingress="",namespace="",host="",service=""})"),
      0u)
      << "routes without substitution events have no substitution series";

  EXPECT_EQ(value(s, "tidegate_connections_active"), 2);
  EXPECT_EQ(value(s, "tidegate_connections_total"), 3);
  EXPECT_EQ(value(s, "tidegate_tls_handshakes_total"), 2);
  EXPECT_EQ(value(s, "tidegate_tls_handshake_failures_total"), 1);
  EXPECT_EQ(value(s, "tidegate_websocket_tunnels_open"), 1);
  EXPECT_EQ(value(s, "tidegate_websocket_tunnels_total"), 2);
  EXPECT_EQ(value(s, "tidegate_config_generation"), 42);
  EXPECT_NEAR(value(s, "tidegate_config_last_apply_timestamp_seconds"), 1'700'000'000.5, 1e-3);
  EXPECT_EQ(value(s, "tidegate_config_acks_total"), 1);
  EXPECT_EQ(value(s, "tidegate_config_nacks_total"), 2);
  EXPECT_EQ(value(s, "tidegate_metrics_label_sets"), 3);  // the two reserved ones and web
  EXPECT_EQ(value(s, "tidegate_metrics_label_set_overflows_total"), 0);

  EXPECT_NE(text.find("# TYPE tidegate_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tidegate_request_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tidegate_connections_active gauge"), std::string::npos);
}

TEST(MetricsTest, ANegativeGaugeShardStillFoldsToTheTrueValue) {
  // A connection is opened and closed on one worker, but a shard read alone can be "negative"
  // when, say, the tunnels of another shard are counted; folding must be modular.
  Metrics metrics(2);
  metrics.worker(0).tunnel_opened();
  metrics.worker(0).tunnel_opened();
  metrics.worker(1).tunnel_closed();
  EXPECT_EQ(value(parse(metrics.scrape()), "tidegate_websocket_tunnels_open"), 1);
}

TEST(MetricsTest, SourcesAppendFamiliesAtScrape) {
  Metrics metrics(1);
  int calls = 0;
  metrics.add_source([&calls](std::vector<prometheus::MetricFamily>& out) {
    ++calls;
    prometheus::MetricFamily f;
    f.name = "tidegate_test_value";
    f.help = "test";
    f.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric m;
    m.gauge.value = 5;
    f.metric.push_back(m);
    out.push_back(f);
  });
  EXPECT_EQ(value(parse(metrics.scrape()), "tidegate_test_value"), 5);
  EXPECT_EQ(calls, 1);
}

TEST(MetricsTest, UpstreamEndpointsComeFromTheServedSnapshot) {
  model::Config config;
  config.upstreams["shop/web:80"] = {"shop/web:80", {{"10.0.0.1", 80}, {"10.0.0.2", 80}}};
  config.upstreams["shop/api:80"] = {"shop/api:80", {}};
  config.virtual_hosts["foo.com"] = {"foo.com", {route("/", "shop/web:80", "shop/web")}};
  std::string error;
  auto snap = runtime::build_snapshot(7, config, 1, &error);
  ASSERT_NE(snap, nullptr) << error;
  Metrics metrics(1);
  metrics.add_source([&snap](auto& out) { append_snapshot_metrics(snap.get(), out); });
  auto s = parse(metrics.scrape());
  EXPECT_EQ(value(s, R"(tidegate_upstream_endpoints{upstream="shop/web:80"})"), 2);
  EXPECT_EQ(value(s, R"(tidegate_upstream_endpoints{upstream="shop/api:80"})"), 0);

  std::vector<prometheus::MetricFamily> none;
  append_snapshot_metrics(nullptr, none);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0].metric.empty());
}

TEST(MetricsTest, RouteIdsAreResolvedOncePerSnapshotFromTheRouter) {
  model::Config config;
  config.upstreams["shop/web:80"] = {"shop/web:80", {{"10.0.0.1", 80}}};
  config.upstreams["shop/api:80"] = {"shop/api:80", {{"10.0.0.2", 80}}};
  config.virtual_hosts["foo.com"] = {
      "foo.com",
      {route("/", "shop/web:80", "shop/web"), route("/static", "shop/web:80", "shop/web"),
       route("/api", "shop/api:80", "shop/api")}};
  config.virtual_hosts["*.bar.com"] = {"*.bar.com", {route("/", "shop/web:80", "shop/web")}};
  config.default_route = route("/", "shop/web:80", "shop/default");
  std::string error;
  auto router = router::Router::build(config, &error);
  ASSERT_NE(router, nullptr) << error;

  Metrics metrics(1);
  RouteMetricIds ids(*router, metrics);
  EXPECT_EQ(ids.size(), 5u);  // every route, the default one included

  auto id_of = [&](std::string_view host, std::string_view path) {
    return ids.find(router->match(host, path));
  };
  const LabelSetId web = id_of("foo.com", "/");
  EXPECT_EQ(id_of("foo.com", "/static/x.css"), web) << "same ingress, host and service";
  const LabelSetId api = id_of("foo.com", "/api/v1");
  const LabelSetId wildcard = id_of("x.bar.com", "/");
  const LabelSetId fallback = id_of("nothing.example", "/");
  for (LabelSetId id : {web, api, wildcard, fallback}) {
    EXPECT_NE(id, kNoRouteLabels);
    EXPECT_NE(id, kOverflowLabels);
  }
  EXPECT_NE(web, api);
  EXPECT_NE(web, wildcard);
  EXPECT_NE(web, fallback);
  EXPECT_EQ(ids.find(static_cast<const model::Route*>(nullptr)), kNoRouteLabels);

  // A new snapshot with the same routes gets the same ids: series continue across changes.
  auto router2 = router::Router::build(config, &error);
  RouteMetricIds ids2(*router2, metrics);
  EXPECT_EQ(ids2.find(router2->match("foo.com", "/api")), api);
  EXPECT_EQ(metrics.label_sets(), 2u + 4u);

  metrics.worker(0).record_request({wildcard, http::verb::get, 200, 1, 1, 1ms, 1ms});
  metrics.worker(0).record_request({fallback, http::verb::get, 200, 1, 1, 1ms, 1ms});
  auto s = parse(metrics.scrape());
  EXPECT_EQ(
      value(
          s,
          R"(tidegate_requests_total{ingress="web",namespace="shop",host="*.bar.com",service="web",method="GET",status="2xx"})"),
      1);
  EXPECT_EQ(
      value(
          s,
          R"(tidegate_requests_total{ingress="default",namespace="shop",host="",service="web",method="GET",status="2xx"})"),
      1);
}

TEST(MetricsTest, LabelSetsPastTheBoundShareTheOverflowSet) {
  Metrics metrics(1, MetricsOptions{4});  // the two reserved sets + two
  const LabelSetId a = metrics.intern({"a", "ns", "a.com", "a"});
  const LabelSetId b = metrics.intern({"b", "ns", "b.com", "b"});
  EXPECT_EQ(a, 2u);
  EXPECT_EQ(b, 3u);
  EXPECT_EQ(metrics.intern({"c", "ns", "c.com", "c"}), kOverflowLabels);
  EXPECT_EQ(metrics.intern({"d", "ns", "d.com", "d"}), kOverflowLabels);
  EXPECT_EQ(metrics.intern({"a", "ns", "a.com", "a"}), a) << "known sets keep their id";
  EXPECT_EQ(metrics.label_sets(), 4u);

  metrics.worker(0).record_request({kOverflowLabels, http::verb::get, 200, 0, 0, 1ms, -1ns});
  // An id nobody interned (a bug) lands in the no-route set instead of out of bounds.
  metrics.worker(0).record_request({1'000'000, http::verb::get, 200, 0, 0, 1ms, -1ns});
  auto s = parse(metrics.scrape());
  EXPECT_EQ(value(s, "tidegate_metrics_label_set_overflows_total"), 2);
  EXPECT_EQ(value(s, "tidegate_metrics_label_sets"), 4);
  EXPECT_EQ(
      value(
          s,
          R"(tidegate_requests_total{ingress="_overflow_",namespace="_overflow_",host="_overflow_",service="_overflow_",method="GET",status="2xx"})"),
      1);
  EXPECT_EQ(
      value(
          s,
          R"(tidegate_requests_total{ingress="",namespace="",host="",service="",method="GET",status="2xx"})"),
      1);
}

// The series of "a" in a scrape: every line whose labels name ingress "a".
size_t series_of(const std::map<std::string, double>& s, const std::string& ingress) {
  size_t n = 0;
  for (const auto& [k, v] : s) {
    if (k.find("ingress=\"" + ingress + "\"") != std::string::npos) ++n;
  }
  return n;
}

TEST(MetricsTest, AReleasedLabelSetLeavesTheScrapeAndItsIdStartsAgainFromZero) {
  Metrics metrics(2, MetricsOptions{4});  // the two reserved sets + two
  const LabelSetId a = metrics.intern({"a", "ns", "a.com", "a"});
  const LabelSetId b = metrics.intern({"b", "ns", "b.com", "b"});
  EXPECT_EQ(metrics.intern({"a", "ns", "a.com", "a"}), a) << "a second reference, same id";
  for (size_t w = 0; w < 2; ++w) {
    metrics.worker(w).record_request({a, http::verb::get, 200, 10, 20, 1ms, 1ms});
    metrics.worker(w).record_upstream_connect(a, 1ms);
    metrics.worker(w).record_rate_limited(a);
    metrics.worker(w).record_substitution({.labels = a, .responses = 1, .bytes_in = 5});
  }
  metrics.worker(0).record_request({b, http::verb::get, 200, 1, 1, 1ms, 1ms});
  auto s = parse(metrics.scrape());
  const std::string a_get =
      R"(tidegate_requests_total{ingress="a",namespace="ns",host="a.com",service="a",method="GET",status="2xx"})";
  EXPECT_EQ(value(s, a_get), 2);

  metrics.release(a);  // one reference left
  EXPECT_EQ(value(parse(metrics.scrape()), a_get), 2);
  EXPECT_EQ(metrics.label_sets(), 4u);
  metrics.release(a);  // the last one
  EXPECT_EQ(metrics.label_sets(), 3u);
  s = parse(metrics.scrape());
  EXPECT_EQ(series_of(s, "a"), 0u) << "no series of a released label set";
  EXPECT_EQ(value(s, "tidegate_metrics_label_sets"), 3);
  EXPECT_GT(series_of(s, "b"), 0u) << "the others stay";
  metrics.release(a);  // one release too many changes nothing
  metrics.release(kNoRouteLabels);
  metrics.release(kOverflowLabels);
  EXPECT_EQ(metrics.label_sets(), 3u);

  // The bound counts label sets in use: the freed id serves the next new set, from zero in
  // every shard (a set that overflowed before gets an id of its own once there is room).
  EXPECT_EQ(metrics.intern({"c", "ns", "c.com", "c"}), a);
  EXPECT_EQ(metrics.intern({"d", "ns", "d.com", "d"}), kOverflowLabels);
  s = parse(metrics.scrape());
  EXPECT_EQ(series_of(s, "c"), 0u) << "nothing recorded for c yet";
  metrics.worker(1).record_request({a, http::verb::get, 200, 1, 1, 1ms, 1ms});
  s = parse(metrics.scrape());
  EXPECT_EQ(
      value(
          s,
          R"(tidegate_requests_total{ingress="c",namespace="ns",host="c.com",service="c",method="GET",status="2xx"})"),
      1);
  EXPECT_EQ(
      value(s,
            R"(tidegate_request_bytes_total{ingress="c",namespace="ns",host="c.com",service="c"})"),
      1);
  EXPECT_EQ(series_of(s, "a"), 0u);
  // Only the request series: a's connect histogram, rate limit and substitution counts are gone.
  for (const auto& [k, v] : s) {
    if (k.find("ingress=\"c\"") == std::string::npos) continue;
    EXPECT_TRUE(k.starts_with("tidegate_requests_total") ||
                k.starts_with("tidegate_protocol_requests_total") ||
                k.starts_with("tidegate_request_duration_seconds") ||
                k.starts_with("tidegate_upstream_response_duration_seconds") ||
                k.starts_with("tidegate_request_bytes_total") ||
                k.starts_with("tidegate_response_bytes_total"))
        << k;
  }
}

TEST(MetricsTest, TheLowestFreeIdIsReusedAndEmptiedPagesAreGivenBack) {
  Metrics metrics(2);
  EXPECT_EQ(metrics.worker(0).pages(), 1u);  // the reserved sets' page
  std::vector<LabelSetId> ids;
  for (int i = 0; i < 200; ++i) {
    ids.push_back(metrics.intern({"r" + std::to_string(i), "ns", "h.com", "svc"}));
    EXPECT_EQ(ids.back(), static_cast<LabelSetId>(i + 2));
  }
  for (size_t w = 0; w < 2; ++w) EXPECT_EQ(metrics.worker(w).pages(), 4u);  // ids 0-201
  metrics.worker(1).record_request({ids[150], http::verb::get, 200, 1, 1, 1ms, 1ms});
  metrics.release(ids[7]);
  metrics.release(ids[3]);
  EXPECT_EQ(metrics.intern({"x", "ns", "h.com", "svc"}), ids[3]) << "the lowest free id first";
  // Every id of the last two pages released: those pages go, in every shard.
  for (size_t i = 126; i < ids.size(); ++i) metrics.release(ids[i]);
  for (size_t w = 0; w < 2; ++w) EXPECT_EQ(metrics.worker(w).pages(), 2u);
  EXPECT_EQ(metrics.label_sets(), 2u + 200u - 74u - 1u);
  // Reused ids on a page that came back start from zero too: 9 first, then 128-151.
  for (int i = 0; i < 25; ++i) metrics.intern({"again" + std::to_string(i), "ns", "h.com", "svc"});
  EXPECT_EQ(metrics.worker(1).pages(), 3u);
  EXPECT_EQ(metrics.intern({"y", "ns", "h.com", "svc"}), ids[150]);
  auto s = parse(metrics.scrape());
  EXPECT_EQ(series_of(s, "y"), 0u) << "r150's request is not y's";
  EXPECT_EQ(series_of(s, "r150"), 0u);
  metrics.worker(1).record_request({ids[150], http::verb::get, 200, 1, 1, 1ms, 1ms});
  s = parse(metrics.scrape());
  EXPECT_EQ(
      value(
          s,
          R"(tidegate_requests_total{ingress="y",namespace="ns",host="h.com",service="svc",method="GET",status="2xx"})"),
      1);
}

TEST(MetricsTest, AnIdReleasedDuringAScrapeIsReusedOnlyAfterIt) {
  Metrics metrics(1, MetricsOptions{4});
  const LabelSetId a = metrics.intern({"a", "ns", "a.com", "a"});
  metrics.intern({"b", "ns", "b.com", "b"});
  metrics.worker(0).record_request({a, http::verb::get, 200, 1, 1, 1ms, 1ms});
  LabelSetId during = 0;
  bool once = true;
  // Sources run inside the scrape, after the route series were read.
  metrics.add_source([&](auto&) {
    if (!once) return;
    once = false;
    metrics.release(a);
    during = metrics.intern({"c", "ns", "c.com", "c"});
  });
  auto s = parse(metrics.scrape());
  EXPECT_GT(series_of(s, "a"), 0u) << "read before the release";
  EXPECT_EQ(during, kOverflowLabels) << "a's slots were being read: not reused yet";
  EXPECT_EQ(metrics.intern({"c", "ns", "c.com", "c"}), a) << "reused once the scrape ended";
  s = parse(metrics.scrape());
  EXPECT_EQ(series_of(s, "a"), 0u);
  EXPECT_EQ(series_of(s, "c"), 0u);
}

TEST(MetricsTest, RouteIdsHoldTheirLabelSetsUntilTheLastTableGoes) {
  model::Config config;
  config.upstreams["shop/web:80"] = {"shop/web:80", {{"10.0.0.1", 80}}};
  config.virtual_hosts["foo.com"] = {
      "foo.com",
      {route("/", "shop/web:80", "shop/web"), route("/static", "shop/web:80", "shop/web")}};
  model::Config other = config;
  other.virtual_hosts["bar.com"] = {"bar.com", {route("/", "shop/web:80", "shop/bar")}};
  std::string error;
  auto router = router::Router::build(config, &error);
  auto router2 = router::Router::build(other, &error);
  ASSERT_NE(router2, nullptr) << error;

  auto metrics = std::make_unique<Metrics>(1);
  auto first = std::make_unique<RouteMetricIds>(*router, *metrics);
  EXPECT_EQ(metrics->label_sets(), 3u);  // two routes, one label set
  auto second = std::make_unique<RouteMetricIds>(*router2, *metrics);
  EXPECT_EQ(metrics->label_sets(), 4u);
  const LabelSetId web = second->find(router2->match("foo.com", "/"));
  EXPECT_EQ(web, first->find(router->match("foo.com", "/static")));
  first.reset();  // the table before goes: the routes both have keep their id
  EXPECT_EQ(metrics->label_sets(), 4u);
  EXPECT_EQ(second->find(router2->match("foo.com", "/")), web);
  auto third = std::make_unique<RouteMetricIds>(*router, *metrics);  // bar.com removed
  second.reset();
  EXPECT_EQ(metrics->label_sets(), 3u);
  EXPECT_EQ(third->find(router->match("foo.com", "/")), web);
  // A table may outlive the Metrics (main's teardown order): its release is still safe.
  metrics.reset();
  third.reset();
}

TEST(MetricsTest, RouteIdsTakeOneReferencePerRouteAndCanaryAndGiveThemAllBack) {
  model::Config config;
  config.upstreams["shop/web:80"] = {"shop/web:80", {{"10.0.0.1", 80}}};
  config.upstreams["shop/web-canary:80"] = {"shop/web-canary:80", {{"10.0.0.2", 80}}};
  model::Route with_canary = route("/", "shop/web:80", "shop/web");
  model::Canary canary;
  canary.upstream = "shop/web-canary:80";
  canary.weight = 10;
  with_canary.canary = canary;
  config.virtual_hosts["foo.com"] = {"foo.com", {with_canary}};
  std::string error;
  auto router = router::Router::build(config, &error);
  ASSERT_NE(router, nullptr) << error;

  Metrics metrics(1);
  {
    // The same router twice: every route met twice keeps one id and one reference.
    RouteMetricIds ids(std::vector<const router::Router*>{router.get(), router.get()}, metrics);
    EXPECT_EQ(ids.size(), 1u);
    const model::Route* r = router->match("foo.com", "/").route;
    EXPECT_NE(ids.find(r), ids.find_canary(r)) << "the canary's service is its own label set";
    EXPECT_EQ(metrics.label_sets(), 4u);
  }
  EXPECT_EQ(metrics.label_sets(), 2u) << "route and canary references given back";
  // Nothing left over: a second pass takes the same two ids again.
  RouteMetricIds again(*router, metrics);
  EXPECT_EQ(again.find(router->match("foo.com", "/").route), 2u);
  EXPECT_EQ(metrics.label_sets(), 4u);
}

TEST(MetricsTest, ShardsWrittenByManyThreadsFoldIntoExactTotals) {
  constexpr size_t kThreads = 4;
  constexpr uint64_t kPerThread = 200'000;
  Metrics metrics(kThreads);
  std::vector<LabelSetId> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(metrics.intern({"r" + std::to_string(i), "ns", "h.com", "svc"}));
  }

  std::atomic<bool> done{false};
  // Scrapes and interning run concurrently with recording: totals only grow, pages appear.
  std::thread scraper([&] {
    double last = 0;
    int n = 0;
    while (!done.load()) {
      auto s = parse(metrics.scrape());
      double total = 0;
      for (const auto& [k, v] : s) {
        if (k.starts_with("tidegate_requests_total{")) total += v;
      }
      EXPECT_GE(total, last);
      last = total;
      metrics.intern({"late" + std::to_string(n++), "ns", "h.com", "svc"});
    }
  });
  // Routing tables come and go meanwhile: 150 label sets at a time interned and released, so
  // that pages are allocated and given back while scrapes read and workers record.
  std::thread churner([&] {
    int round = 0;
    while (!done.load()) {
      std::vector<LabelSetId> held;
      for (int i = 0; i < 150; ++i) {
        held.push_back(metrics.intern(
            {"churn" + std::to_string(round) + "-" + std::to_string(i), "ns", "h.com", "svc"}));
      }
      for (LabelSetId id : held) metrics.release(id);
      ++round;
    }
  });
  std::vector<std::thread> workers;
  for (size_t t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      auto& w = metrics.worker(t);
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const LabelSetId id = ids[i % ids.size()];
        w.record_request({id, i % 2 ? http::verb::get : http::verb::post, i % 5 == 0 ? 500u : 200u,
                          3, 7, std::chrono::microseconds(i % 100), std::chrono::microseconds(1)});
        w.connection_opened();
        if (i % 4 != 0) w.connection_closed();
      }
    });
  }
  for (auto& t : workers) t.join();
  done = true;
  scraper.join();
  churner.join();

  auto s = parse(metrics.scrape());
  double requests = 0, ok = 0, errors = 0, count = 0, bytes_in = 0, bytes_out = 0, sum = 0;
  for (const auto& [k, v] : s) {
    if (k.starts_with("tidegate_requests_total{")) {
      requests += v;
      (k.find("status=\"2xx\"") != std::string::npos ? ok : errors) += v;
    }
    if (k.starts_with("tidegate_request_duration_seconds_count{")) count += v;
    if (k.starts_with("tidegate_request_duration_seconds_sum{")) sum += v;
    if (k.starts_with("tidegate_request_bytes_total{")) bytes_in += v;
    if (k.starts_with("tidegate_response_bytes_total{")) bytes_out += v;
  }
  const double total = kThreads * kPerThread;
  EXPECT_EQ(requests, total);
  EXPECT_EQ(errors, total / 5);
  EXPECT_EQ(ok, total * 4 / 5);
  EXPECT_EQ(count, total);
  EXPECT_EQ(bytes_in, 3 * total);
  EXPECT_EQ(bytes_out, 7 * total);
  // Sum of i % 100 microseconds over 200,000 values, per thread.
  EXPECT_NEAR(sum, kThreads * (kPerThread / 100) * 4950 * 1e-6, 1e-6);
  EXPECT_EQ(value(s, "tidegate_connections_total"), total);
  EXPECT_EQ(value(s, "tidegate_connections_active"), total / 4);
  // Label set r0 took every third request of each thread.
  EXPECT_EQ(
      value(
          s,
          R"(tidegate_request_duration_seconds_count{ingress="r0",namespace="ns",host="h.com",service="svc"})"),
      kThreads * ((kPerThread + 2) / 3));
}

}  // namespace
}  // namespace tidegate::dataplane::observability
