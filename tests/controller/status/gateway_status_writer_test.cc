// status/gateway_status_writer: the Gateway API status objects as written (the writer itself runs
// against a real API server in e2e/kube/test_kube_gateway.py).

#include "status/gateway_status_writer.h"

#include <gtest/gtest.h>

namespace tidegate::controller::status {
namespace {

using nlohmann::json;
using translate::gateway::Condition;

Condition condition(std::string type, std::string status, std::string reason, int64_t gen) {
  return Condition{std::move(type), std::move(status), std::move(reason), "msg", gen};
}

TEST(GatewayStatusJson, TransitionTimesMoveOnlyWhenTheStatusChanges) {
  TransitionTimes times;
  EXPECT_EQ(times.at("Gateway a/b", "Accepted", "True", "T1"), "T1");
  EXPECT_EQ(times.at("Gateway a/b", "Accepted", "True", "T2"), "T1");
  EXPECT_EQ(times.at("Gateway a/b", "Programmed", "True", "T2"), "T2");  // its own
  EXPECT_EQ(times.at("Gateway a/c", "Accepted", "True", "T3"), "T3");    // another object
  EXPECT_EQ(times.at("Gateway a/b", "Accepted", "False", "T4"), "T4");
  EXPECT_EQ(times.at("Gateway a/b", "Accepted", "False", "T5"), "T4");
}

TEST(GatewayStatusJson, ConditionsCarryEveryRequiredField) {
  TransitionTimes times;
  const json j = conditions_json({condition("Accepted", "True", "Accepted", 7)}, "GatewayClass x",
                                 times, "2026-12-03T00:00:00Z");
  EXPECT_EQ(j, json::parse(R"([{"type": "Accepted", "status": "True", "reason": "Accepted",
      "message": "msg", "observedGeneration": 7,
      "lastTransitionTime": "2026-12-03T00:00:00Z"}])"));
}

TEST(GatewayStatusJson, GatewayWithListenersAndAddresses) {
  translate::gateway::GatewayStatus s;
  s.namespace_ = "ns";
  s.name = "gw";
  s.conditions = {condition("Accepted", "True", "Accepted", 2),
                  condition("Programmed", "True", "Programmed", 2)};
  translate::gateway::ListenerStatus l;
  l.name = "http";
  l.supported_kinds = {objects::RouteGroupKind{"gateway.networking.k8s.io", "HTTPRoute"}};
  l.attached_routes = 3;
  l.conditions = {condition("Accepted", "True", "Accepted", 2)};
  s.listeners = {l};
  TransitionTimes times;
  const json j = gateway_status_json(s, {"192.0.2.1", "2001:db8::1", "lb.example.com"}, times, "T");
  EXPECT_EQ(j["addresses"], json::parse(R"([{"type": "IPAddress", "value": "192.0.2.1"},
      {"type": "IPAddress", "value": "2001:db8::1"},
      {"type": "Hostname", "value": "lb.example.com"}])"));
  ASSERT_EQ(j["listeners"].size(), 1u);
  EXPECT_EQ(j["listeners"][0]["attachedRoutes"], 3);
  EXPECT_EQ(j["listeners"][0]["supportedKinds"],
            json::parse(R"([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])"));
  EXPECT_EQ(j["conditions"].size(), 2u);
  // No address known: an empty list, so that a merge patch clears stale ones.
  EXPECT_EQ(gateway_status_json(s, {}, times, "T")["addresses"], json::array());
}

TEST(GatewayStatusJson, RouteParentsKeepOtherControllersEntries) {
  translate::gateway::RouteStatus s;
  s.kind = "HTTPRoute";
  s.namespace_ = "ns";
  s.name = "web";
  translate::gateway::RouteParentStatus p;
  p.parent_ref.name = "gw";
  p.parent_ref.section_name = "http";
  p.controller_name = "tidegate.io/gateway-controller";
  p.conditions = {condition("Accepted", "True", "Accepted", 4),
                  condition("ResolvedRefs", "False", "BackendNotFound", 4)};
  s.parents = {p};
  const json current = json::parse(R"([
      {"parentRef": {"name": "other"}, "controllerName": "example.com/other", "conditions": []},
      {"parentRef": {"name": "gw"}, "controllerName": "tidegate.io/gateway-controller",
       "conditions": [{"type": "Accepted", "status": "False"}]}])");
  TransitionTimes times;
  const json parents = route_parents_json(s, current, "tidegate.io/gateway-controller", times, "T");
  ASSERT_EQ(parents.size(), 2u);
  EXPECT_EQ(parents[0]["controllerName"], "example.com/other");  // kept as it was
  EXPECT_EQ(parents[1]["parentRef"], json::parse(R"({"group": "gateway.networking.k8s.io",
      "kind": "Gateway", "name": "gw", "sectionName": "http"})"));
  EXPECT_EQ(parents[1]["conditions"][1]["reason"], "BackendNotFound");
  // Nothing of ours in the report: only the others' entries stay.
  s.parents.clear();
  EXPECT_EQ(route_parents_json(s, current, "tidegate.io/gateway-controller", times, "T").size(),
            1u);
}

