// Tests for the Pusher against a fake Transport that behaves like the data plane's control socket:
// it answers Hello, applies snapshots and deltas to its own copy of the config (checking the delta
// base like the real one), and can be told to refuse, NACK, drop the connection or answer wrongly.

#include "push/pusher.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/model.h"
#include "protocol/protocol.h"

namespace tidegate::controller::push {
namespace {

using protocol::Message;

// ---- Builders ----

model::Config config_with_hosts(std::vector<std::string> hosts) {
  model::Config c;
  c.upstreams["default/web:80"] = {"default/web:80", {{"10.0.0.1", 8080}}};
  for (const auto& h : hosts) {
    c.virtual_hosts[h] = {h, {{"/", model::PathMatch::kPrefix, "default/web:80", "default/web"}}};
  }
  return c;
}

const model::Config kA = config_with_hosts({"a.com"});
const model::Config kB = config_with_hosts({"a.com", "b.com"});
const model::Config kC = config_with_hosts({"c.com"});

// ---- The fake data plane ----

// What the fake does with the next call instead of answering like a data plane would.
using Override = std::function<std::optional<Message>(const Message&)>;

Override answer(Message m) {
  return [m](const Message&) { return std::optional<Message>(m); };
}
Override drop_connection() {
  return [](const Message&) { return std::optional<Message>(); };
}

// State shared between a test and the FakeTransport the Pusher owns.
struct Wire {
  bool connected = false;
  bool refuse_connect = false;
  bool peer_alive = true;
  int connects = 0;
  int closes = 0;
  std::vector<Message> sent;
  std::deque<Override> overrides;  // consumed one per call, before the default behaviour

  // The data plane's side.
  std::optional<model::Config> served;
  uint64_t served_version = 0;

  std::optional<Message> default_answer(const Message& m) {
    if (std::holds_alternative<protocol::Hello>(m)) {
      return protocol::HelloReply{protocol::kProtocolVersion, served_version};
    }
    if (auto* s = std::get_if<protocol::Snapshot>(&m)) {
      served = s->config;
      served_version = s->version;
      return protocol::Ack{s->version};
    }
    if (auto* d = std::get_if<protocol::DeltaMsg>(&m)) {
      if (!served || d->base != served_version) return protocol::Nack{d->version, "wrong base"};
      auto r = model::apply(*served, d->delta);
      if (!r.error.empty()) return protocol::Nack{d->version, r.error};
      served = r.config;
      served_version = d->version;
      return protocol::Ack{d->version};
    }
    return protocol::Nack{0, "unexpected message"};
  }
};

class FakeTransport : public Transport {
 public:
  explicit FakeTransport(Wire& wire) : wire_(wire) {}
  bool connected() const override { return wire_.connected; }
  bool connect(std::string* error) override {
    EXPECT_FALSE(wire_.connected) << "connect() on a connected transport";
    if (wire_.refuse_connect) {
      *error = "connection refused";
      return false;
    }
    ++wire_.connects;
    wire_.connected = true;
    return true;
  }
  void close() override {
    if (wire_.connected) ++wire_.closes;
    wire_.connected = false;
  }
  bool alive() override { return wire_.connected && wire_.peer_alive; }
  std::optional<Message> call(const Message& m, std::chrono::milliseconds timeout,
                              std::string* error) override {
    EXPECT_TRUE(wire_.connected) << "call() on a closed transport";
    EXPECT_GT(timeout.count(), 0);
    wire_.sent.push_back(m);
    std::optional<Message> reply;
    if (!wire_.overrides.empty()) {
      auto o = std::move(wire_.overrides.front());
      wire_.overrides.pop_front();
      reply = o(m);
    } else {
      reply = wire_.default_answer(m);
    }
    if (!reply) {
      // As the real transport: an I/O error closes the connection.
      *error = "connection reset by peer";
      close();
    }
    return reply;
  }

