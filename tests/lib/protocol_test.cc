// Tests for the control protocol: every message survives encode/decode, bad input becomes an
// error (never an exception), and the frame reader reassembles frames however the bytes arrive.

#include "protocol/protocol.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tidegate::protocol {
namespace {

using model::PathMatch;

// ---- Builders ----

model::Route route(PathMatch match, std::string path, std::string upstream) {
  return model::Route{std::move(path), match, std::move(upstream), "default/web"};
}

model::Config sample_config() {
  model::Config c;
  c.virtual_hosts["foo.com"] = {"foo.com",
                                {route(PathMatch::kExact, "/login", "default/web:80"),
                                 route(PathMatch::kPrefix, "/", "default/web:80")}};
  c.virtual_hosts["*.bar.com"] = {
      "*.bar.com", {route(PathMatch::kRegex, "/api/v[0-9]+/\"q\"\\d", "default/api:80")}};
  c.virtual_hosts["*"] = {"*", {}};
  c.virtual_hosts["www.foo.com"] = {"www.foo.com", {}};
  c.virtual_hosts["www.foo.com"].redirect_to = "foo.com";
  c.upstreams["default/web:80"] = {"default/web:80", {{"10.0.0.1", 8080}, {"fd00::1", 65535}}};
  c.upstreams["default/api:80"] = {"default/api:80", {}};
  c.upstreams["default/api:80"].tls = {true, "api.default.svc", "-----BEGIN CERTIFICATE-----\n"};
  c.default_route = route(PathMatch::kPrefix, "/", "default/web:80");
  c.virtual_hosts["foo.com"].ssl_redirect = true;
  c.certificates["default/foo-cert"] = {
      "default/foo-cert", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
      "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"};
  c.tls_hosts["foo.com"] = {"foo.com", "default/foo-cert"};
  c.tls_hosts["*.bar.com"] = {"*.bar.com", "default/foo-cert"};
  model::Substitution sub;
  sub.name = "default/web";
  sub.rules = {{"example\\.com", "clone.test", ""}, {"(hello) \"x\"", "$1 $$", "i"}};
  sub.mime_types = {"application/xhtml+xml", "text/html"};
  sub.max_buffer = 1 << 20;
  c.substitutions["default/web"] = sub;
  c.virtual_hosts["foo.com"].routes[0].substitution = "default/web";
  c.default_route->substitution = "default/web";
  // Issue #6 policy: a route with a policy and a canary, an upstream with a policy, and a
  // default route with a policy; the other routes and upstreams keep the defaults.
  auto& login = c.virtual_hosts["foo.com"].routes[0];
  login.policy.mut().read_timeout = std::chrono::milliseconds(3'600'000);
  login.policy.mut().rewrite_target = "/new";
  login.policy.mut().response_headers = {{"X-Frame-Options", "DENY"}};
  login.policy.mut().rate_limits.rps = 2.5;
  login.policy.mut().source_ranges = model::SourceRanges{{"10.0.0.0/8"}};
  login.canary = model::Canary{"default/api:80", 10, 1000, "X-Canary", "blue", "canary"};
  c.upstreams["default/web:80"].policy.mut().load_balance = model::LoadBalance::kEwma;
  c.upstreams["default/web:80"].policy.mut().affinity = model::SessionAffinity{};
  c.upstreams["default/api:80"].policy.mut().protocol = model::BackendProtocol::kHttps;
  c.upstreams["default/api:80"].policy.mut().tls_server_name = "api.internal";
  c.default_route->policy.mut().max_body_bytes = 8 << 20;
  // Gateway API routes: conditions besides the path, weighted backends (one unresolved), header
  // modifiers, a redirect built from the request and a prefix rewrite.
  model::Route gw = route(PathMatch::kPrefix, "/gw", "");
  gw.method = "POST";
  gw.headers = {{"x-version", "v2", model::ValueMatch::kExact},
                {"x-user", "[a-z]+", model::ValueMatch::kRegex}};
  gw.query = {{"debug", "1", model::ValueMatch::kExact}};
  gw.backends = {{"default/web:80", 3}, {"default/api:80", 1}, {"", 1}};
  gw.policy.mut().request_header_modifier =
      model::HeaderModifier{{{"X-Set", "1"}}, {{"X-Add", "2"}}, {"X-Gone"}};
  gw.policy.mut().response_header_modifier = model::HeaderModifier{{}, {{"X-Out", "3"}}, {}};
  gw.policy.mut().path_rewrite = model::PathModifier{model::PathModifier::Kind::kPrefix, "/v2"};
  model::Route redirect = route(PathMatch::kExact, "/old", "");
  redirect.policy.mut().request_redirect = model::RequestRedirect{
      "https", "new.example.com", model::PathModifier{model::PathModifier::Kind::kFull, "/new"},
      8443, 301};
  c.virtual_hosts["foo.com"].routes.push_back(gw);
  c.virtual_hosts["foo.com"].routes.push_back(redirect);
  // A Gateway's listeners, with a host and a TLS host of their own beside the shared foo.com.
  c.listeners["default/gw:80"] = {"default/gw:80", 20000, false};
  c.listeners["default/gw:443"] = {"default/gw:443", 20001, true};
  model::VirtualHost scoped{"foo.com", {route(PathMatch::kPrefix, "/", "default/api:80")}};
  scoped.listener = "default/gw:80";
  c.virtual_hosts[model::host_key(scoped)] = scoped;
  model::TlsHost scoped_tls{"foo.com", "default/foo-cert"};
  scoped_tls.listener = "default/gw:443";
  c.tls_hosts[model::host_key(scoped_tls)] = scoped_tls;
  return c;
}

model::Delta sample_delta() {
  model::Delta d;
  d.upsert_virtual_hosts = {{"new.com", {route(PathMatch::kPrefix, "/x", "default/web:80")}}};
  d.remove_virtual_hosts = {"old.com", "*"};
  d.upsert_upstreams = {{"default/web:80", {{"10.0.0.2", 80}}}};
  d.remove_upstreams = {"default/gone:80"};
  d.upsert_certificates = {{"default/new-cert", "CERT", "KEY"}};
  d.remove_certificates = {"default/old-cert"};
  d.upsert_tls_hosts = {{"new.com", "default/new-cert"}};
  d.remove_tls_hosts = {"old.com"};
  model::Substitution sub;
  sub.name = "default/new";
  sub.rules = {{"a", "b", ""}};
  d.upsert_substitutions = {sub};
  d.remove_substitutions = {"default/old"};
  d.upsert_virtual_hosts[0].routes[0].substitution = "default/new";
  d.upsert_listeners = {{"default/gw:80", 20000, false}};
  d.remove_listeners = {"default/old:80"};
  return d;
}

std::string frame_of(std::string_view payload) {
  uint32_t n = static_cast<uint32_t>(payload.size());
  std::string out = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8), static_cast<char>(n)};
  return out.append(payload);
}

