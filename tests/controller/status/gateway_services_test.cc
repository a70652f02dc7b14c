// The pure parts of the per-Gateway Services (status/gateway_services.h): names, the Service
// object, and the addresses read back. Creating, updating and deleting them is tested against a
// real API server (e2e/kube/test_kube_gateway.py).
#include "status/gateway_services.h"

#include <gtest/gtest.h>

#include <regex>

namespace tidegate::controller::status {
namespace {

using nlohmann::json;

TEST(GatewayServicesTest, NamesAreDns1035LabelsUniquePerGateway) {
  const std::regex dns1035("[a-z]([-a-z0-9]*[a-z0-9])?");
  const std::string long_name(200, 'x');
  for (const auto& [ns, name] :
       std::vector<std::pair<std::string, std::string>>{{"default", "gw"},
                                                        {"a", "my.gateway.example"},
                                                        {"ns", long_name},
                                                        {"ns", "-"},
                                                        {"ns", "gw-"}}) {
    const std::string s = gateway_service_name(ns, name);
    EXPECT_TRUE(std::regex_match(s, dns1035)) << s;
    EXPECT_LE(s.size(), 63u) << s;
  }
  EXPECT_EQ(gateway_service_name("default", "gw").substr(0, 6), "tg-gw-");
  EXPECT_EQ(gateway_service_name("a", "my.gateway.example").substr(0, 22),
            "tg-my-gateway-example-");
  // The same name in two namespaces, or two names that sanitize alike, differ by the hash.
  EXPECT_NE(gateway_service_name("a", "gw"), gateway_service_name("b", "gw"));
  EXPECT_NE(gateway_service_name("a", "g.w"), gateway_service_name("a", "g-w"));
  EXPECT_EQ(gateway_service_name("a", "gw"), gateway_service_name("a", "gw"));
}

TEST(GatewayServicesTest, TheServiceCopiesTypeAndSelectorAndMapsEachPort) {
  translate::gateway::GatewayService s{
      "apps", "web", {{"http-80", 80, 20017}, {"https-443", 443, 20400}}};
  const json selector{{"app.kubernetes.io/name", "tidegate"}};
  const json got = gateway_service_json(s, "tidegate", "tidegate.io/gateway-controller",
                                        "LoadBalancer", selector);
  EXPECT_EQ(got["metadata"]["name"], gateway_service_name("apps", "web"));
  EXPECT_EQ(got["metadata"]["namespace"], "tidegate");
  EXPECT_EQ(got["metadata"]["labels"]["app.kubernetes.io/managed-by"], "tidegate");
  EXPECT_EQ(got["metadata"]["labels"]["tidegate.io/gateway-controller"],
            gateway_controller_label("tidegate.io/gateway-controller"));
  EXPECT_NE(gateway_controller_label("tidegate.io/gateway-controller"),
            gateway_controller_label("example.com/other"));
  EXPECT_EQ(got["metadata"]["annotations"]["tidegate.io/gateway"], "apps/web");
  EXPECT_EQ(got["spec"]["type"], "LoadBalancer");
  EXPECT_EQ(got["spec"]["selector"], selector);
  EXPECT_EQ(got["spec"]["ports"],
            json::parse(R"([{"name":"http-80","protocol":"TCP","port":80,"targetPort":20017},
                            {"name":"https-443","protocol":"TCP","port":443,"targetPort":20400}])"));
}

TEST(GatewayServicesTest, AddressesAreTheLoadBalancersElseTheClusterIp) {
  EXPECT_EQ(service_addresses(json::parse(R"({"spec": {"clusterIP": "10.96.0.7"}})")),
            (std::vector<std::string>{"10.96.0.7"}));
  EXPECT_EQ(service_addresses(json::parse(
                R"({"spec": {"clusterIP": "10.96.0.7"}, "status": {"loadBalancer": {"ingress":
                    [{"ip": "203.0.113.5"}, {"hostname": "lb.example.com"}]}}})")),
            (std::vector<std::string>{"203.0.113.5", "lb.example.com"}));
  EXPECT_TRUE(service_addresses(json::parse(R"({"spec": {"clusterIP": "None"}})")).empty());
  EXPECT_TRUE(service_addresses(json::parse(R"({"spec": {}})")).empty());
  EXPECT_TRUE(service_addresses(json::parse(R"([1, 2])")).empty());
}

TEST(GatewayServicesTest, ThePublishedServiceOwnsEveryGatewaysService) {
  const json published = json::parse(R"({"metadata": {"name": "tidegate", "namespace": "tidegate",
      "uid": "0b5f-11"}, "spec": {"type": "LoadBalancer"}})");
  const json owner = service_owner_reference(published);
  EXPECT_EQ(owner, json::parse(R"({"apiVersion": "v1", "kind": "Service", "name": "tidegate",
      "uid": "0b5f-11"})"));
  translate::gateway::GatewayService s{"apps", "web", {{"http-80", 80, 20017}}};
  const json got = gateway_service_json(s, "tidegate", "tidegate.io/gateway-controller",
                                        "LoadBalancer", json{{"app", "tg"}}, owner);
  EXPECT_EQ(got["metadata"]["ownerReferences"], json::array({owner}));
  // Without a uid (or a name) there is nothing to own it; the Service is made all the same.
  EXPECT_TRUE(service_owner_reference(json::parse(R"({"metadata": {"name": "x"}})")).is_null());
  EXPECT_TRUE(service_owner_reference(json::parse(R"({"metadata": 3})")).is_null());
  EXPECT_TRUE(service_owner_reference(json::parse(R"("x")")).is_null());
  EXPECT_FALSE(
      gateway_service_json(s, "tidegate", "c", "ClusterIP", json{{"app", "tg"}})["metadata"]
          .contains("ownerReferences"));
}

}  // namespace
}  // namespace tidegate::controller::status
