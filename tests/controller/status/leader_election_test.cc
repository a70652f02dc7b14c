#include "status/leader_election.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <mutex>
#include <thread>

namespace tidegate::controller::status {
namespace {

using namespace std::chrono_literals;

// One Lease in memory with the API server's compare-and-swap on resourceVersion.
class FakeLeaseServer : public kube::ApiClient {
 public:
  kube::Response get(const std::string&) override {
    std::lock_guard lock(mu_);
    if (body_.empty()) return {404, R"({"kind":"Status","code":404})", ""};
    return {200, body_, ""};
  }
  std::unique_ptr<kube::LineStream> stream(const std::string&, kube::Response* failed) override {
    failed->status = 405;
    return nullptr;
  }
  kube::Response send(const std::string& method, const std::string&, const std::string& body,
                      const std::string&) override {
    std::lock_guard lock(mu_);
    YAML::Node lease = YAML::Load(body);
    if (method == "POST") {
      if (!body_.empty()) return {409, "", ""};
    } else {
      const std::string rv = lease["metadata"]["resourceVersion"].Scalar();
      if (body_.empty() || rv != std::to_string(version_)) return {409, "", ""};
    }
    lease["metadata"]["resourceVersion"] = std::to_string(++version_);
    YAML::Emitter out;
    out << YAML::DoubleQuoted << YAML::Flow << lease;
    body_ = out.c_str();
    ++writes_;
    return {method == "POST" ? 201 : 200, body_, ""};
  }
  std::string holder() {
    std::lock_guard lock(mu_);
    if (body_.empty()) return "";
    return YAML::Load(body_)["spec"]["holderIdentity"].Scalar();
  }

 private:
  std::mutex mu_;
  std::string body_;
  int version_ = 0;
  int writes_ = 0;
};

ElectionOptions options(const std::string& identity) {
  ElectionOptions o;
  o.identity = identity;
  o.lease_duration = 600ms;
  o.retry_period = 50ms;
  return o;
}

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 3s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

TEST(LeaderElection, OneLeaderAndAHandOverOnStop) {
  FakeLeaseServer server;
  LeaderElector a(server, options("a"));
  LeaderElector b(server, options("b"));
  a.start();
  ASSERT_TRUE(eventually([&] { return a.is_leader(); }));
  b.start();
  // b keeps seeing a renew, so it never takes over.
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(a.is_leader());
  EXPECT_FALSE(b.is_leader());
  EXPECT_EQ(server.holder(), "a");
  // a releases on stop: b leads well before a lease duration would have run out from its view.
  auto t0 = std::chrono::steady_clock::now();
  a.stop();
  EXPECT_FALSE(a.is_leader());
  ASSERT_TRUE(eventually([&] { return b.is_leader(); }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
  EXPECT_EQ(server.holder(), "b");
  b.stop();
}

TEST(LeaderElection, MicroTimeFormat) {
  std::string t = micro_time_now();
  ASSERT_EQ(t.size(), 27u) << t;  // 2026-11-30T08:18:22.123456Z
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t[19], '.');
  EXPECT_EQ(t.back(), 'Z');
}

}  // namespace
}  // namespace tidegate::controller::status
