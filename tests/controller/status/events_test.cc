// Events on Ingresses: which problems become Events (pure functions), and the recorder's
// deduplication, refresh, rate bound and leader gate against a recording fake API client and a
// fake clock.

#include "status/events.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <mutex>

namespace tidegate::controller::status {
namespace {

using namespace std::chrono_literals;
using translate::Diagnostic;
using translate::Severity;

objects::Ingress ingress(const std::string& name, std::vector<objects::IngressRule> rules,
                         std::vector<objects::IngressTLS> tls = {}) {
  objects::Ingress in;
  in.metadata.namespace_ = "default";
  in.metadata.name = name;
  in.metadata.uid = "uid-" + name;
  in.spec.ingress_class_name = "tidegate";
  in.spec.rules = std::move(rules);
  in.spec.tls = std::move(tls);
  return in;
}

objects::HTTPIngressPath path(const std::string& p, const std::string& service, int port) {
  objects::HTTPIngressPath out;
  out.path = p;
  out.backend.service = objects::IngressServiceBackend{service, objects::PortRef{port, ""}};
  return out;
}

store::Store sample_store() {
  store::Store s;
  s.insert(ingress("a", {{"A.example", {path("/", "web", 80), path("/x", "api", 80)}}},
                   {{{"a.example"}, "a-tls"}}));
  s.insert(ingress("b", {{"b.example", {path("/", "web", 80)}}, {"", {path("/", "api", 80)}}}));
  return s;
}

model::Config sample_config() {
  model::Config c;
  c.virtual_hosts["a.example"] = {
      "a.example",
      {{"/x", model::PathMatch::kPrefix, "default/api:80", "default/a"},
       {"/", model::PathMatch::kPrefix, "default/web:80", "default/a"}}};
  c.virtual_hosts["b.example"] = {
      "b.example", {{"/", model::PathMatch::kPrefix, "default/web:80", "default/b"}}};
  c.virtual_hosts["*"] = {"*", {{"/", model::PathMatch::kPrefix, "default/api:80", "default/b"}}};
  c.upstreams["default/web:80"] = {"default/web:80", {}};
  c.upstreams["default/api:80"] = {"default/api:80", {}};
  return c;
}

TEST(EventsTest, DiagnosticsNamingAnIngressBecomeEvents) {
  store::Store s = sample_store();
  std::vector<Diagnostic> diags = {
      {"Ingress default/a", "annotation tidegate.io/use-regex: expected \"true\" or \"false\"",
       Severity::kWarning},
      {"Ingress default/b", "spec.rules[0].host: invalid host", Severity::kError},
      {"Ingress default/b", "spec.rules[0].host: invalid host", Severity::kError},  // twice
      {"Ingress default/gone", "not in the store", Severity::kError},
      {"EndpointSlice default/web-1", "invalid IPv4 address", Severity::kWarning},
      {"Service default/ext", "type ExternalName", Severity::kWarning},
  };
  auto events = events_from_diagnostics(diags, s);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], (IngressEvent{"default", "a", "uid-a",
                                     std::string(kReasonTranslationWarning), diags[0].message}));
  EXPECT_EQ(events[1], (IngressEvent{"default", "b", "uid-b", std::string(kReasonTranslationError),
                                     diags[1].message}));
  // Messages are bounded.
  diags = {{"Ingress default/a", std::string(5000, 'x'), Severity::kError}};
  events = events_from_diagnostics(diags, s);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_LE(events[0].message.size(), kMaxEventMessageBytes);
}

TEST(EventsTest, NackPartsAreAttributedToTheIngressFieldsThatProducedThem) {
  store::Store s = sample_store();
  model::Config c = sample_config();
  struct Case {
    std::string reason;
    std::vector<std::pair<std::string, std::string>> want;  // ingress name, message contains
  };
  const std::vector<Case> cases = {
      {"host a.example: invalid regex \"(\": missing )",
       {{"a", "from spec.rules[0] (host a.example): host a.example: invalid regex"}}},
      {"router: host *: something", {{"b", "from spec.rules[1] (host *): router: host *"}}},
      {"upstream default/web:80: endpoint 1.2.3.4 has port 0",
       {{"a", "from spec.rules[0].http.paths[0].backend: upstream default/web:80"},
        {"b", "from spec.rules[0].http.paths[0].backend: upstream"}}},
      {"certificate default/a-tls: private key does not parse",
       {{"a", "from spec.tls[0].secretName: certificate default/a-tls"}}},
      {"invalid TLS host \"a.example\"", {{"a", "from spec.tls[0]: invalid TLS host"}}},
      {"delta base 3 does not match the serving version 4; send a snapshot", {}},
      {"host b.example: x; upstream default/api:80: y",
       {{"a", "spec.rules[0].http.paths[1].backend: upstream default/api:80: y"},
        {"b", "spec.rules[0] (host b.example): host b.example: x"},
        {"b", "spec.rules[1].http.paths[0].backend: upstream default/api:80: y"}}},
  };
  for (const auto& c2 : cases) {
    SCOPED_TRACE(c2.reason);
    auto events = events_from_nack(c, s, c2.reason);
    ASSERT_EQ(events.size(), c2.want.size());
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].name, c2.want[i].first);
      EXPECT_EQ(events[i].reason, kReasonRejected);
      EXPECT_EQ(events[i].uid, "uid-" + c2.want[i].first);
      EXPECT_NE(events[i].message.find(c2.want[i].second), std::string::npos) << events[i].message;
    }
  }
}

