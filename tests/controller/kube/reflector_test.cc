#include "kube/reflector.h"

#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "scripted_stream.h"

namespace tidegate::controller::kube {
namespace {

using namespace std::chrono_literals;
using objects::Kind;

// Serves scripted responses: each list or watch request takes the next script entry for its
// type. A watch script is a list of lines; the stream ends after the last one; a script whose
// only line is "!NNN" is a watch refused with HTTP status NNN. When the script runs out, watches
// block until cancelled, as an idle watch does.
class FakeClient : public ApiClient {
 public:
  std::mutex mu;
  std::deque<Response> lists;
  std::deque<std::vector<std::string>> watches;
  std::vector<std::string> requests;
  std::vector<bool> list_protobuf;    // get_list's `protobuf`, per list request
  std::vector<size_t> list_expected;  // get_list's `expected_bytes`, per list request

  Response get_list(const std::string& path, bool protobuf, size_t expected_bytes) override {
    {
      std::lock_guard lock(mu);
      list_protobuf.push_back(protobuf);
      list_expected.push_back(expected_bytes);
    }
    return get(path);
  }

  Response get(const std::string& path) override {
    std::lock_guard lock(mu);
    requests.push_back(path);
    if (lists.empty()) return Response{0, "", "no script"};
    Response r = lists.front();
    lists.pop_front();
    return r;
  }

  std::unique_ptr<LineStream> stream(const std::string& path, Response* failed) override {
    std::lock_guard lock(mu);
    requests.push_back(path);
    if (watches.empty()) return std::make_unique<ScriptedStream>(std::vector<std::string>{}, true);
    auto lines = watches.front();
    watches.pop_front();
    if (lines.size() == 1 && lines[0].starts_with("!")) {
      failed->status = std::stoi(lines[0].substr(1));
      failed->body = "refused";
      return nullptr;
    }
    return std::make_unique<ScriptedStream>(std::move(lines), false);
  }

  Response send(const std::string&, const std::string&, const std::string&,
                const std::string&) override {
    return Response{405, "", ""};
  }
};

class RecordingSink : public ReflectorSink {
 public:
  std::mutex mu;
  std::vector<std::string> log;
  void replace(Kind, std::vector<objects::Object> objects) override {
    std::lock_guard lock(mu);
    std::string line = "replace";
    for (const auto& o : objects) line += " " + objects::meta_of(o).name;
    log.push_back(line);
  }
  void upsert(objects::Object o) override {
    std::lock_guard lock(mu);
    log.push_back("upsert " + objects::meta_of(o).name);
  }
  void remove(Kind, const std::string& ns, const std::string& name) override {
    std::lock_guard lock(mu);
    log.push_back("remove " + ns + "/" + name);
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mu);
    return log;
  }
};

std::string class_json(const std::string& name, const std::string& rv) {
  return R"({"metadata":{"name":")" + name + R"(","resourceVersion":")" + rv +
         R"("},"spec":{"controller":"c"}})";
}

std::string list_json(const std::string& rv, const std::vector<std::string>& items,
                      const std::string& cont = "") {
  std::string out =
      R"({"metadata":{"resourceVersion":")" + rv + R"(","continue":")" + cont + R"("},"items":[)";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]}";
}

template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// A watch's 410 Gone, as an ERROR event.
const std::string kGone =
    R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})";

ReflectorOptions fast() {
  ReflectorOptions o;
  o.backoff_min = 1ms;
  o.backoff_max = 4ms;
  o.watch_timeout = 10s;
  o.list_page_size = 2;
  return o;
}