TEST(GatewayStatusJson, PolicyAncestorsKeepOtherControllersEntries) {
  translate::gateway::BackendTLSPolicyStatus s;
  s.namespace_ = "ns";
  s.name = "tls";
  translate::gateway::PolicyAncestorStatus a;
  a.ancestor_ref.namespace_ = "ns";
  a.ancestor_ref.name = "gw";
  a.controller_name = "tidegate.io/gateway-controller";
  a.conditions = {condition("Accepted", "False", "NoValidCACertificate", 3),
                  condition("ResolvedRefs", "False", "InvalidKind", 3)};
  s.ancestors = {a};
  const json current = json::parse(R"([
      {"ancestorRef": {"name": "other"}, "controllerName": "example.com/other", "conditions": []},
      {"ancestorRef": {"name": "gw"}, "controllerName": "tidegate.io/gateway-controller",
       "conditions": []}])");
  TransitionTimes times;
  const json out = policy_ancestors_json(s, current, "tidegate.io/gateway-controller", times, "T");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["controllerName"], "example.com/other");
  EXPECT_EQ(out[1]["ancestorRef"], json::parse(R"({"group": "gateway.networking.k8s.io",
      "kind": "Gateway", "namespace": "ns", "name": "gw"})"));
  EXPECT_EQ(out[1]["conditions"][0]["reason"], "NoValidCACertificate");
  EXPECT_EQ(out[1]["conditions"][1]["observedGeneration"], 3);
  s.ancestors.clear();
  EXPECT_EQ(policy_ancestors_json(s, current, "tidegate.io/gateway-controller", times, "T").size(),
            1u);
}

