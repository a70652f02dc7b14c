#include "kube/json_reader.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>

#include "kube/api.h"
#include "objects/objects.h"

namespace tidegate::controller::kube {
namespace {

// Two spellings of one number: the reader writes a fraction or exponent in its shortest form
// ("1e3" reads as "1000", "1.50" as "1.5"), YAML::Load keeps the text.
bool same_number(const std::string& a, const std::string& b) {
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a);
  const double y = std::strtod(b.c_str(), &end_b);
  return !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && x == y;
}

// The same tree as far as the object parsers can tell: types, scalars, keys in order.
// `b` is YAML::Load's tree, copied (objects::Node's implicit constructor).
::testing::AssertionResult same(const objects::Node& a, const objects::Node& b,
                                const std::string& at) {
  if (a.Type() != b.Type()) {
    return ::testing::AssertionFailure()
           << at << ": type " << static_cast<int>(a.Type()) << " vs " << static_cast<int>(b.Type());
  }
  if (a.IsScalar() && a.Scalar() != b.Scalar() && !same_number(a.Scalar(), b.Scalar())) {
    return ::testing::AssertionFailure()
           << at << ": \"" << a.Scalar() << "\" vs \"" << b.Scalar() << "\"";
  }
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << at << ": size " << a.size() << " vs " << b.size();
  }
  if (a.IsSequence()) {
    for (size_t i = 0; i < a.size(); ++i) {
      auto r = same(a[i], b[i], at + "[" + std::to_string(i) + "]");
      if (!r) return r;
    }
  }
  if (a.IsMap()) {
    auto ib = b.begin();
    for (auto ia = a.begin(); ia != a.end(); ++ia, ++ib) {
      const objects::NodeEntry ea = *ia, eb = *ib;
      if (ea.first.Scalar() != eb.first.Scalar()) {
        return ::testing::AssertionFailure()
               << at << ": key " << ea.first.Scalar() << " vs " << eb.first.Scalar();
      }
      auto r = same(ea.second, eb.second, at + "." + ea.first.Scalar());
      if (!r) return r;
    }
  }
  return ::testing::AssertionSuccess();
}

// What the API server sends (kube-apiserver 1.36, compact JSON), without managedFields.
const char* const kServiceList =
    R"({"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"202","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjAyLCJzdGFydCI6Ii9hcHAxXHUwMDAwIn0","remainingItemCount":1},"items":[{"metadata":{"name":"app0","namespace":"bench","uid":"75739341-6b4b-47be-ab98-3ad8fc72d8dc","resourceVersion":"192","creationTimestamp":"2026-12-04T17:02:41Z"},"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":80}],"clusterIP":"10.96.216.91","clusterIPs":["10.96.216.91"],"type":"ClusterIP","sessionAffinity":"None","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","internalTrafficPolicy":"Cluster"},"status":{"loadBalancer":{}}}]})";

TEST(JsonReader, SameTreeAsYamlLoad) {
  const std::string cases[] = {
      kServiceList,
      R"({"type":"MODIFIED","object":{"kind":"EndpointSlice","metadata":{"name":"app1-1","labels":{"kubernetes.io/service-name":"app1"}},"addressType":"IPv4","endpoints":[{"addresses":["192.0.2.1"],"conditions":{"ready":true,"serving":false,"terminating":null}}],"ports":[{"name":"http","protocol":"TCP","port":8080}]}})",
      R"({"a":null,"b":[],"c":{},"d":[[1,2],[{"e":-3}],[]],"f":"","g":" spaced  ","h":1.5,"i":-0.25,"j":1e3,"k":2.5E-3,"l":18446744073709551615,"m":-9223372036854775808,"n":true,"o":false})",
      R"({"esc":"a\"b\\c\/d\n\t\r\b\f","uni":"caf\u00e9 \u4e2d","key with spaces":"v","":"empty key","null":"null","true":"1","01":"x"})",
      // The API server escapes <, > and & (and U+2028/9) as Go's encoder does; UTF-8 as is.
      R"({"metadata":{"annotations":{"a":"x \u003cb\u003e \u0026 y","b":"line\u2028sep","c":"héllo ✓"}}})",
      R"(["x",1,null,{"y":[null]}])",
      R"("just a string")",
      "42",
      "null",
      "  {\n  \"pretty\" : [ 1 , 2 ] ,\n \"x\":{ }\n}\n",
  };
  for (const auto& text : cases) {
    std::string error;
    auto read = read_json(text, &error);
    ASSERT_TRUE(read) << text << ": " << error;
    EXPECT_TRUE(same(*read, YAML::Load(text), "$")) << text;
  }
}

// Random JSON documents: the same tree as YAML::Load gives.
TEST(JsonReader, RandomDocumentsSameTreeAsYamlLoad) {
  std::mt19937 rng(7);
  const char* const words[] = {"a",  "name", "metadata", "items", "spec", "1",
                               "-2", "x y",  "true",     "null",  "é",    "managed"};
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    switch (depth > 3 ? rng() % 5 : rng() % 7) {
      case 0:
        return "null";
      case 1:
        return rng() % 2 ? "true" : "false";
      case 2:
        return std::to_string(static_cast<int>(rng() % 200000) - 100000);
      case 3:
        return "1." + std::to_string(rng() % 1000);
      case 4:
        return "\"" + std::string(words[rng() % std::size(words)]) + "\"";
      case 5: {
        std::string s = "[";
        for (int i = 0, n = rng() % 4; i < n; ++i) s += (i ? "," : "") + value(depth + 1);
        return s + "]";
      }
      default: {
        std::string s = "{";
        for (int i = 0, n = rng() % 4; i < n; ++i) {
          s += (i ? ",\"" : "\"") + std::string(words[rng() % std::size(words)]) +
               std::to_string(i) + "\":" + value(depth + 1);
        }
        return s + "}";
      }
    }
  };
  for (int run = 0; run < 300; ++run) {
    const std::string text = value(0);
    std::string error;
    auto read = read_json(text, &error);
    ASSERT_TRUE(read) << text << ": " << error;
    ASSERT_TRUE(same(*read, YAML::Load(text), "$")) << text;
  }
}