TEST(Reflector, ListsInPagesThenWatchesFromTheListVersion) {
  FakeClient client;
  client.lists.push_back(
      {200, list_json("10", {class_json("a", "5"), class_json("b", "6")}, "tok"), ""});
  client.lists.push_back({200, list_json("11", {class_json("c", "7")}), ""});
  client.watches.push_back({
      R"({"type":"ADDED","object":)" + class_json("d", "12") + "}",
      R"({"type":"DELETED","object":)" + class_json("a", "13") + "}",
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"20"}}})",
  });
  RecordingSink sink;
  Reflector r(client, Kind::kIngressClass, "ignored-for-cluster-scoped", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return sink.snapshot().size() >= 3; }));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(client.mu);
    return client.requests.size() >= 4;
  }));
  r.stop();
  EXPECT_TRUE(r.synced());
  auto log = sink.snapshot();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0], "replace a b c");
  EXPECT_EQ(log[1], "upsert d");
  EXPECT_EQ(log[2], "remove /a");
  std::lock_guard lock(client.mu);
  EXPECT_EQ(client.requests[0], "/apis/networking.k8s.io/v1/ingressclasses?limit=2");
  EXPECT_EQ(client.requests[1], "/apis/networking.k8s.io/v1/ingressclasses?limit=2&continue=tok");
  EXPECT_NE(client.requests[2].find("resourceVersion=11&"), std::string::npos)
      << client.requests[2];
  // The stream ended after the bookmark: the next watch resumes from it.
  EXPECT_NE(client.requests[3].find("resourceVersion=20&"), std::string::npos)
      << client.requests[3];
}

// The next page is asked for once this one's continue token is read, before this one is decoded
// (the API server prepares it meanwhile): a page whose items turn out broken has already asked
// for the next, which is dropped with the failed list.
TEST(Reflector, AsksForTheNextPageBeforeDecodingThisOne) {
  FakeClient client;
  const std::string broken =
      R"({"metadata":{"resourceVersion":"10","continue":"tok"},"items":[{"broken":)";
  const std::string first = list_json("12", {class_json("a", "5"), class_json("b", "6")}, "tok2");
  client.lists.push_back({200, broken, ""});
  client.lists.push_back({200, list_json("10", {class_json("c", "7")}), ""});
  client.lists.push_back({200, first, ""});
  client.lists.push_back({200, list_json("12", {class_json("c", "7")}), ""});
  RecordingSink sink;
  Reflector r(client, Kind::kIngressClass, "", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return !sink.snapshot().empty(); }));
  r.stop();
  EXPECT_EQ(sink.snapshot(), (std::vector<std::string>{"replace a b c"}));
  EXPECT_EQ(r.lists(), 1u);
  std::lock_guard lock(client.mu);
  ASSERT_GE(client.requests.size(), 4u);
  EXPECT_EQ(client.requests[0], "/apis/networking.k8s.io/v1/ingressclasses?limit=2");
  EXPECT_EQ(client.requests[1], "/apis/networking.k8s.io/v1/ingressclasses?limit=2&continue=tok");
  // The broken page failed the list: it starts over.
  EXPECT_EQ(client.requests[2], "/apis/networking.k8s.io/v1/ingressclasses?limit=2");
  EXPECT_EQ(client.requests[3], "/apis/networking.k8s.io/v1/ingressclasses?limit=2&continue=tok2");
  // Room for each answer: a next page is expected to be the size of the page before it, a list's
  // first page the size of the last list's first page; nothing is known before the first.
  EXPECT_EQ(client.list_expected,
            (std::vector<size_t>{0, broken.size(), broken.size(), first.size()}));
}

// A sink that takes a first list page by page (as KubeSource does for the large kinds).
class PagingSink : public RecordingSink {
 public:
  bool takes_pages(Kind) const override { return true; }
  void add_page(Kind, std::vector<objects::Object> objects) override {
    std::lock_guard lock(mu);
    std::string line = "page";
    for (const auto& o : objects) line += " " + objects::meta_of(o).name;
    log.push_back(line);
  }
  void end_pages(Kind) override {
    std::lock_guard lock(mu);
    log.push_back("end");
  }
};