std::string header_of(uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
          static_cast<char>(n)};
}

// Field-by-field equality (the message structs have no operator== of their own).
struct SameMessage {
  bool operator()(const Hello& a, const Hello& b) const {
    return a.protocol == b.protocol && a.node == b.node;
  }
  bool operator()(const HelloReply& a, const HelloReply& b) const {
    return a.protocol == b.protocol && a.version == b.version;
  }
  bool operator()(const Snapshot& a, const Snapshot& b) const {
    return a.version == b.version && a.config == b.config;
  }
  bool operator()(const DeltaMsg& a, const DeltaMsg& b) const {
    return a.version == b.version && a.base == b.base && a.delta == b.delta;
  }
  bool operator()(const Ack& a, const Ack& b) const { return a.version == b.version; }
  bool operator()(const Nack& a, const Nack& b) const {
    return a.version == b.version && a.reason == b.reason;
  }
  template <typename A, typename B>
  bool operator()(const A&, const B&) const {
    return false;
  }
};

bool same(const Message& a, const Message& b) { return std::visit(SameMessage{}, a, b); }

// ---- Round trips ----

struct RoundTripCase {
  std::string name;
  Message message;
  std::string type;  // the "type" the JSON must carry
};

std::vector<RoundTripCase> round_trip_cases() {
  model::Delta clears_default;
  clears_default.default_route_changed = true;  // to "no default route"
  model::Delta sets_default;
  sets_default.default_route_changed = true;
  sets_default.default_route = route(PathMatch::kExact, "/", "default/web:80");
  model::Delta only_cert_removal;
  only_cert_removal.remove_certificates = {"default/old-cert"};
  model::Delta only_tls_upsert;
  only_tls_upsert.upsert_tls_hosts = {{"a.com", "default/cert"}};
  model::Delta only_substitution_removal;
  only_substitution_removal.remove_substitutions = {"default/web"};
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return {
      {"hello", Hello{kProtocolVersion, "controller-0"}, "hello"},
      {"hello without node", Hello{kProtocolVersion, ""}, "hello"},
      {"hello from a future protocol", Hello{2, "x"}, "hello"},
      {"hello reply, nothing served", HelloReply{kProtocolVersion, 0}, "hello_reply"},
      {"hello reply, largest version", HelloReply{kProtocolVersion, kMax}, "hello_reply"},
      {"empty snapshot", Snapshot{1, {}}, "snapshot"},
      {"full snapshot", Snapshot{1714550000123, sample_config()}, "snapshot"},
      {"empty delta", DeltaMsg{2, 1, {}}, "delta"},
      {"delta with every list", DeltaMsg{kMax, kMax - 1, sample_delta()}, "delta"},
      {"delta with only certificate removals", DeltaMsg{5, 4, only_cert_removal}, "delta"},
      {"delta with only TLS host upserts", DeltaMsg{6, 5, only_tls_upsert}, "delta"},
      {"delta with only substitution removals", DeltaMsg{7, 6, only_substitution_removal}, "delta"},
      {"delta clearing the default route", DeltaMsg{3, 2, clears_default}, "delta"},
      {"delta setting the default route", DeltaMsg{4, 3, sets_default}, "delta"},
      {"ack", Ack{42}, "ack"},
      {"nack", Nack{43, "host foo.com: invalid regex \"(\"\n\ttab, ünïcødé"}, "nack"},
      {"nack without reason", Nack{0, ""}, "nack"},
  };
}

TEST(ProtocolRoundTripTest, EveryMessageType) {
  for (const auto& c : round_trip_cases()) {
    const std::string json = encode_json(c.message);
    EXPECT_NE(json.find("\"type\":\"" + c.type + "\""), std::string::npos)
        << c.name << ": " << json;
    DecodeResult decoded = decode_json(json);
    ASSERT_TRUE(decoded.message.has_value()) << c.name << ": " << decoded.error << "\n" << json;
    EXPECT_EQ(decoded.error, "") << c.name;
    EXPECT_EQ(decoded.message->index(), c.message.index()) << c.name;
    EXPECT_TRUE(same(*decoded.message, c.message)) << c.name << ": " << json;
    // Encoding is deterministic: the decoded message encodes to the same text.
    EXPECT_EQ(encode_json(*decoded.message), json) << c.name;
  }
}

TEST(ProtocolRoundTripTest, FrameIsBigEndianLengthThenJson) {
  for (const auto& c : round_trip_cases()) {
    const std::string json = encode_json(c.message);
    const std::string frame = encode_frame(c.message);
    EXPECT_EQ(frame, frame_of(json)) << c.name;
  }
  // A payload longer than 255 bytes uses more than the last header byte.
  Nack long_reason{1, std::string(300, 'x')};
  std::string frame = encode_frame(long_reason);
  uint32_t n = static_cast<uint32_t>(frame.size() - 4);
  EXPECT_GT(n, 300u);
  EXPECT_EQ(frame.substr(0, 4), header_of(n));
  EXPECT_EQ(static_cast<unsigned char>(frame[0]), 0);
  EXPECT_EQ(static_cast<unsigned char>(frame[1]), 0);
  EXPECT_EQ(static_cast<unsigned char>(frame[2]), n >> 8);
}