TEST(GatewayStatusJson, ConditionsTheObjectAlreadyHoldsKeepItsTransitionTime) {
  // A new leader (or a restarted controller) remembers nothing: a condition whose status the
  // object already holds keeps the object's time, one whose status changes gets now.
  translate::gateway::GatewayStatus s;
  s.namespace_ = "ns";
  s.name = "gw";
  s.conditions = {condition("Accepted", "True", "Accepted", 2),
                  condition("Programmed", "True", "Programmed", 2)};
  translate::gateway::ListenerStatus l;
  l.name = "http";
  l.conditions = {condition("Accepted", "True", "Accepted", 2)};
  s.listeners = {l};
  const json current = json::parse(R"({
      "conditions": [
        {"type": "Accepted", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Programmed", "status": "False", "lastTransitionTime": "2026-01-02T00:00:00Z"}],
      "listeners": [{"name": "http", "conditions": [
        {"type": "Accepted", "status": "True", "lastTransitionTime": "2026-01-03T00:00:00Z"}]}]})");
  TransitionTimes times;
  const json j = gateway_status_json(s, {}, times, "NOW", current);
  EXPECT_EQ(j["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(j["conditions"][1]["lastTransitionTime"], "NOW");  // False -> True: a transition
  EXPECT_EQ(j["listeners"][0]["conditions"][0]["lastTransitionTime"], "2026-01-03T00:00:00Z");
  // Remembered from then on, with nothing read.
  EXPECT_EQ(gateway_status_json(s, {}, times, "LATER")["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:00:00Z");
}

TEST(GatewayStatusJson, OurRouteEntriesLendTheirTimesOthersDoNot) {
  translate::gateway::RouteStatus s;
  s.kind = "HTTPRoute";
  s.namespace_ = "ns";
  s.name = "web";
  translate::gateway::RouteParentStatus p;
  p.parent_ref.name = "gw";
  p.controller_name = "tidegate.io/gateway-controller";
  p.conditions = {condition("Accepted", "True", "Accepted", 4)};
  s.parents = {p};
  const json ref = json::parse(R"({"group": "gateway.networking.k8s.io", "kind": "Gateway",
      "name": "gw"})");
  json current = json::array();
  current.push_back({{"parentRef", ref},
                     {"controllerName", "example.com/other"},
                     {"conditions", json::parse(R"([{"type": "Accepted", "status": "True",
                         "lastTransitionTime": "OTHERS"}])")}});
  TransitionTimes times;
  json parents = route_parents_json(s, current, "tidegate.io/gateway-controller", times, "NOW");
  EXPECT_EQ(parents[1]["conditions"][0]["lastTransitionTime"], "NOW");
  current.push_back({{"parentRef", ref},
                     {"controllerName", "tidegate.io/gateway-controller"},
                     {"conditions", json::parse(R"([{"type": "Accepted", "status": "True",
                         "lastTransitionTime": "OURS"}])")}});
  TransitionTimes fresh;
  parents = route_parents_json(s, current, "tidegate.io/gateway-controller", fresh, "NOW");
  ASSERT_EQ(parents.size(), 2u);
  EXPECT_EQ(parents[1]["conditions"][0]["lastTransitionTime"], "OURS");
}

TEST(GatewayStatusJson, AMalformedStatusIsTakenAsEmpty) {
  translate::gateway::RouteStatus s;
  s.kind = "HTTPRoute";
  s.namespace_ = "ns";
  s.name = "web";
  translate::gateway::RouteParentStatus p;
  p.parent_ref.name = "gw";
  p.controller_name = "tidegate.io/gateway-controller";
  p.conditions = {condition("Accepted", "True", "Accepted", 4)};
  s.parents = {p};
  for (const char* text : {R"("not a list")", R"([1, "x", null])",
                           R"([{"controllerName": 5, "parentRef": "x", "conditions": "y"}])",
                           R"([{"controllerName": "tidegate.io/gateway-controller",
                                "parentRef": {"name": "gw"}, "conditions": [7, {"type": 1}]}])"}) {
    TransitionTimes times;
    const json current = json::parse(text);
    json parents;
    ASSERT_NO_THROW(
        parents = route_parents_json(s, current, "tidegate.io/gateway-controller", times, "T"))
        << text;
    ASSERT_FALSE(parents.empty()) << text;
    EXPECT_EQ(parents.back()["controllerName"], "tidegate.io/gateway-controller") << text;
    EXPECT_EQ(parents.back()["conditions"][0]["lastTransitionTime"], "T") << text;
  }
  translate::gateway::GatewayStatus g;
  g.namespace_ = "ns";
  g.name = "gw";
  g.conditions = {condition("Accepted", "True", "Accepted", 1)};
  for (const char* text :
       {R"("x")", R"({"conditions": 3, "listeners": {"a": 1}})",
        R"({"listeners": [1, {"name": 2}, {"name": "a", "conditions": "z"}]})"}) {
    TransitionTimes times;
    json j;
    ASSERT_NO_THROW(j = gateway_status_json(g, {}, times, "T", json::parse(text))) << text;
    EXPECT_EQ(j["conditions"][0]["lastTransitionTime"], "T") << text;
  }
}

}  // namespace
}  // namespace tidegate::controller::status