TEST(Reflector, AFirstListGoesPageByPageToASinkThatTakesPagesAndARelistReplaces) {
  FakeClient client;
  client.lists.push_back(
      {200, list_json("10", {class_json("a", "5"), class_json("b", "6")}, "tok"), ""});
  client.lists.push_back({200, list_json("10", {class_json("c", "7")}), ""});
  client.lists.push_back({200, list_json("30", {class_json("d", "25")}), ""});
  client.watches.push_back({kGone});
  PagingSink sink;
  Reflector r(client, Kind::kIngressClass, "", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return sink.snapshot().size() >= 4; }));
  r.stop();
  EXPECT_EQ(sink.snapshot(), (std::vector<std::string>{"page a b", "page c", "end", "replace d"}));
  EXPECT_EQ(r.lists(), 2u);
}

// Objects deleted between two attempts must not stay: once a page went in, the next attempt
// replaces (which removes what its list lacks).
TEST(Reflector, AFirstListThatFailsAfterAPageIsListedAgainWithReplace) {
  FakeClient client;
  client.lists.push_back(
      {200, list_json("10", {class_json("a", "5"), class_json("b", "6")}, "tok"), ""});
  client.lists.push_back({500, R"({"kind":"Status","code":500,"message":"boom"})", ""});
  client.lists.push_back({200, list_json("12", {class_json("a", "5"), class_json("c", "8")}), ""});
  PagingSink sink;
  Reflector r(client, Kind::kIngressClass, "", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return r.synced(); }));
  r.stop();
  EXPECT_EQ(sink.snapshot(), (std::vector<std::string>{"page a b", "replace a c"}));
}

TEST(Reflector, GoneMeansRelist) {
  FakeClient client;
  client.lists.push_back({200, list_json("10", {class_json("a", "5")}), ""});
  client.lists.push_back({200, list_json("30", {class_json("b", "25")}), ""});
  client.watches.push_back({kGone});
  RecordingSink sink;
  Reflector r(client, Kind::kIngressClass, "", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return sink.snapshot().size() >= 2; }));
  r.stop();
  auto log = sink.snapshot();
  EXPECT_EQ(log[0], "replace a");
  EXPECT_EQ(log[1], "replace b");
  EXPECT_EQ(r.lists(), 2u);
}

TEST(Reflector, FailedListsAreRetriedAndNothingIsHandedOver) {
  FakeClient client;
  client.lists.push_back({500, R"({"kind":"Status","code":500,"message":"boom"})", ""});
  client.lists.push_back({0, "", "connection refused"});
  // A built-in kind is never optional: 404 and 403 are failures like the others.
  client.lists.push_back({404, "404 page not found", ""});
  client.lists.push_back({403, R"({"kind":"Status","code":403,"reason":"Forbidden"})", ""});
  client.lists.push_back({200, list_json("3", {}), ""});
  RecordingSink sink;
  Reflector r(client, Kind::kIngressClass, "", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return r.synced(); }));
  r.stop();
  auto log = sink.snapshot();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0], "replace");
}

TEST(Reflector, AProtobufPageItCannotReadSendsTheKindToJson) {
  FakeClient client;
  // Lists of Services are asked for in protobuf; this answer is not one the reader can read.
  client.lists.push_back({200, std::string("k8s\0\x12\x05\x0a\x03\x12", 9), "",
                          "application/vnd.kubernetes.protobuf"});
  client.lists.push_back(
      {200,
       list_json("5", {R"({"metadata":{"name":"a","namespace":"ns","resourceVersion":"5"},)"
                       R"("spec":{"ports":[{"port":80}]}})"}),
       "", "application/json"});
  RecordingSink sink;
  Reflector r(client, Kind::kService, "", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return r.synced(); }));
  r.stop();
  EXPECT_EQ(sink.snapshot(), std::vector<std::string>{"replace a"});
  std::lock_guard lock(client.mu);
  EXPECT_EQ(client.list_protobuf, (std::vector<bool>{true, false}));
}

TEST(Reflector, KindsWithoutASchemaAreListedInJson) {
  FakeClient client;
  client.lists.push_back({200, list_json("3", {class_json("a", "3")}), ""});
  RecordingSink sink;
  Reflector r(client, Kind::kIngressClass, "", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return r.synced(); }));
  r.stop();
  std::lock_guard lock(client.mu);
  EXPECT_EQ(client.list_protobuf, std::vector<bool>{false});
}