// Records writes; answers 201 to POST and 200 to PATCH unless told otherwise.
class FakeEventsApi : public kube::ApiClient {
 public:
  struct Call {
    std::string method, path;
    YAML::Node body;
  };
  kube::Response get(const std::string&) override { return {404, "", ""}; }
  std::unique_ptr<kube::LineStream> stream(const std::string&, kube::Response* failed) override {
    failed->status = 405;
    return nullptr;
  }
  kube::Response send(const std::string& method, const std::string& path, const std::string& body,
                      const std::string&) override {
    std::lock_guard lock(mu_);
    calls.push_back({method, path, YAML::Load(body)});
    if (method == "PATCH") return {patch_status, "{}", ""};
    return {201, "{}", ""};
  }
  size_t count(const std::string& method) {
    size_t n = 0;
    for (const auto& c : calls) n += c.method == method;
    return n;
  }
  std::mutex mu_;
  std::vector<Call> calls;
  int patch_status = 200;
};

IngressEvent event(const std::string& name, const std::string& message) {
  return {"default", name, "uid-" + name, std::string(kReasonTranslationError), message};
}

struct RecorderFixture {
  FakeEventsApi api;
  std::chrono::steady_clock::time_point now{};
  bool leader = true;
  EventOptions options;
  std::unique_ptr<EventRecorder> recorder;
  RecorderFixture() {
    options.burst = 3;
    options.refill = 1s;
    options.refresh_interval = 10min;
    recorder = std::make_unique<EventRecorder>(
        api, [this] { return leader; }, options, [this] { return now; });
  }
};

TEST(EventRecorderTest, PostsOnceWhileAProblemPersistsAndRefreshesLikeKubectl) {
  RecorderFixture f;
  f.recorder->set(EventRecorder::Source::kTranslation, {event("a", "bad annotation")});
  f.recorder->sync();
  ASSERT_EQ(f.api.count("POST"), 1u);
  const auto& post = f.api.calls[0];
  EXPECT_EQ(post.path, "/api/v1/namespaces/default/events");
  EXPECT_EQ(post.body["involvedObject"]["kind"].Scalar(), "Ingress");
  EXPECT_EQ(post.body["involvedObject"]["name"].Scalar(), "a");
  EXPECT_EQ(post.body["involvedObject"]["uid"].Scalar(), "uid-a");
  EXPECT_EQ(post.body["type"].Scalar(), "Warning");
  EXPECT_EQ(post.body["reason"].Scalar(), kReasonTranslationError);
  EXPECT_EQ(post.body["message"].Scalar(), "bad annotation");
  EXPECT_EQ(post.body["count"].as<int>(), 1);
  const std::string name = post.body["metadata"]["name"].Scalar();
  EXPECT_TRUE(name.starts_with("a.")) << name;

  // The same problem, reported again by later syncs: nothing new.
  for (int i = 0; i < 5; ++i) {
    f.now += 1min;
    f.recorder->set(EventRecorder::Source::kTranslation, {event("a", "bad annotation")});
    f.recorder->sync();
  }
  EXPECT_EQ(f.api.calls.size(), 1u);

  // Still there after the refresh interval: count 2, same Event.
  f.now += 6min;
  f.recorder->sync();
  ASSERT_EQ(f.api.calls.size(), 2u);
  EXPECT_EQ(f.api.calls[1].method, "PATCH");
  EXPECT_EQ(f.api.calls[1].path, "/api/v1/namespaces/default/events/" + name);
  EXPECT_EQ(f.api.calls[1].body["count"].as<int>(), 2);

  // Expired meanwhile (404 on refresh): posted anew.
  f.api.patch_status = 404;
  f.now += 11min;
  f.recorder->sync();
  EXPECT_EQ(f.api.count("POST"), 2u);

  // Resolved, then back: a new Event.
  f.recorder->set(EventRecorder::Source::kTranslation, {});
  f.recorder->sync();
  f.recorder->set(EventRecorder::Source::kTranslation, {event("a", "bad annotation")});
  f.recorder->sync();
  EXPECT_EQ(f.api.count("POST"), 3u);
}

TEST(EventRecorderTest, WritesAreRateBoundAndPendingOnesFollow) {
  RecorderFixture f;
  std::vector<IngressEvent> many;
  for (int i = 0; i < 7; ++i) many.push_back(event("i" + std::to_string(i), "problem"));
  f.recorder->set(EventRecorder::Source::kTranslation, many);
  f.recorder->sync();
  EXPECT_EQ(f.api.calls.size(), 3u) << "burst";
  f.recorder->sync();
  EXPECT_EQ(f.api.calls.size(), 3u) << "no time passed";
  f.now += 2s;
  f.recorder->sync();
  EXPECT_EQ(f.api.calls.size(), 5u) << "one per second";
  f.now += 10s;
  f.recorder->sync();
  EXPECT_EQ(f.api.calls.size(), 7u) << "all posted, each once";
  std::set<std::string> names;
  for (const auto& c : f.api.calls) names.insert(c.body["involvedObject"]["name"].Scalar());
  EXPECT_EQ(names.size(), 7u);
}

TEST(EventRecorderTest, OnlyTheLeaderWritesAndANewLeaderPostsOnce) {
  RecorderFixture f;
  f.leader = false;
  f.recorder->set(EventRecorder::Source::kDataPlane, {event("a", "refused")});
  f.recorder->sync();
  EXPECT_EQ(f.api.calls.size(), 0u);
  f.leader = true;
  f.recorder->sync();
  f.recorder->sync();
  EXPECT_EQ(f.api.calls.size(), 1u);
  // Two sources reporting the same problem: one Event.
  f.recorder->set(EventRecorder::Source::kTranslation, {event("a", "refused")});
  f.recorder->sync();
  EXPECT_EQ(f.api.calls.size(), 1u);
}

}  // namespace
}  // namespace tidegate::controller::status