TEST(ProtocolRoundTripTest, SnapshotFrameWrittenPieceByPieceIsTheSameBytes) {
  // encode_snapshot_frame writes the document itself, one host or upstream at a time; it must be
  // byte for byte what the whole document gives, whatever the Config holds or lacks.
  model::Config full = sample_config();
  model::Config no_optional = full;
  no_optional.certificates.clear();
  no_optional.tls_hosts.clear();
  no_optional.substitutions.clear();
  no_optional.listeners.clear();
  no_optional.default_route.reset();
  model::Config only_default;
  only_default.default_route = full.default_route;
  only_default.default_route->substitution.clear();
  model::Config bad_utf8 = full;
  for (auto& [_, host] : bad_utf8.virtual_hosts) {
    for (auto& route : host.routes) route.ingress = "default/\xff\xfe";
  }
  ASSERT_NE(encode_frame(Snapshot{1, bad_utf8}), encode_frame(Snapshot{1, full}));
  // Hosts and upstreams without policies are written as text, not through nlohmann's documents:
  // every optional member of theirs, and strings that need escaping or are not ASCII.
  model::Config plain;
  for (const std::string& text :
       {std::string("a.example"), std::string("q\"uote"), std::string("back\\slash"),
        std::string("new\nline\x01\x1f"), std::string("del\x7f"), std::string("caf\xc3\xa9"),
        std::string("bad\xff"), std::string()}) {
    model::VirtualHost v{text + ".host", {route(PathMatch::kPrefix, "/" + text, "up/" + text)}};
    v.routes[0].ingress = text;
    v.routes.push_back(route(PathMatch::kExact, "/x", "up/" + text));
    v.routes.back().fallback_upstream = "fb/" + text;
    v.routes.back().precedence_length = 42;
    v.routes.back().substitution = text;
    v.routes.push_back(route(PathMatch::kRegex, "/y", "up/" + text));
    v.routes.back().method = "GET";  // conditions: written through to_json
    v.listener = text;
    v.redirect_to = text;
    v.ssl_redirect = !text.empty();
    v.falls_through = text.size() % 2 == 0;
    plain.virtual_hosts[model::host_key(v)] = v;
    model::Upstream u{"up/" + text, {{"10.0.0.1", 1}, {"fd00::" + text, 65535}}};
    if (text.size() % 2 == 0) u.tls = {true, text, text};
    plain.upstreams[u.name] = u;
  }
  plain.upstreams["empty"] = {"empty", {}};
  for (const auto& [name, config] :
       std::vector<std::pair<std::string, model::Config>>{{"empty", model::Config{}},
                                                          {"full", full},
                                                          {"no optional sections", no_optional},
                                                          {"only a default route", only_default},
                                                          {"invalid UTF-8", bad_utf8},
                                                          {"plain hosts and upstreams", plain}}) {
    for (uint64_t version : {uint64_t{0}, uint64_t{1714550000123}, ~uint64_t{0}}) {
      EXPECT_EQ(encode_snapshot_frame(version, config), encode_frame(Snapshot{version, config}))
          << name << " " << version;
    }
  }
  // And it decodes to what was encoded.
  auto frame = encode_snapshot_frame(7, full);
  auto decoded = decode_json(std::string_view(frame).substr(4));
  ASSERT_TRUE(decoded.message) << decoded.error;
  EXPECT_EQ(std::get<Snapshot>(*decoded.message).config, full);
}

// With 1,000 upstreams or more the upstreams are read on a second thread beside the virtual
// hosts (and with 1,000 virtual hosts they are written beside the rest): the configuration
// decodes to what was encoded, and of two errors the virtual hosts' is reported, as when the
// sections are read in turn.
TEST(ProtocolRoundTripTest, ManyUpstreamsReadBesideTheHosts) {
  model::Config big = sample_config();
  for (int i = 0; i < 1500; ++i) {
    const std::string n = std::to_string(i);
    model::Upstream u{"ns/app" + n + ":80", {{"10.3." + std::to_string(i % 200) + ".1", 8080}}};
    if (i % 7 == 0) u.tls = {true, "app" + n + ".internal", ""};
    big.upstreams[u.name] = u;
    big.virtual_hosts["h" + n + ".example"] = {"h" + n + ".example",
                                               {route(PathMatch::kPrefix, "/", u.name)}};
  }
  const std::string frame = encode_snapshot_frame(9, big);
  // Its virtual hosts were written on a second thread: the same bytes as the whole document.
  EXPECT_EQ(frame, encode_frame(Snapshot{9, big}));
  auto decoded = decode_json(std::string_view(frame).substr(4));
  ASSERT_TRUE(decoded.message) << decoded.error;
  EXPECT_EQ(std::get<Snapshot>(*decoded.message).config, big);

  // A duplicate upstream and a duplicate host spliced into the encoded text.
  const std::string text(std::string_view(frame).substr(4));
  auto with = [&](bool bad_host, bool bad_upstream) {
    std::string t = text;
    if (bad_upstream) {
      const std::string first = R"("name":"ns/app1000:80")";
      const size_t at = t.find(first);
      EXPECT_NE(at, std::string::npos);
      t.replace(at, first.size(), R"("name":"ns/app1001:80")");
    }
    if (bad_host) {
      const std::string first = R"("host":"h1000.example")";
      const size_t at = t.find(first);
      EXPECT_NE(at, std::string::npos);
      t.replace(at, first.size(), R"("host":"h1001.example")");
    }
    DecodeResult r = decode_json(t);
    EXPECT_FALSE(r.message.has_value());
    return r.error;
  };
  EXPECT_NE(with(false, true).find("duplicate upstream \"ns/app1001:80\""), std::string::npos)
      << with(false, true);
  EXPECT_NE(with(true, false).find("duplicate virtual host \"h1001.example\""), std::string::npos)
      << with(true, false);
  EXPECT_EQ(with(true, true), with(true, false));
}