std::string rule_set_json(const std::string& name, const std::string& rv) {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"ns","resourceVersion":")" + rv +
         R"("},"spec":{"rules":[{"match":"a","replace":"b"}]}})";
}

ReflectorOptions optional(std::chrono::milliseconds recheck) {
  ReflectorOptions o = fast();
  o.optional = true;
  o.absent_recheck = recheck;
  return o;
}

TEST(Reflector, OptionalResourceNotServedIsEmptyAndSyncedThenPickedUp) {
  FakeClient client;
  client.lists.push_back({404, "404 page not found", ""});  // the CRD is not installed
  client.lists.push_back({403, R"({"kind":"Status","code":403,"reason":"Forbidden"})", ""});
  client.lists.push_back({200, list_json("7", {rule_set_json("common", "6")}), ""});
  RecordingSink sink;
  ReflectorOptions o = optional(1ms);
  o.backoff_min = o.backoff_max = 60s;  // so that only the recheck interval can bring the list
  Reflector r(client, Kind::kSubstitutionRuleSet, "ns", sink, o);
  r.start();
  ASSERT_TRUE(eventually([&] { return sink.snapshot().size() >= 3; }));
  r.stop();
  EXPECT_TRUE(r.synced());
  EXPECT_FALSE(r.absent());
  EXPECT_EQ(sink.snapshot(), (std::vector<std::string>{"replace", "replace", "replace common"}));
  std::lock_guard lock(client.mu);
  EXPECT_EQ(client.requests[0],
            "/apis/tidegate.io/v1alpha1/namespaces/ns/substitutionrulesets?limit=2");
  EXPECT_NE(client.requests[3].find("substitutionrulesets?watch=1&"), std::string::npos)
      << client.requests[3];
}

TEST(Reflector, OptionalResourceNotServedIsRecheckedAtTheIntervalNotInALoop) {
  FakeClient client;
  for (int i = 0; i < 100; ++i) client.lists.push_back({404, "404 page not found", ""});
  RecordingSink sink;
  Reflector r(client, Kind::kSubstitutionRuleSet, "", sink, optional(60s));
  r.start();
  ASSERT_TRUE(eventually([&] { return r.synced(); }));
  EXPECT_TRUE(r.absent());
  std::this_thread::sleep_for(100ms);  // 25 backoff periods of fast()
  r.stop();
  std::lock_guard lock(client.mu);
  EXPECT_EQ(client.requests.size(), 1u);
}

TEST(Reflector, OptionalResourceThatStopsBeingServedIsEmptied) {
  FakeClient client;
  client.lists.push_back({200, list_json("7", {rule_set_json("common", "6")}), ""});
  client.lists.push_back({404, "404 page not found", ""});  // the CRD was deleted
  client.watches.push_back({"!404"});
  RecordingSink sink;
  Reflector r(client, Kind::kSubstitutionRuleSet, "", sink, optional(60s));
  r.start();
  ASSERT_TRUE(eventually([&] { return sink.snapshot().size() >= 2; }));
  r.stop();
  EXPECT_EQ(sink.snapshot(), (std::vector<std::string>{"replace common", "replace"}));
  EXPECT_TRUE(r.absent());
}

TEST(Reflector, UnreadableObjectIsRemovedNotKept) {
  FakeClient client;
  client.lists.push_back({200, list_json("1", {class_json("a", "1")}), ""});
  client.watches.push_back(
      {R"({"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"2"},"spec":{"controller":["not","a","string"]}}})"});
  RecordingSink sink;
  Reflector r(client, Kind::kIngressClass, "", sink, fast());
  r.start();
  ASSERT_TRUE(eventually([&] { return sink.snapshot().size() >= 2; }));
  r.stop();
  EXPECT_EQ(sink.snapshot()[1], "remove /a");
}

}  // namespace
}  // namespace tidegate::controller::kube
