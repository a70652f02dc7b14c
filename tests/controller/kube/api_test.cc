#include "kube/api.h"

#include <gtest/gtest.h>

#include <set>

namespace tidegate::controller::kube {
namespace {

using objects::Kind;

TEST(KubeApi, ResourcePaths) {
  struct Case {
    Kind kind;
    std::string ns, name, want;
  };
  const Case cases[] = {
      {Kind::kIngress, "", "", "/apis/networking.k8s.io/v1/ingresses"},
      {Kind::kIngress, "web", "", "/apis/networking.k8s.io/v1/namespaces/web/ingresses"},
      {Kind::kIngressClass, "web", "", "/apis/networking.k8s.io/v1/ingressclasses"},
      {Kind::kService, "a", "", "/api/v1/namespaces/a/services"},
      {Kind::kEndpointSlice, "", "", "/apis/discovery.k8s.io/v1/endpointslices"},
      {Kind::kSecret, "a", "tls", "/api/v1/namespaces/a/secrets/tls"},
      {Kind::kConfigMap, "a", "ca", "/api/v1/namespaces/a/configmaps/ca"},
      {Kind::kBackendTLSPolicy, "a", "",
       "/apis/gateway.networking.k8s.io/v1/namespaces/a/backendtlspolicies"},
      {Kind::kSubstitutionRuleSet, "", "", "/apis/tidegate.io/v1alpha1/substitutionrulesets"},
      {Kind::kSubstitutionRuleSet, "a", "common",
       "/apis/tidegate.io/v1alpha1/namespaces/a/substitutionrulesets/common"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(resource_path(c.kind, c.ns, c.name), c.want) << objects::to_string(c.kind);
  }
  // Every kind has a path of its own (a kind added without one would read "unknown").
  std::set<std::string> paths;
  for (Kind kind : objects::kAllKinds) {
    EXPECT_EQ(resource_of(kind).group_version_path.substr(1),
              std::string(kind == Kind::kService || kind == Kind::kSecret ||
                                  kind == Kind::kNamespace || kind == Kind::kConfigMap
                              ? "api/"
                              : "apis/") +
                  std::string(objects::api_version_of(kind)))
        << objects::to_string(kind);
    EXPECT_TRUE(paths.insert(resource_path(kind, "")).second) << objects::to_string(kind);
  }
}

TEST(KubeApi, GroupResource) {
  EXPECT_EQ(group_resource(Kind::kSubstitutionRuleSet), "substitutionrulesets.tidegate.io");
  EXPECT_EQ(group_resource(Kind::kIngress), "ingresses.networking.k8s.io");
  EXPECT_EQ(group_resource(Kind::kService), "services");
}

TEST(KubeApi, ListAndWatchUrls) {
  EXPECT_EQ(list_url(Kind::kService, "", 500, ""), "/api/v1/services?limit=500");
  EXPECT_EQ(list_url(Kind::kService, "x", 2, "ab+/="),
            "/api/v1/namespaces/x/services?limit=2&continue=ab%2B%2F%3D");
  EXPECT_EQ(watch_url(Kind::kIngress, "", "123", 300),
            "/apis/networking.k8s.io/v1/ingresses?watch=1&allowWatchBookmarks=true&"
            "resourceVersion=123&timeoutSeconds=300");
}

TEST(KubeApi, ParseList) {
  std::string error;
  auto page = parse_list(
      R"({"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"c1"},
          "items":[{"metadata":{"name":"a","namespace":"n"},"spec":{"ports":[{"port":80}]}}]})",
      &error);
  ASSERT_TRUE(page) << error;
  EXPECT_EQ(page->resource_version, "42");
  EXPECT_EQ(page->continue_token, "c1");
  EXPECT_FALSE(page->remaining_items);
  ASSERT_EQ(page->items.size(), 1u);
  auto svc = objects::parse_service(page->items[0]);
  ASSERT_TRUE(svc.ok()) << svc.error;
  EXPECT_EQ(svc.value->metadata.name, "a");

  auto empty = parse_list(R"({"metadata":{"resourceVersion":"7"},"items":null})", &error);
  ASSERT_TRUE(empty) << error;
  EXPECT_TRUE(empty->items.empty());

  // remainingItemCount, a hint for reserving room: read when it is a count, ignored otherwise.
  auto counted = parse_list(
      R"({"metadata":{"resourceVersion":"7","continue":"c","remainingItemCount":12345},"items":[]})",
      &error);
  ASSERT_TRUE(counted) << error;
  EXPECT_EQ(counted->remaining_items, std::optional<uint64_t>(12345));
  for (const char* bad : {R"(-1)", R"("")", R"(1.5)", R"({})", R"(true)"}) {
    auto page_with =
        parse_list(std::string(R"({"metadata":{"resourceVersion":"7","remainingItemCount":)") +
                       bad + R"(},"items":[]})",
                   &error);
    ASSERT_TRUE(page_with) << bad << ": " << error;
    EXPECT_FALSE(page_with->remaining_items) << bad;
  }

  EXPECT_FALSE(parse_list(R"({"kind":"Status","code":403})", &error));
  EXPECT_FALSE(parse_list("{not json", &error));
  EXPECT_FALSE(parse_list(R"({"items":[]})", &error));  // no resourceVersion to watch from
}

TEST(KubeApi, ParseWatchEvents) {
  std::string error;
  auto added = parse_watch_event(
      R"({"type":"ADDED","object":{"kind":"IngressClass","metadata":{"name":"c","resourceVersion":"9"},"spec":{"controller":"x"}}})",
      &error);
  ASSERT_TRUE(added) << error;
  EXPECT_EQ(added->type, EventType::kAdded);
  EXPECT_EQ(added->resource_version, "9");

  auto bookmark = parse_watch_event(
      R"({"type":"BOOKMARK","object":{"kind":"Ingress","metadata":{"resourceVersion":"77"}}})",
      &error);
  ASSERT_TRUE(bookmark) << error;
  EXPECT_EQ(bookmark->type, EventType::kBookmark);
  EXPECT_EQ(bookmark->resource_version, "77");

  auto gone = parse_watch_event(
      R"json({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (5)"}})json",
      &error);
  ASSERT_TRUE(gone) << error;
  EXPECT_EQ(gone->type, EventType::kError);
  EXPECT_EQ(gone->status.code, 410);
  EXPECT_EQ(gone->status.reason, "Expired");

  EXPECT_FALSE(parse_watch_event(R"({"type":"WEIRD","object":{}})", &error));
  EXPECT_FALSE(parse_watch_event(R"({"type":"ADDED"})", &error));
  EXPECT_FALSE(parse_watch_event("garbage {", &error));
}

TEST(KubeApi, StatusFromBody) {
  auto s = status_from_body(
      401,
      R"({"kind":"Status","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})");
  EXPECT_EQ(s.code, 401);
  EXPECT_EQ(s.message, "Unauthorized");
  auto plain = status_from_body(502, "Bad Gateway");
  EXPECT_EQ(plain.code, 502);
  EXPECT_EQ(plain.message, "Bad Gateway");
}

TEST(KubeApi, BackoffGrowsWithJitterAndResets) {
  using std::chrono::milliseconds;
  Backoff b(milliseconds(100), milliseconds(1000), 1);
  long bound = 100;
  for (int i = 0; i < 8; ++i) {
    auto d = b.next();
    EXPECT_GE(d.count(), bound / 2) << i;
    EXPECT_LE(d.count(), bound) << i;
    bound = std::min(bound * 2, 1000L);
  }
  b.reset();
  EXPECT_LE(b.next().count(), 100);
}

}  // namespace
}  // namespace tidegate::controller::kube