TEST(ProtocolRoundTripTest, ConfigJsonRoundTrip) {
  const model::Config c = sample_config();
  std::string error;
  auto back = config_from_json(config_to_json(c), &error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(*back, c);

  EXPECT_EQ(config_from_json("{", &error), std::nullopt);
  EXPECT_EQ(error, "malformed JSON");
  error.clear();
  EXPECT_EQ(config_from_json(R"({"virtual_hosts": []})", &error), std::nullopt);
  EXPECT_NE(error, "");
  EXPECT_EQ(config_from_json("{}", nullptr), std::nullopt);  // a null error pointer is fine
}

// Object text from Kubernetes manifests is not guaranteed to be UTF-8; JSON must be. Encoding
// must not throw (an exception in the pusher would take the controller down).
TEST(ProtocolRoundTripTest, InvalidUtf8IsReplacedNotThrown) {
  const Message m = Nack{3, "bad \xff byte, cut \xe2\x82"};
  std::string json;
  ASSERT_NO_THROW(json = encode_json(m));
  ASSERT_NO_THROW(encode_frame(m));
  DecodeResult r = decode_json(json);
  ASSERT_TRUE(r.message.has_value()) << r.error << "\n" << json;
  // U+FFFD for the stray byte; the cut sequence at the end is replaced too (how many U+FFFD is
  // the JSON library's choice).
  const std::string& reason = std::get<Nack>(*r.message).reason;
  EXPECT_TRUE(reason.starts_with("bad \xef\xbf\xbd byte, cut \xef\xbf\xbd")) << reason;

  model::Config c = sample_config();
  c.virtual_hosts["foo.com"].routes[0].path = "/caf\xe9";
  ASSERT_NO_THROW(json = config_to_json(c));
  std::string error;
  EXPECT_TRUE(config_from_json(json, &error).has_value()) << error;
}

// ---- Bad input ----

struct BadCase {
  std::string name;
  std::string json;
  std::string want;  // substring of the error
};

// A snapshot around `config`, a delta around `delta`.
std::string snapshot_json(const std::string& config) {
  return R"({"type":"snapshot","version":1,"config":)" + config + "}";
}
std::string delta_json(const std::string& delta) {
  return R"({"type":"delta","version":2,"base":1,"delta":)" + delta + "}";
}
std::string config_with_host(const std::string& vhost) {
  return R"({"virtual_hosts":[)" + vhost + R"(],"upstreams":[]})";
}
std::string config_with_upstream(const std::string& upstream) {
  return R"({"virtual_hosts":[],"upstreams":[)" + upstream + "]}";
}
const std::string kEmptyLists =
    R"("upsert_virtual_hosts":[],"remove_virtual_hosts":[],"upsert_upstreams":[],"remove_upstreams":[])";

TEST(ProtocolDecodeTest, BadInputIsAnErrorNotAnException) {
  const std::vector<BadCase> cases = {
      {"empty", "", "malformed JSON"},
      {"truncated", R"({"type":"ack","version":1)", "malformed JSON"},
      {"trailing garbage", R"({"type":"ack","version":1} x)", "malformed JSON"},
      {"two objects", R"({"type":"ack","version":1}{"type":"ack","version":2})", "malformed JSON"},
      {"invalid UTF-8", "{\"type\":\"nack\",\"version\":1,\"reason\":\"\xff\"}", "malformed JSON"},
      {"array", "[]", "not an object"},
      {"number", "42", "not an object"},
      {"null", "null", "not an object"},
      {"string", "\"ack\"", "not an object"},
      {"no type", "{}", "bad message"},
      {"type is a number", R"({"type":1})", "bad message"},
      {"type is null", R"({"type":null,"version":1})", "bad message"},
      {"unknown type", R"({"type":"bogus","version":1})", "unknown message type \"bogus\""},
      {"type is case-sensitive", R"({"type":"ACK","version":1})", "unknown message type"},
      {"hello without protocol", R"({"type":"hello","node":"x"})", "bad message"},
      {"hello protocol as string", R"({"type":"hello","protocol":"1"})", "bad message"},
      {"hello node as number", R"({"type":"hello","protocol":1,"node":5})", "bad message"},
      {"hello_reply without version", R"({"type":"hello_reply","protocol":1})", "bad message"},
      {"ack without version", R"({"type":"ack"})", "bad message"},
      {"ack version as string", R"({"type":"ack","version":"1"})", "bad message"},
      {"ack version as bool", R"({"type":"ack","version":true})", "bad message"},
      {"nack reason as number", R"({"type":"nack","version":1,"reason":7})", "bad message"},
      {"nack without version", R"({"type":"nack","reason":"x"})", "bad message"},
      {"snapshot without config", R"({"type":"snapshot","version":1})", "bad message"},
      {"snapshot without version", R"({"type":"snapshot","config":{}})", "bad message"},
      {"config without virtual_hosts", snapshot_json(R"({"upstreams":[]})"), "bad message"},
      {"config without upstreams", snapshot_json(R"({"virtual_hosts":[]})"), "bad message"},
      {"config is an array", snapshot_json("[]"), "bad message"},
      {"virtual host is a string", snapshot_json(config_with_host(R"("foo.com")")), "bad message"},
      {"virtual host without routes", snapshot_json(config_with_host(R"({"host":"foo.com"})")),
       "bad message"},
      {"route without path",
       snapshot_json(
           config_with_host(R"({"host":"a.com","routes":[{"match":"Prefix","upstream":"u"}]})")),
       "bad message"},
      {"route without upstream",
       snapshot_json(
           config_with_host(R"({"host":"a.com","routes":[{"path":"/","match":"Prefix"}]})")),
       "bad message"},
      {"unknown path match",
       snapshot_json(config_with_host(
           R"({"host":"a.com","routes":[{"path":"/","match":"Fuzzy","upstream":"u"}]})")),
       "unknown path match \"Fuzzy\""},
      {"path match as number",
       snapshot_json(config_with_host(
           R"({"host":"a.com","routes":[{"path":"/","match":1,"upstream":"u"}]})")),
       "bad message"},
      {"duplicate virtual host",
       snapshot_json(R"({"virtual_hosts":[{"host":"a.com","routes":[]},)"
                     R"({"host":"a.com","routes":[]}],"upstreams":[]})"),
       "duplicate virtual host \"a.com\""},
      {"duplicate upstream",
       snapshot_json(R"({"virtual_hosts":[],"upstreams":[{"name":"u","endpoints":[]},)"
                     R"({"name":"u","endpoints":[]}]})"),
       "duplicate upstream \"u\""},
      {"upstream without endpoints", snapshot_json(config_with_upstream(R"({"name":"u"})")),
       "bad message"},
      {"endpoints null", snapshot_json(config_with_upstream(R"({"name":"u","endpoints":null})")),
       "\"endpoints\" must be an array"},
      {"endpoints an object",
       snapshot_json(config_with_upstream(
           R"({"name":"u","endpoints":{"a":{"address":"10.0.0.1","port":80}}})")),
       "\"endpoints\" must be an array"},
      {"upstream tls a string",
       snapshot_json(config_with_upstream(R"({"name":"u","endpoints":[],"tls":"on"})")),
       "upstream \"tls\" must be an object"},
      {"route policy with an unknown member",
       snapshot_json(config_with_host(
           R"({"host":"a.com","routes":[{"path":"/","match":"Prefix","upstream":"u",)"
           R"("policy":{"no_such_field":1}}]})")),
       "bad message"},
      {"route weight negative",
       snapshot_json(config_with_host(
           R"({"host":"a.com","routes":[{"path":"/","match":"Prefix","upstream":"u",)"
           R"("backends":[{"upstream":"u","weight":-1}]}]})")),
       "bad message"},
      {"certificates null",
       snapshot_json(R"({"virtual_hosts":[],"upstreams":[],"certificates":null})"),
       "\"certificates\" must be an array"},
      {"endpoint port as string",
       snapshot_json(config_with_upstream(
           R"({"name":"u","endpoints":[{"address":"10.0.0.1","port":"80"}]})")),
       "bad message"},
      {"endpoint without address",
       snapshot_json(config_with_upstream(R"({"name":"u","endpoints":[{"port":80}]})")),
       "bad message"},
      {"certificate without key",
       snapshot_json(
           R"({"virtual_hosts":[],"upstreams":[],"certificates":[{"name":"c","cert_pem":"x"}]})"),
       "bad message"},
      {"duplicate certificate",
       snapshot_json(
           R"({"virtual_hosts":[],"upstreams":[],"certificates":[)"
           R"({"name":"c","cert_pem":"x","key_pem":"y"},{"name":"c","cert_pem":"x","key_pem":"y"}]})"),
       "duplicate certificate \"c\""},
      {"TLS host without certificate",
       snapshot_json(R"({"virtual_hosts":[],"upstreams":[],"tls_hosts":[{"host":"a.com"}]})"),
       "bad message"},
      {"duplicate TLS host",
       snapshot_json(R"({"virtual_hosts":[],"upstreams":[],"tls_hosts":[)"
                     R"({"host":"a.com","certificate":"c"},{"host":"a.com","certificate":"d"}]})"),
       "duplicate TLS host \"a.com\""},
      {"ssl_redirect as string",
       snapshot_json(config_with_host(R"({"host":"a.com","routes":[],"ssl_redirect":"yes"})")),
       "bad message"},
      {"delta certificate removals not strings",
       delta_json("{" + kEmptyLists + R"(,"remove_certificates":[1]})"), "bad message"},
      {"delta without lists", delta_json("{}"), "bad message"},
      {"delta without base", R"({"type":"delta","version":2,"delta":{)" + kEmptyLists + "}}",
       "bad message"},
      {"delta remove list of numbers",
       delta_json(
           R"({"upsert_virtual_hosts":[],"remove_virtual_hosts":[1],"upsert_upstreams":[],"remove_upstreams":[]})"),
       "bad message"},
      {"delta default_route_changed without default_route",
       delta_json("{" + kEmptyLists + R"(,"default_route_changed":true})"), "bad message"},
      {"delta default_route_changed as string",
       delta_json("{" + kEmptyLists + R"(,"default_route_changed":"yes"})"), "bad message"},
  };
  for (const auto& c : cases) {
    DecodeResult r;
    ASSERT_NO_THROW(r = decode_json(c.json)) << c.name;
    EXPECT_FALSE(r.message.has_value()) << c.name;
    EXPECT_NE(r.error.find(c.want), std::string::npos)
        << c.name << ": error \"" << r.error << "\", want it to contain \"" << c.want << "\"";
  }
}

// Numbers that do not fit the field they are read into must be refused, not wrapped: a port of
// 70000 read as 4464 would send traffic to the wrong place.
TEST(ProtocolDecodeTest, OutOfRangeNumbersAreRejected) {
  auto endpoint = [](const std::string& port) {
    return snapshot_json(config_with_upstream(
        R"({"name":"u","endpoints":[{"address":"10.0.0.1","port":)" + port + "}]}"));
  };
  const std::vector<BadCase> cases = {
      {"port above 65535", endpoint("70000"), "bad message"},
      {"negative port", endpoint("-1"), "bad message"},
      {"fractional port", endpoint("80.5"), "bad message"},
      {"negative version", R"({"type":"ack","version":-1})", "bad message"},
      {"fractional version", R"({"type":"ack","version":1.5})", "bad message"},
      {"version too large for a float", R"({"type":"ack","version":1e30})", "bad message"},
      {"negative delta base",
       R"({"type":"delta","version":2,"base":-1,"delta":{)" + kEmptyLists + "}}", "bad message"},
      {"negative hello protocol", R"({"type":"hello","protocol":-1})", "bad message"},
      {"fractional hello protocol", R"({"type":"hello","protocol":1.5})", "bad message"},
      {"hello protocol beyond int", R"({"type":"hello","protocol":4294967297})", "bad message"},
  };
  for (const auto& c : cases) {
    DecodeResult r = decode_json(c.json);
    EXPECT_FALSE(r.message.has_value()) << c.name << ": decoded as " << encode_json(*r.message);
    EXPECT_NE(r.error.find(c.want), std::string::npos) << c.name << ": error \"" << r.error << "\"";
  }
}

TEST(ProtocolDecodeTest, OptionalFieldsHaveDefaults) {
  // node, reason and a route's ingress may be left out.
  auto hello = decode_json(R"({"type":"hello","protocol":1})");
  ASSERT_TRUE(hello.message) << hello.error;
  EXPECT_EQ(std::get<Hello>(*hello.message).node, "");
  auto nack = decode_json(R"({"type":"nack","version":9})");
  ASSERT_TRUE(nack.message) << nack.error;
  EXPECT_EQ(std::get<Nack>(*nack.message).reason, "");
  auto snap = decode_json(snapshot_json(config_with_host(
      R"({"host":"a.com","routes":[{"path":"/","match":"Exact","upstream":"u"}]})")));
  ASSERT_TRUE(snap.message) << snap.error;
  const auto& routes = std::get<Snapshot>(*snap.message).config.virtual_hosts.at("a.com").routes;
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].ingress, "");
  EXPECT_EQ(routes[0].match, PathMatch::kExact);
  // Unknown fields are ignored, so that a newer peer can add some.
  auto ack = decode_json(R"({"type":"ack","version":5,"extra":{"a":[1,2]}})");
  ASSERT_TRUE(ack.message) << ack.error;
  EXPECT_EQ(std::get<Ack>(*ack.message).version, 5u);
}