TEST(JsonReader, LeavesOutManagedFieldsOfObjectsOnly) {
  const std::string managed =
      R"("managedFields":[{"manager":"kubectl","operation":"Apply","fieldsV1":{"f:spec":{"f:ports":{".":{},"k:{\"port\":80}":{}}}},"time":null}])";
  std::string error;
  // A list: each item's metadata; the list's own metadata has none to leave out.
  auto list = read_json(R"({"metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a",)" +
                            managed + R"(,"uid":"u"},"spec":{"metadata":{)" + managed + R"(}}}]})",
                        &error);
  ASSERT_TRUE(list) << error;
  const objects::Node item = (*list)["items"][0];
  EXPECT_FALSE(item["metadata"]["managedFields"]);
  EXPECT_EQ(item["metadata"]["name"].Scalar(), "a");
  EXPECT_EQ(item["metadata"]["uid"].Scalar(), "u");                     // after the left-out value
  EXPECT_TRUE(item["spec"]["metadata"]["managedFields"].IsSequence());  // not an object's metadata

  // A watch event's object; a single object (GET).
  auto event = read_json(R"({"type":"ADDED","object":{"metadata":{)" + managed +
                             R"(,"name":"b"},"data":{"managedFields":"kept"}}})",
                         &error);
  ASSERT_TRUE(event) << error;
  EXPECT_FALSE((*event)["object"]["metadata"]["managedFields"]);
  EXPECT_EQ((*event)["object"]["metadata"]["name"].Scalar(), "b");
  EXPECT_EQ((*event)["object"]["data"]["managedFields"].Scalar(), "kept");
  auto object = read_json(R"({"metadata":{"managedFields":null,"name":"c"}})", &error);
  ASSERT_TRUE(object) << error;
  EXPECT_FALSE((*object)["metadata"]["managedFields"]);
  EXPECT_EQ((*object)["metadata"]["name"].Scalar(), "c");

  // Kept when asked, and then the same as YAML::Load.
  const std::string text = R"({"metadata":{"name":"d",)" + managed + "}}";
  auto kept = read_json(text, &error, false);
  ASSERT_TRUE(kept) << error;
  EXPECT_TRUE(same(*kept, YAML::Load(text), "$"));
}

TEST(JsonReader, RefusesWhatIsNotOneJsonValue) {
  for (const char* text : {"", "{not json", R"({"a":1} trailing)", R"({"a":})", "[1,]", "{'a':1}",
                           "a: 1", R"({"a":1)"}) {
    std::string error;
    EXPECT_FALSE(read_json(text, &error)) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
}

// The parsers read the same objects from either tree.
TEST(JsonReader, ObjectsParseAsFromYamlLoad) {
  std::string error;
  auto page = parse_list(kServiceList, &error);
  ASSERT_TRUE(page) << error;
  ASSERT_EQ(page->items.size(), 1u);
  auto fast = objects::parse_service(page->items[0]);
  auto slow = objects::parse_service(YAML::Load(kServiceList)["items"][0]);
  ASSERT_TRUE(fast.ok()) << fast.error;
  ASSERT_TRUE(slow.ok()) << slow.error;
  EXPECT_TRUE(*fast.value == *slow.value);
}

TEST(JsonReader, PeeksTheContinueTokenBeforeTheItems) {
  EXPECT_EQ(peek_continue_token(kServiceList),
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjAyLCJzdGFydCI6Ii9hcHAxXHUwMDAwIn0");
  // The last page: no token.
  EXPECT_EQ(peek_continue_token(R"({"kind":"L","metadata":{"resourceVersion":"5"},"items":[)"
                                R"({"metadata":{"continue":"not this one"}}]})"),
            "");
  EXPECT_EQ(
      peek_continue_token(R"({"metadata":{"resourceVersion":"5","continue":""},"items":null})"),
      "");
  // Nested keys named continue are not the list's.
  EXPECT_EQ(
      peek_continue_token(R"({"metadata":{"x":{"continue":"no"},"continue":"yes"},"items":[]})"),
      "yes");
  EXPECT_EQ(peek_continue_token(R"({"spec":{"continue":"no"},"metadata":{},"items":[]})"), "");
  // The peek reads no further than "items": what follows is the full decoding's business.
  EXPECT_EQ(peek_continue_token(R"({"metadata":{"continue":"c"},"items":[{"broken":)"), "c");
  // Cannot tell: metadata after the items, no items, not an object, not JSON.
  for (const char* text :
       {R"({"items":[],"metadata":{"continue":"c"}})", R"({"metadata":{"continue":"c"}})",
        R"({"metadata":"x","items":[]})", R"(["metadata"])", "42", "{not json", ""}) {
    EXPECT_FALSE(peek_continue_token(text)) << text;
  }
}

}  // namespace
}  // namespace tidegate::controller::kube