 private:
  Wire& wire_;
};

// A pusher wired to `wire`.
std::unique_ptr<Pusher> pusher_on(Wire& wire) {
  return std::make_unique<Pusher>(std::make_unique<FakeTransport>(wire), "test-node");
}

// "hello", "snapshot", "delta", ... for each message sent.
std::vector<std::string> kinds(const std::vector<Message>& sent, size_t from = 0) {
  static const char* kNames[] = {"hello", "hello_reply", "snapshot", "delta", "ack", "nack"};
  std::vector<std::string> out;
  for (size_t i = from; i < sent.size(); ++i) out.push_back(kNames[sent[i].index()]);
  return out;
}

using Kinds = std::vector<std::string>;

// ---- Tests ----

TEST(PusherTest, FirstPushSaysHelloThenSendsASnapshot) {
  Wire wire;
  auto p = pusher_on(wire);
  EXPECT_FALSE(p->connected());
  EXPECT_EQ(p->last_acked(), std::nullopt);

  PushResult r = p->push(kA);
  EXPECT_EQ(r.status, PushStatus::kAcked) << r.error;
  EXPECT_TRUE(r.full_snapshot);
  EXPECT_EQ(wire.connects, 1);
  ASSERT_EQ(kinds(wire.sent), (Kinds{"hello", "snapshot"}));
  const auto& hello = std::get<protocol::Hello>(wire.sent[0]);
  EXPECT_EQ(hello.protocol, protocol::kProtocolVersion);
  EXPECT_EQ(hello.node, "test-node");
  const auto& snap = std::get<protocol::Snapshot>(wire.sent[1]);
  EXPECT_EQ(snap.config, kA);
  EXPECT_EQ(snap.version, r.version);
  EXPECT_NE(r.version, 0u);
  EXPECT_EQ(p->last_acked(), kA);
  EXPECT_EQ(p->acked_version(), r.version);
  EXPECT_TRUE(p->connected());
  EXPECT_EQ(wire.served, kA);
}

TEST(PusherTest, SecondPushSendsADeltaAgainstTheAckedVersion) {
  Wire wire;
  auto p = pusher_on(wire);
  PushResult first = p->push(kA);
  ASSERT_EQ(first.status, PushStatus::kAcked);

  PushResult second = p->push(kB);
  EXPECT_EQ(second.status, PushStatus::kAcked) << second.error;
  EXPECT_FALSE(second.full_snapshot);
  ASSERT_EQ(kinds(wire.sent, 2), (Kinds{"delta"}));
  const auto& d = std::get<protocol::DeltaMsg>(wire.sent[2]);
  EXPECT_EQ(d.base, first.version);
  EXPECT_GT(d.version, d.base);
  EXPECT_EQ(d.version, second.version);
  EXPECT_EQ(d.delta, model::diff(kA, kB));
  EXPECT_EQ(p->last_acked(), kB);
  EXPECT_EQ(p->acked_version(), second.version);
  EXPECT_EQ(wire.served, kB);
  EXPECT_EQ(wire.connects, 1);  // same connection

  // And a third one is based on the second.
  PushResult third = p->push(kC);
  ASSERT_EQ(third.status, PushStatus::kAcked) << third.error;
  EXPECT_EQ(std::get<protocol::DeltaMsg>(wire.sent.back()).base, second.version);
  EXPECT_EQ(wire.served, kC);
}

TEST(PusherTest, UnchangedConfigSendsNothing) {
  Wire wire;
  auto p = pusher_on(wire);
  PushResult first = p->push(kA);
  ASSERT_EQ(first.status, PushStatus::kAcked);
  const size_t sent = wire.sent.size();

  model::Config same = kA;  // equal, not the same object
  PushResult r = p->push(same);
  EXPECT_EQ(r.status, PushStatus::kUnchanged);
  EXPECT_EQ(r.version, first.version);
  EXPECT_EQ(wire.sent.size(), sent);
  EXPECT_EQ(p->acked_version(), first.version);
}

TEST(PusherTest, NackedDeltaKeepsTheAckedConfigAndResyncsWithASnapshot) {
  Wire wire;
  auto p = pusher_on(wire);
  PushResult first = p->push(kA);
  ASSERT_EQ(first.status, PushStatus::kAcked);

  wire.overrides.push_back([](const Message& m) -> std::optional<Message> {
    return protocol::Nack{std::get<protocol::DeltaMsg>(m).version, "host b.com: bad regex"};
  });
  PushResult r = p->push(kB);
  EXPECT_EQ(r.status, PushStatus::kNacked);
  EXPECT_EQ(r.error, "host b.com: bad regex");
  // The acked config never becomes the refused one: it stays, or is forgotten.
  EXPECT_NE(p->last_acked(), kB);
  EXPECT_EQ(p->acked_version(), first.version);
  EXPECT_TRUE(p->connected());  // a NACK is an answer, not a broken connection
  EXPECT_EQ(wire.served, kA);

  // The next attempt is a full snapshot on the same connection.
  const size_t before = wire.sent.size();
  PushResult retry = p->push(kB);
  EXPECT_EQ(retry.status, PushStatus::kAcked) << retry.error;
  EXPECT_TRUE(retry.full_snapshot);
  EXPECT_EQ(kinds(wire.sent, before), (Kinds{"snapshot"}));
  EXPECT_EQ(wire.connects, 1);
  EXPECT_EQ(p->last_acked(), kB);
  EXPECT_EQ(wire.served, kB);
}

TEST(PusherTest, NackedSnapshotLeavesNothingAckedAndRetriesWithASnapshot) {
  Wire wire;
  auto p = pusher_on(wire);
  wire.overrides.push_back(answer(protocol::HelloReply{protocol::kProtocolVersion, 0}));
  wire.overrides.push_back(answer(protocol::Nack{0, "invalid host \"A.com\""}));
  PushResult r = p->push(kA);
  EXPECT_EQ(r.status, PushStatus::kNacked);
  EXPECT_EQ(r.error, "invalid host \"A.com\"");
  EXPECT_TRUE(r.full_snapshot);
  EXPECT_EQ(p->last_acked(), std::nullopt);
  EXPECT_EQ(wire.served, std::nullopt);

  // Pushing the same config again is not "unchanged": nothing was ever acknowledged.
  PushResult retry = p->push(kA);
  EXPECT_EQ(retry.status, PushStatus::kAcked) << retry.error;
  EXPECT_EQ(kinds(wire.sent), (Kinds{"hello", "snapshot", "snapshot"}));
  EXPECT_EQ(p->last_acked(), kA);
}

TEST(PusherTest, ConnectionLostDuringADeltaReconnectsWithASnapshot) {
  Wire wire;
  auto p = pusher_on(wire);
  ASSERT_EQ(p->push(kA).status, PushStatus::kAcked);

  wire.overrides.push_back(drop_connection());
  PushResult r = p->push(kB);
  EXPECT_EQ(r.status, PushStatus::kDisconnected);
  EXPECT_NE(r.error, "");
  EXPECT_FALSE(p->connected());
  EXPECT_NE(p->last_acked(), kB);

  const size_t before = wire.sent.size();
  PushResult again = p->push(kB);
  EXPECT_EQ(again.status, PushStatus::kAcked) << again.error;
  EXPECT_TRUE(again.full_snapshot);
  EXPECT_EQ(kinds(wire.sent, before), (Kinds{"hello", "snapshot"}));
  EXPECT_EQ(wire.connects, 2);
  EXPECT_EQ(p->last_acked(), kB);
}

TEST(PusherTest, DataPlaneRestartBetweenPushesResyncs) {
  Wire wire;
  auto p = pusher_on(wire);
  ASSERT_EQ(p->push(kA).status, PushStatus::kAcked);

  // The data plane restarts: the connection is gone and it serves nothing.
  wire.connected = false;
  wire.served.reset();
  wire.served_version = 0;

  // Even an unchanged config is sent again, as a snapshot: the new process has nothing.
  const size_t before = wire.sent.size();
  PushResult r = p->push(kA);
  EXPECT_EQ(r.status, PushStatus::kAcked) << r.error;
  EXPECT_TRUE(r.full_snapshot);
  EXPECT_EQ(kinds(wire.sent, before), (Kinds{"hello", "snapshot"}));
  EXPECT_EQ(wire.served, kA);
}

TEST(PusherTest, ConnectRefusedIsDisconnectedAndSendsNothing) {
  Wire wire;
  wire.refuse_connect = true;
  auto p = pusher_on(wire);
  PushResult r = p->push(kA);
  EXPECT_EQ(r.status, PushStatus::kDisconnected);
  EXPECT_EQ(r.error, "connection refused");
  EXPECT_TRUE(wire.sent.empty());
  EXPECT_EQ(p->last_acked(), std::nullopt);

  wire.refuse_connect = false;
  EXPECT_EQ(p->push(kA).status, PushStatus::kAcked);
  EXPECT_EQ(kinds(wire.sent), (Kinds{"hello", "snapshot"}));
}

struct HelloCase {
  std::string name;
  Override reply;
  std::string want_error;  // substring
};

TEST(PusherTest, BadAnswersToHelloCloseTheConnection) {
  const std::vector<HelloCase> cases = {
      {"nack", answer(protocol::Nack{0, "unsupported protocol version 1"}),
       "data plane refused hello: unsupported protocol version 1"},
      {"ack instead of hello_reply", answer(protocol::Ack{1}), "unexpected answer to hello"},
      {"connection lost", drop_connection(), "connection reset"},
  };
  for (const auto& c : cases) {
    Wire wire;
    auto p = pusher_on(wire);
    wire.overrides.push_back(c.reply);
    PushResult r = p->push(kA);
    EXPECT_EQ(r.status, PushStatus::kDisconnected) << c.name;
    EXPECT_NE(r.error.find(c.want_error), std::string::npos) << c.name << ": " << r.error;
    EXPECT_FALSE(p->connected()) << c.name;
    EXPECT_EQ(kinds(wire.sent), (Kinds{"hello"})) << c.name;  // no snapshot after a bad hello
    EXPECT_EQ(p->last_acked(), std::nullopt) << c.name;

    // The next push starts over.
    PushResult again = p->push(kA);
    EXPECT_EQ(again.status, PushStatus::kAcked) << c.name << ": " << again.error;
    EXPECT_EQ(kinds(wire.sent), (Kinds{"hello", "hello", "snapshot"})) << c.name;
  }
}

struct WrongAnswerCase {
  std::string name;
  bool to_delta;  // else to the first snapshot
  Override reply;
};

// An answer that does not acknowledge what was sent (another version, another type) must not move
// the acked config; the pusher cannot tell what the data plane serves, so it reconnects.
TEST(PusherTest, WrongAnswersToSnapshotsAndDeltas) {
  auto ack_other_version = [](const Message& m) -> std::optional<Message> {
    uint64_t v = std::visit(
        [](const auto& x) -> uint64_t {
          if constexpr (requires { x.version; }) return x.version;
          return 0;
        },
        m);
    return protocol::Ack{v - 1};
  };
  const std::vector<WrongAnswerCase> cases = {
      {"snapshot acked with another version", false, ack_other_version},
      {"delta acked with another version", true, ack_other_version},
      {"snapshot answered with hello_reply", false, answer(protocol::HelloReply{1, 0})},
      {"delta answered with hello_reply", true, answer(protocol::HelloReply{1, 0})},
  };
  for (const auto& c : cases) {
    Wire wire;
    auto p = pusher_on(wire);
    std::optional<model::Config> acked_before;
    uint64_t acked_version_before = 0;
    if (c.to_delta) {
      ASSERT_EQ(p->push(kA).status, PushStatus::kAcked) << c.name;
      acked_before = kA;
      acked_version_before = p->acked_version();
    } else {
      wire.overrides.push_back(answer(protocol::HelloReply{protocol::kProtocolVersion, 0}));
    }
    wire.overrides.push_back(c.reply);
    PushResult r = p->push(kB);
    EXPECT_NE(r.status, PushStatus::kAcked) << c.name;
    EXPECT_EQ(r.status, PushStatus::kDisconnected) << c.name;
    EXPECT_NE(r.error, "") << c.name;
    EXPECT_FALSE(p->connected()) << c.name;
    EXPECT_EQ(p->last_acked(), acked_before) << c.name;
    EXPECT_EQ(p->acked_version(), acked_version_before) << c.name;

    const size_t before = wire.sent.size();
    PushResult again = p->push(kB);
    EXPECT_EQ(again.status, PushStatus::kAcked) << c.name << ": " << again.error;
    EXPECT_EQ(kinds(wire.sent, before), (Kinds{"hello", "snapshot"})) << c.name;
    EXPECT_EQ(wire.served, kB) << c.name;
  }
}

TEST(PusherTest, VersionsGrowAcrossPushesAndReconnects) {
  Wire wire;
  auto p = pusher_on(wire);
  uint64_t last = 0;
  const std::vector<model::Config> configs = {kA, kB, kC, kA};
  for (int round = 0; round < 3; ++round) {
    for (const auto& c : configs) {
      PushResult r = p->push(c);
      ASSERT_EQ(r.status, PushStatus::kAcked) << r.error;
      EXPECT_GT(r.version, last);
      last = r.version;
    }
    wire.connected = false;  // drop between rounds
  }
  EXPECT_EQ(wire.connects, 3);
}

// Random configs and random failures: whenever a push is acknowledged, the fake data plane serves
// exactly the desired config, and the pusher's acked config agrees with it.
TEST(PusherTest, RandomFailuresNeverDesynchronise) {
  const std::vector<model::Config> configs = {kA, kB, kC, config_with_hosts({}),
                                              config_with_hosts({"a.com", "c.com"})};
  std::mt19937 rng(12345);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  Wire wire;
  auto p = pusher_on(wire);
  int acked = 0;
  for (int i = 0; i < 500; ++i) {
    switch (pick(8)) {
      case 0:
        wire.overrides.push_back(drop_connection());
        break;
      case 1:
        wire.overrides.push_back([](const Message& m) -> std::optional<Message> {
          return protocol::Nack{0, "refused"};
        });
        break;
      case 2:
        wire.connected = false;  // the peer went away between pushes
        break;
      case 3:
        wire.refuse_connect = !wire.refuse_connect;
        break;
      default:
        break;
    }
    const model::Config& desired = configs[pick(static_cast<int>(configs.size()))];
    PushResult r = p->push(desired);
    wire.overrides.clear();  // an override not used by this push must not hit the next one
    if (r.status == PushStatus::kAcked || r.status == PushStatus::kUnchanged) {
      ++acked;
      ASSERT_EQ(wire.served, desired) << "iteration " << i;
      ASSERT_EQ(p->last_acked(), desired) << "iteration " << i;
      ASSERT_EQ(p->acked_version(), wire.served_version) << "iteration " << i;
    }
    if (p->last_acked() && p->connected()) {
      ASSERT_EQ(p->last_acked(), wire.served) << "iteration " << i;
    }
  }
  EXPECT_GT(acked, 150);
}

// ---- Changed upstreams given by the caller (the endpoint fast path) ----

model::Config with_endpoints(model::Config c, const std::string& upstream,
                             std::vector<model::Endpoint> endpoints) {
  c.upstreams[upstream] = {upstream, std::move(endpoints)};
  return c;
}

// The caller's Config shared (translate::IncrementalTranslator::shared_config): the pusher keeps
// it instead of a copy, reads only its parts other than the upstreams (which the endpoint fast
// path changes in place) and lets an older one go as soon as a newer is acknowledged or found
// equal.
TEST(PusherTest, SharedConfigIsKeptInsteadOfACopy) {
  Wire wire;
  auto p = pusher_on(wire);
  auto current = std::make_shared<model::Config>(kA);
  ASSERT_EQ(p->push(*current, nullptr, current).status, PushStatus::kAcked);
  EXPECT_EQ(current.use_count(), 2);  // the caller's and the pusher's
  EXPECT_EQ(p->last_acked(), kA);

  // The fast path: the same object's upstreams changed in place.
  current->upstreams["default/web:80"].endpoints = {{"10.0.0.2", 8080}};
  const std::vector<std::string> changed = {"default/web:80"};
  PushResult r = p->push(*current, &changed, current);
  ASSERT_EQ(r.status, PushStatus::kAcked) << r.error;
  EXPECT_EQ(std::get<protocol::DeltaMsg>(wire.sent.back()).delta.upsert_upstreams,
            std::vector<model::Upstream>{current->upstreams.at("default/web:80")});
  EXPECT_EQ(wire.served, *current);
  EXPECT_EQ(p->last_acked(), *current);

  // A full translation: a new object, diffed against what was acknowledged (the older object's
  // parts and the upstreams as acknowledged); the older one is let go.
  const model::Config before = *current;
  std::weak_ptr<model::Config> older = current;
  current = std::make_shared<model::Config>(before);
  current->virtual_hosts["b.com"] = kB.virtual_hosts.at("b.com");
  r = p->push(*current, nullptr, current);
  ASSERT_EQ(r.status, PushStatus::kAcked) << r.error;
  EXPECT_EQ(std::get<protocol::DeltaMsg>(wire.sent.back()).delta, model::diff(before, *current));
  EXPECT_TRUE(older.expired());
  EXPECT_EQ(wire.served, *current);

  // A full translation that changed nothing: unchanged, and the older object is let go too.
  const size_t sent = wire.sent.size();
  older = current;
  current = std::make_shared<model::Config>(*current);
  EXPECT_EQ(p->push(*current, nullptr, current).status, PushStatus::kUnchanged);
  EXPECT_EQ(wire.sent.size(), sent);
  EXPECT_TRUE(older.expired());

  // The kept object's upstreams changed without a push (a build whose push failed would be
  // followed by a snapshot; here the next push names none of them): they are not read, the
  // acknowledged ones are.
  current->upstreams["default/web:80"].endpoints = {{"10.0.0.9", 8080}};
  model::Config desired = *current;
  desired.virtual_hosts.erase("b.com");
  r = p->push(desired);
  ASSERT_EQ(r.status, PushStatus::kAcked) << r.error;
  const auto& delta = std::get<protocol::DeltaMsg>(wire.sent.back()).delta;
  EXPECT_EQ(delta.remove_virtual_hosts, std::vector<std::string>{"b.com"});
  EXPECT_EQ(delta.upsert_upstreams,
            std::vector<model::Upstream>{desired.upstreams.at("default/web:80")});
  EXPECT_EQ(wire.served, desired);
  EXPECT_EQ(p->last_acked(), desired);
  EXPECT_EQ(current.use_count(), 1);  // a Config given without `shared` is copied
}

TEST(PusherTest, ChangedUpstreamsMakeTheDeltaFromThemAlone) {
  Wire wire;
  auto p = pusher_on(wire);
  ASSERT_EQ(p->push(kA).status, PushStatus::kAcked);

  model::Config next = with_endpoints(kA, "default/web:80", {{"10.0.0.2", 8080}});
  next = with_endpoints(next, "default/api:80", {{"10.0.0.3", 9000}});
  // Listed twice, and one that exists on neither side: both harmless.
  const std::vector<std::string> changed = {"default/web:80", "default/api:80", "default/web:80",
                                            "default/none:80"};
  PushResult r = p->push(next, &changed);
  ASSERT_EQ(r.status, PushStatus::kAcked) << r.error;
  const auto& d = std::get<protocol::DeltaMsg>(wire.sent.back());
  EXPECT_EQ(d.delta, model::diff(kA, next));
  EXPECT_EQ(wire.served, next);
  EXPECT_EQ(p->last_acked(), next);  // patched in place, equal to what was pushed

  // An upstream that went away is removed.
  const std::vector<std::string> gone = {"default/api:80"};
  model::Config back = kA;
  back.upstreams["default/web:80"] = next.upstreams["default/web:80"];
  r = p->push(back, &gone);
  ASSERT_EQ(r.status, PushStatus::kAcked) << r.error;
  EXPECT_EQ(std::get<protocol::DeltaMsg>(wire.sent.back()).delta.remove_upstreams, gone);
  EXPECT_EQ(wire.served, back);
  EXPECT_EQ(p->last_acked(), back);

  // Nothing changed among them: nothing is sent.
  const size_t sent = wire.sent.size();
  EXPECT_EQ(p->push(back, &gone).status, PushStatus::kUnchanged);
  EXPECT_EQ(wire.sent.size(), sent);
}

TEST(PusherTest, ChangedUpstreamsAreTrustedNotChecked) {
  // The names are the caller's promise; the pusher does not look at the rest of the Config (that
  // is the point). A broken promise shows: the new host is not sent.
  Wire wire;
  auto p = pusher_on(wire);
  ASSERT_EQ(p->push(kA).status, PushStatus::kAcked);
  model::Config next = with_endpoints(kB, "default/web:80", {{"10.0.0.2", 8080}});
  const std::vector<std::string> changed = {"default/web:80"};
  ASSERT_EQ(p->push(next, &changed).status, PushStatus::kAcked);
  const auto& d = std::get<protocol::DeltaMsg>(wire.sent.back()).delta;
  EXPECT_TRUE(d.upsert_virtual_hosts.empty());
  EXPECT_EQ(d.upsert_upstreams.size(), 1u);
}

TEST(PusherTest, ChangedUpstreamsAreIgnoredWhenThePreviousPushFailed) {
  Wire wire;
  auto p = pusher_on(wire);
  ASSERT_EQ(p->push(kA).status, PushStatus::kAcked);
  wire.overrides.push_back(answer(protocol::Nack{0, "refused"}));
  ASSERT_EQ(p->push(kB).status, PushStatus::kNacked);
  // Relative to kB, only an upstream changed; but the data plane serves kA: a snapshot.
  model::Config next = with_endpoints(kB, "default/web:80", {{"10.0.0.2", 8080}});
  const std::vector<std::string> changed = {"default/web:80"};
  PushResult r = p->push(next, &changed);
  ASSERT_EQ(r.status, PushStatus::kAcked) << r.error;
  EXPECT_TRUE(r.full_snapshot);
  EXPECT_EQ(wire.served, next);

  // A lost connection: the next push resyncs whatever it is told.
  wire.overrides.push_back(drop_connection());
  model::Config later = with_endpoints(next, "default/web:80", {{"10.0.0.4", 8080}});
  ASSERT_EQ(p->push(later, &changed).status, PushStatus::kDisconnected);
  model::Config last = with_endpoints(later, "default/web:80", {{"10.0.0.5", 8080}});
  r = p->push(last, &changed);
  ASSERT_EQ(r.status, PushStatus::kAcked) << r.error;
  EXPECT_TRUE(r.full_snapshot);
  EXPECT_EQ(wire.served, last);
}

TEST(PusherTest, RandomEndpointChangesWithFailuresNeverDesynchronise) {
  // Each desired Config differs from the previous one in some upstreams' endpoints, named
  // exactly; failures in between must never leave the data plane on a wrong Config.
  std::mt19937 rng(777);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const std::vector<std::string> names = {"default/web:80", "default/api:80", "default/db:80"};
  Wire wire;
  auto p = pusher_on(wire);
  model::Config desired = kA;
  int deltas = 0;
  for (int i = 0; i < 500; ++i) {
    switch (pick(12)) {
      case 0:
        wire.overrides.push_back(drop_connection());
        break;
      case 1:
        wire.overrides.push_back(answer(protocol::Nack{0, "refused"}));
        break;
      case 2:
        wire.connected = false;
        break;
      default:
        break;
    }
    std::vector<std::string> changed;
    for (const auto& name : names) {
      if (pick(3) != 0) continue;
      changed.push_back(name);
      if (name != "default/web:80" && pick(4) == 0) {
        desired.upstreams.erase(name);  // not named by a route
      } else {
        desired = with_endpoints(desired, name, {{"10.0.0." + std::to_string(pick(5) + 1), 80}});
      }
    }
    PushResult r = p->push(desired, &changed);
    wire.overrides.clear();
    if (r.status == PushStatus::kAcked || r.status == PushStatus::kUnchanged) {
      if (!r.full_snapshot && r.status == PushStatus::kAcked) ++deltas;
      ASSERT_EQ(wire.served, desired) << "iteration " << i;
      ASSERT_EQ(p->last_acked(), desired) << "iteration " << i;
    }
  }
  EXPECT_GT(deltas, 100);
}

}  // namespace
}  // namespace tidegate::controller::push