// simdjson's tree keeps no sign for an integer zero: -0 is 0 (docs/control-protocol.md).
TEST(ProtocolDecodeTest, MinusZeroIsZero) {
  auto ack = decode_json(R"({"type":"ack","version":-0})");
  ASSERT_TRUE(ack.message) << ack.error;
  EXPECT_EQ(std::get<Ack>(*ack.message).version, 0u);
  EXPECT_FALSE(decode_json(R"({"type":"ack","version":-1})").message);
  EXPECT_FALSE(decode_json(R"({"type":"ack","version":0.0})").message);
}

TEST(ProtocolDecodeTest, AMemberWrittenTwiceCountsOnceWithItsLastValue) {
  auto ack = decode_json(R"({"type":"ack","version":1,"version":7})");
  ASSERT_TRUE(ack.message) << ack.error;
  EXPECT_EQ(std::get<Ack>(*ack.message).version, 7u);
  auto snap = decode_json(snapshot_json(config_with_host(
      R"({"host":"a.com","routes":[{"path":"/a","match":"Fuzzy","upstream":"u","match":"Exact",)"
      R"("path":"/b"}]})")));
  ASSERT_TRUE(snap.message) << snap.error;
  const auto& routes = std::get<Snapshot>(*snap.message).config.virtual_hosts.at("a.com").routes;
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].path, "/b");
  EXPECT_EQ(routes[0].match, PathMatch::kExact);
}

TEST(ProtocolDecodeTest, PoliciesOnTheWire) {
  // Default policies are left out, so that snapshots of Ingresses without annotations do not
  // grow; present ones are objects under "policy" and "canary".
  model::Config c;
  c.virtual_hosts["a.com"] = {"a.com", {route(PathMatch::kPrefix, "/", "default/web:80")}};
  c.upstreams["default/web:80"] = {"default/web:80", {}};
  std::string plain = config_to_json(c);
  EXPECT_EQ(plain.find("policy"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("canary"), std::string::npos) << plain;

  c.virtual_hosts["a.com"].routes[0].policy.mut().app_root = "/app";
  c.upstreams["default/web:80"].policy.mut().load_balance = model::LoadBalance::kLeastConn;
  std::string with = config_to_json(c);
  EXPECT_NE(with.find(R"("policy":{"app_root":"/app"})"), std::string::npos) << with;
  EXPECT_NE(with.find(R"("policy":{"load_balance":"least_conn"})"), std::string::npos) << with;

  // A field this side does not know is refused rather than half-applied.
  std::string error;
  auto unknown = R"({"virtual_hosts":[{"host":"a.com","routes":[{"path":"/","match":"Prefix",)"
                 R"("upstream":"u","policy":{"gzip":true}}]}],"upstreams":[]})";
  EXPECT_EQ(config_from_json(unknown, &error), std::nullopt);
  EXPECT_NE(error.find("gzip"), std::string::npos) << error;
  auto bad_canary = R"({"virtual_hosts":[],"upstreams":[{"name":"u","endpoints":[],)"
                    R"("policy":{"load_balance":"random"}}]})";
  EXPECT_EQ(config_from_json(bad_canary, &error), std::nullopt);
  EXPECT_NE(error.find("load_balance"), std::string::npos) << error;
}

// Policies written alike in one message decode to one shared object (as the controller shares
// an Ingress's policy between its routes), different ones to their own, and routes and upstreams
// without a policy hold the default without an object. A member written twice inside a policy
// is text like any other: equal texts, equal values.
TEST(ProtocolDecodeTest, PoliciesWrittenAlikeAreSharedOnceDecoded) {
  model::Config c;
  auto add = [&](const std::string& host, const std::string& upstream) {
    c.virtual_hosts[host] = {host, {route(PathMatch::kPrefix, "/", upstream)}};
    c.upstreams[upstream] = {upstream, {{"10.0.0.1", 80}}};
  };
  for (const char* n : {"a", "b", "c", "d"}) add(std::string(n) + ".com", std::string("ns/") + n);
  for (const char* n : {"a", "b", "c"}) {
    c.virtual_hosts[std::string(n) + ".com"].routes[0].policy.mut().read_timeout =
        std::chrono::seconds(90);
    c.upstreams[std::string("ns/") + n].policy.mut().load_balance = model::LoadBalance::kEwma;
  }
  c.virtual_hosts["c.com"].routes[0].policy.mut().app_root = "/app";
  c.default_route = route(PathMatch::kPrefix, "/", "ns/a");
  c.default_route->policy.mut().read_timeout = std::chrono::seconds(90);
  c.upstreams["ns/c"].policy.mut().hash_by = "$remote_addr";
  for (bool as_delta : {false, true}) {
    SCOPED_TRACE(as_delta ? "delta" : "snapshot");
    std::vector<model::Route> routes;
    std::vector<model::Upstream> upstreams;
    std::optional<model::Route> default_route;
    if (!as_delta) {
      auto decoded = decode_json(std::string_view(encode_frame(Snapshot{1, c})).substr(4));
      ASSERT_TRUE(decoded.message) << decoded.error;
      const model::Config& got = std::get<Snapshot>(*decoded.message).config;
      EXPECT_EQ(got, c);
      for (const auto& [key, vh] : got.virtual_hosts) routes.push_back(vh.routes[0]);
      for (const auto& [key, up] : got.upstreams) upstreams.push_back(up);
      default_route = got.default_route;
    } else {
      model::Delta d;
      for (const auto& [key, vh] : c.virtual_hosts) d.upsert_virtual_hosts.push_back(vh);
      for (const auto& [key, up] : c.upstreams) d.upsert_upstreams.push_back(up);
      d.default_route_changed = true;
      d.default_route = c.default_route;
      auto decoded = decode_json(std::string_view(encode_frame(DeltaMsg{2, 1, d})).substr(4));
      ASSERT_TRUE(decoded.message) << decoded.error;
      const model::Delta& got = std::get<DeltaMsg>(*decoded.message).delta;
      for (const auto& vh : got.upsert_virtual_hosts) routes.push_back(vh.routes[0]);
      upstreams = got.upsert_upstreams;
      default_route = got.default_route;
    }
    ASSERT_EQ(routes.size(), 4u);  // a, b, c, d in order
    ASSERT_EQ(upstreams.size(), 4u);
    ASSERT_TRUE(default_route);
    EXPECT_EQ(routes[0].policy->read_timeout, std::chrono::seconds(90));
    EXPECT_TRUE(routes[0].policy.shares_with(routes[1].policy));
    EXPECT_TRUE(routes[0].policy.shares_with(default_route->policy));
    EXPECT_FALSE(routes[0].policy.shares_with(routes[2].policy));  // with app_root too
    EXPECT_EQ(routes[2].policy->app_root, "/app");
    EXPECT_TRUE(routes[3].policy.shares_with(model::Shared<model::RoutePolicy>()));
    EXPECT_TRUE(upstreams[0].policy.shares_with(upstreams[1].policy));
    EXPECT_FALSE(upstreams[0].policy.shares_with(upstreams[2].policy));  // with hash_by too
    EXPECT_EQ(upstreams[2].policy->hash_by, "$remote_addr");
    EXPECT_TRUE(upstreams[3].policy.shares_with(model::Shared<model::UpstreamPolicy>()));
  }
}

TEST(ProtocolDecodeTest, ClientCertificatesOnTheWire) {
  model::Config c;
  c.tls_hosts["a.com"] = {"a.com", ""};
  EXPECT_EQ(config_to_json(c).find("client_auth"), std::string::npos);
  model::ClientAuth auth;
  auth.verify = model::ClientVerify::kOptionalNoCa;
  auth.ca_pem = "-----BEGIN CERTIFICATE-----\n";
  auth.crl_pem = "-----BEGIN X509 CRL-----\n";
  auth.secret = "default/client-ca";
  auth.verify_depth = 4;
  auth.pass_certificate = true;
  auth.error_page = "/cert";
  auth.match_cn = "CN=a";
  c.tls_hosts["a.com"].client_auth = auth;
  std::string error;
  auto back = config_from_json(config_to_json(c), &error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(*back, c);
  // Unknown fields and modes are refused, not half-applied.
  for (const char* bad :
       {R"({"virtual_hosts":[],"upstreams":[],"tls_hosts":[{"host":"a.com","certificate":"",)"
        R"("client_auth":{"verify":"on","ca_pem":"x","secret":"s","crl":"x"}}]})",
        R"({"virtual_hosts":[],"upstreams":[],"tls_hosts":[{"host":"a.com","certificate":"",)"
        R"("client_auth":{"verify":"sometimes","ca_pem":"x","secret":"s"}}]})",
        R"({"virtual_hosts":[],"upstreams":[],"tls_hosts":[{"host":"a.com","certificate":"",)"
        R"("client_auth":{"verify":"on","ca_pem":"x","secret":"s","verify_depth":99}}]})"}) {
    EXPECT_EQ(config_from_json(bad, &error), std::nullopt) << bad;
    EXPECT_NE(error.find("client_auth"), std::string::npos) << error;
  }
}

TEST(ProtocolDecodeTest, SubstitutionsOnTheWire) {
  // The documented shape (docs/control-protocol.md): flags may be left out, the rest is required.
  auto snap = decode_json(R"({"type":"snapshot","version":1,"config":{
      "virtual_hosts":[{"host":"a.com","routes":[
        {"path":"/","match":"Prefix","upstream":"u","substitution":"ns/web"}]}],
      "upstreams":[{"name":"u","endpoints":[]}],
      "substitutions":[{"name":"ns/web","rules":[{"match":"a","replace":"b"},
                                                 {"match":"c","replace":"","flags":"i"}],
                        "mime_types":["text/html"],"max_buffer":65536}]}})");
  ASSERT_TRUE(snap.message) << snap.error;
  const auto& config = std::get<Snapshot>(*snap.message).config;
  EXPECT_EQ(config.virtual_hosts.at("a.com").routes[0].substitution, "ns/web");
  const auto& sub = config.substitutions.at("ns/web");
  ASSERT_EQ(sub.rules.size(), 2u);
  EXPECT_EQ(sub.rules[0], (substitution::Rule{"a", "b", ""}));
  EXPECT_EQ(sub.rules[1], (substitution::Rule{"c", "", "i"}));
  EXPECT_EQ(sub.mime_types, std::vector<std::string>{"text/html"});
  EXPECT_EQ(sub.max_buffer, 65536u);
  EXPECT_TRUE(model::validate(config).empty());

  // A route without a substitution carries no field.
  model::Route plain = route(PathMatch::kPrefix, "/", "u");
  model::Config c;
  c.virtual_hosts["a.com"] = {"a.com", {plain}};
  EXPECT_EQ(config_to_json(c).find("substitution"), std::string::npos) << config_to_json(c);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"([{"name":"n","rules":[{"replace":"b"}],"mime_types":[],"max_buffer":1}])", "match"},
      {R"([{"name":"n","rules":[{"match":"a"}],"mime_types":[],"max_buffer":1}])", "replace"},
      {R"([{"name":"n","rules":[],"max_buffer":1}])", "mime_types"},
      {R"([{"name":"n","rules":[],"mime_types":[]}])", "max_buffer"},
      {R"([{"name":"n","rules":[],"mime_types":[],"max_buffer":-1}])", "max_buffer"},
      {R"([{"name":"n","rules":[],"mime_types":[],"max_buffer":1},
          {"name":"n","rules":[],"mime_types":[],"max_buffer":1}])",
       "duplicate substitution \"n\""},
  };
  for (const auto& [subs, want] : bad) {
    auto r = decode_json(R"({"type":"snapshot","version":1,"config":{"virtual_hosts":[],
        "upstreams":[],"substitutions":)" +
                         subs + "}}");
    EXPECT_FALSE(r.message.has_value()) << subs;
    EXPECT_NE(r.error.find(want), std::string::npos) << subs << ": " << r.error;
  }
}

// ---- FrameReader ----

std::vector<std::string> sample_payloads() {
  return {encode_json(Hello{1, "n"}), "", encode_json(Snapshot{7, sample_config()}), "x",
          encode_json(Ack{7})};
}

std::string stream_of(const std::vector<std::string>& payloads) {
  std::string out;
  for (const auto& p : payloads) out += frame_of(p);
  return out;
}

std::vector<std::string> drain(FrameReader& reader) {
  std::vector<std::string> out;
  while (auto p = reader.next()) out.push_back(std::move(*p));
  return out;
}

TEST(FrameReaderTest, SplitAtEveryByteBoundary) {
  const auto payloads = sample_payloads();
  const std::string stream = stream_of(payloads);
  for (size_t split = 0; split <= stream.size(); ++split) {
    FrameReader reader;
    reader.append(stream.data(), split);
    auto got = drain(reader);
    reader.append(stream.data() + split, stream.size() - split);
    auto rest = drain(reader);
    got.insert(got.end(), rest.begin(), rest.end());
    ASSERT_EQ(got, payloads) << "split at " << split;
    ASSERT_EQ(reader.error(), "") << "split at " << split;
    ASSERT_EQ(reader.next(), std::nullopt);
  }
}

TEST(FrameReaderTest, OneByteAtATime) {
  const auto payloads = sample_payloads();
  const std::string stream = stream_of(payloads);
  FrameReader reader;
  std::vector<std::string> got;
  for (size_t i = 0; i < stream.size(); ++i) {
    reader.append(stream.data() + i, 1);
    auto more = drain(reader);
    got.insert(got.end(), more.begin(), more.end());
  }
  EXPECT_EQ(got, payloads);
  EXPECT_EQ(reader.error(), "");
}

TEST(FrameReaderTest, SeveralFramesInOneAppend) {
  const auto payloads = sample_payloads();
  const std::string stream = stream_of(payloads);
  FrameReader reader;
  reader.append(stream.data(), stream.size());
  EXPECT_EQ(drain(reader), payloads);
  // Every payload decodes back to a message (the empty and "x" ones to errors).
  for (const auto& p : payloads) {
    auto r = decode_json(p);
    EXPECT_NE(r.message.has_value(), !r.error.empty()) << p;
  }
}

TEST(FrameReaderTest, ManyLargeFramesAcrossBufferCompaction) {
  // Frames of 10 kB read while more arrive: the reader drops consumed bytes past 64 kB, which must
  // not lose or corrupt anything.
  std::vector<std::string> payloads;
  for (int i = 0; i < 40; ++i)
    payloads.push_back(std::string(10'000 + i, static_cast<char>('a' + i % 26)));
  const std::string stream = stream_of(payloads);
  FrameReader reader;
  std::vector<std::string> got;
  const size_t chunk = 7'777;  // not a multiple of anything in particular
  for (size_t pos = 0; pos < stream.size(); pos += chunk) {
    reader.append(stream.data() + pos, std::min(chunk, stream.size() - pos));
    if (auto p = reader.next()) got.push_back(*p);  // read at most one per append: a backlog builds
  }
  auto rest = drain(reader);
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, payloads);
}

// A frame of megabytes (a full configuration) arriving in reads of 64 KiB, then one that shares
// its last read with the next frame's first bytes: room is reserved once the length is known,
// and a buffer holding exactly one frame becomes its payload.
TEST(FrameReaderTest, MegabyteFramesInSocketSizedReads) {
  std::string big(3'000'000, 'x');
  for (size_t i = 0; i < big.size(); i += 4'099) big[i] = static_cast<char>('a' + i % 26);
  const std::vector<std::string> payloads = {big, "{}", big.substr(17), "", "tail"};
  for (const size_t chunk : {size_t{65'536}, size_t{1'000'003}}) {
    const std::string stream = stream_of(payloads);
    FrameReader reader;
    std::vector<std::string> got;
    for (size_t pos = 0; pos < stream.size(); pos += chunk) {
      reader.append(stream.data() + pos, std::min(chunk, stream.size() - pos));
      auto more = drain(reader);
      got.insert(got.end(), more.begin(), more.end());
    }
    EXPECT_EQ(got, payloads) << "reads of " << chunk;
    EXPECT_EQ(reader.error(), "");
    EXPECT_EQ(reader.next(), std::nullopt);
    // The reader works on after the moved-out buffer.
    const std::string again = frame_of(big);
    reader.append(again.data(), again.size());
    EXPECT_EQ(reader.next(), big);
  }
}

TEST(FrameReaderTest, OversizedFrameIsAnError) {
  FrameReader reader;
  const std::string header = header_of(kMaxFrameBytes + 1);
  reader.append(header.data(), header.size());
  EXPECT_EQ(reader.next(), std::nullopt);
  EXPECT_NE(reader.error().find("exceeds the limit"), std::string::npos) << reader.error();
  // The reader stays failed: the connection is to be closed, later bytes are not frames.
  const std::string good = frame_of("{}");
  reader.append(good.data(), good.size());
  EXPECT_EQ(reader.next(), std::nullopt);
  EXPECT_NE(reader.error(), "");
}

TEST(FrameReaderTest, LargestLengthsAtAndOverTheLimit) {
  struct Case {
    uint32_t length;
    bool error;
  };
  for (const Case& c : {Case{kMaxFrameBytes, false}, Case{kMaxFrameBytes + 1, true},
                        Case{0xffffffffu, true}, Case{0x80000000u, true}}) {
    FrameReader reader;
    const std::string header = header_of(c.length);
    reader.append(header.data(), header.size());
    EXPECT_EQ(reader.next(), std::nullopt) << c.length;  // either an error or waiting for more
    EXPECT_EQ(!reader.error().empty(), c.error) << c.length << ": " << reader.error();
  }
}

TEST(FrameReaderTest, OversizedFrameAfterGoodOnes) {
  std::string stream = frame_of("a") + frame_of("b") + header_of(kMaxFrameBytes + 1) + "zzzz";
  FrameReader reader;
  reader.append(stream.data(), stream.size());
  EXPECT_EQ(drain(reader), (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(reader.error(), "");
}

TEST(FrameReaderTest, IncompleteHeaderOrPayloadWaits) {
  FrameReader reader;
  EXPECT_EQ(reader.next(), std::nullopt);
  std::string frame = frame_of("hello");
  reader.append(frame.data(), 3);
  EXPECT_EQ(reader.next(), std::nullopt);
  reader.append(frame.data() + 3, frame.size() - 4);
  EXPECT_EQ(reader.next(), std::nullopt);
  reader.append(frame.data() + frame.size() - 1, 1);
  EXPECT_EQ(reader.next(), std::optional<std::string>("hello"));
  EXPECT_EQ(reader.error(), "");
}

}  // namespace
}  // namespace tidegate::protocol
