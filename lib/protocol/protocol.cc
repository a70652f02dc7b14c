#include "protocol/protocol.h"

#include <simdjson.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

#include "model/policy.h"
#include "side_thread.h"

namespace tidegate::protocol {

using nlohmann::json;

namespace {

json to_json(const model::Endpoint& e) { return json{{"address", e.address}, {"port", e.port}}; }

json to_json(const model::Upstream& u) {
  json eps = json::array();
  for (const auto& e : u.endpoints) eps.push_back(to_json(e));
  json j{{"name", u.name}, {"endpoints", std::move(eps)}};
  // Absent for plain HTTP, so that older peers' messages stay valid.
  if (u.tls.enabled) j["tls"] = json{{"server_name", u.tls.server_name}, {"ca_pem", u.tls.ca_pem}};
  // Absent when default ({}), so that snapshots without annotations do not grow.
  if (json p = model::to_json(*u.policy); !p.empty()) j["policy"] = std::move(p);
  return j;
}

json to_json(const model::Route& r) {
  json j{{"path", r.path},
         {"match", model::to_string(r.match)},
         {"upstream", r.upstream},
         {"ingress", r.ingress}};
  if (!r.substitution.empty()) j["substitution"] = r.substitution;
  if (json p = model::to_json(*r.policy); !p.empty()) j["policy"] = std::move(p);
  if (r.canary) j["canary"] = model::to_json(*r.canary);
  if (!r.fallback_upstream.empty()) j["fallback_upstream"] = r.fallback_upstream;
  if (r.precedence_length != 0) j["precedence_length"] = r.precedence_length;
  model::conditions_to_json(r, j);
  return j;
}

json to_json(const model::Substitution& s) {
  json rules = json::array();
  for (const auto& r : s.rules) {
    json rule{{"match", r.match}, {"replace", r.replace}};
    if (!r.flags.empty()) rule["flags"] = r.flags;
    rules.push_back(std::move(rule));
  }
  return json{{"name", s.name},
              {"rules", std::move(rules)},
              {"mime_types", s.mime_types},
              {"max_buffer", s.max_buffer}};
}

json to_json(const model::VirtualHost& v) {
  json routes = json::array();
  for (const auto& r : v.routes) routes.push_back(to_json(r));
  json j{{"host", v.host}, {"routes", std::move(routes)}};
  if (v.ssl_redirect) j["ssl_redirect"] = true;
  if (!v.redirect_to.empty()) j["redirect_to"] = v.redirect_to;
  if (!v.listener.empty()) j["listener"] = v.listener;
  if (v.falls_through) j["falls_through"] = true;
  return j;
}

json to_json(const model::Certificate& c) {
  return json{{"name", c.name}, {"cert_pem", c.cert_pem}, {"key_pem", c.key_pem}};
}

json to_json(const model::TlsHost& t) {
  json j{{"host", t.host}, {"certificate", t.certificate}};
  if (t.client_auth) j["client_auth"] = to_json(*t.client_auth);
  if (!t.passthrough_upstream.empty()) j["passthrough_upstream"] = t.passthrough_upstream;
  if (!t.listener.empty()) j["listener"] = t.listener;
  return j;
}

json to_json(const model::Listener& l) {
  return json{{"name", l.name}, {"port", l.port}, {"tls", l.tls}};
}

// From this many upstreams (virtual hosts) on, a configuration's upstreams are read (its virtual
// hosts written) on a second thread beside the rest.
constexpr size_t kItemsForAThread = 1000;

// The Config's sections as the wire names them, in the order nlohmann writes an object's keys
// (sorted): `array(name, map)` for each list (the map's values, in its order), `object(name,
// value)` for the default route; empty lists and an absent default route are left out, but for
// upstreams and virtual_hosts, always written. to_json(Config) and encode_snapshot_frame() both
// walk it, so the two encodings cannot drift apart.
template <typename Array, typename Object>
void config_sections(const model::Config& c, Array&& array, Object&& object) {
  if (!c.certificates.empty()) array("certificates", c.certificates);
  if (c.default_route) object("default_route", *c.default_route);
  if (!c.listeners.empty()) array("listeners", c.listeners);
  if (!c.substitutions.empty()) array("substitutions", c.substitutions);
  if (!c.tls_hosts.empty()) array("tls_hosts", c.tls_hosts);
  array("upstreams", c.upstreams);
  array("virtual_hosts", c.virtual_hosts);
}

json to_json(const model::Config& c) {
  json j = json::object();
  config_sections(
      c,
      [&](const char* name, const auto& map) {
        json items = json::array();
        for (const auto& [_, item] : map) items.push_back(to_json(item));
        j[name] = std::move(items);
      },
      [&](const char* name, const auto& value) { j[name] = to_json(value); });
  return j;
}

json to_json(const model::Delta& d) {
  json j = json::object();
  json hosts = json::array();
  for (const auto& v : d.upsert_virtual_hosts) hosts.push_back(to_json(v));
  json ups = json::array();
  for (const auto& u : d.upsert_upstreams) ups.push_back(to_json(u));
  j["upsert_virtual_hosts"] = std::move(hosts);
  j["remove_virtual_hosts"] = d.remove_virtual_hosts;
  j["upsert_upstreams"] = std::move(ups);
  j["remove_upstreams"] = d.remove_upstreams;
  if (!d.upsert_certificates.empty() || !d.remove_certificates.empty()) {
    json certs = json::array();
    for (const auto& c : d.upsert_certificates) certs.push_back(to_json(c));
    j["upsert_certificates"] = std::move(certs);
    j["remove_certificates"] = d.remove_certificates;
  }
  if (!d.upsert_tls_hosts.empty() || !d.remove_tls_hosts.empty()) {
    json hosts = json::array();
    for (const auto& t : d.upsert_tls_hosts) hosts.push_back(to_json(t));
    j["upsert_tls_hosts"] = std::move(hosts);
    j["remove_tls_hosts"] = d.remove_tls_hosts;
  }
  if (!d.upsert_substitutions.empty() || !d.remove_substitutions.empty()) {
    json subs = json::array();
    for (const auto& sub : d.upsert_substitutions) subs.push_back(to_json(sub));
    j["upsert_substitutions"] = std::move(subs);
    j["remove_substitutions"] = d.remove_substitutions;
  }
  if (!d.upsert_listeners.empty() || !d.remove_listeners.empty()) {
    json listeners = json::array();
    for (const auto& l : d.upsert_listeners) listeners.push_back(to_json(l));
    j["upsert_listeners"] = std::move(listeners);
    j["remove_listeners"] = d.remove_listeners;
  }
  if (d.default_route_changed) {
    j["default_route_changed"] = true;
    j["default_route"] = d.default_route ? to_json(*d.default_route) : json(nullptr);
  }
  return j;
}

// ---- Decoding ----
// The text is parsed by simdjson (its DOM: the whole text validated, UTF-8 included, by the
// library's code for this CPU) and read straight into the model; nlohmann's tree of the whole
// message took four fifths of a 10,000-host snapshot's decoding (docs/benchmarks.md). Only the
// sub-objects the model's own readers take (policies, canary, conditions, client auth) are
// converted to nlohmann's JSON, one at a time. Every reader throws std::runtime_error (or a
// nlohmann exception, from the model's readers) on a missing member, a member of the wrong type or
// an out-of-range number; decode_json turns that into an error string, so nothing escapes.

using simdjson::dom::element;
using simdjson::dom::element_type;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

// One JSON object's members. A member written twice counts once, its last value (as nlohmann,
// the decoder before, read it).
class Members {
 public:
  Members(element v, const char* what) {
    if (v.type() != element_type::OBJECT) fail(std::string(what) + " must be an object");
    object_ = simdjson::dom::object(v);
  }
  std::optional<element> find(std::string_view key) const {
    std::optional<element> found;
    for (const auto field : object_) {
      if (field.key == key) found = field.value;
    }
    return found;
  }
  element at(const char* key) const {
    auto v = find(key);
    if (!v) fail(std::string("\"") + key + "\" missing");
    return *v;
  }
  // Absent and null alike.
  std::optional<element> find_non_null(std::string_view key) const {
    auto v = find(key);
    if (v && v->type() == element_type::NULL_VALUE) return std::nullopt;
    return v;
  }
  std::string string(const char* key) const { return string_of(at(key), key); }
  std::string string_or(const char* key, std::string_view fallback) const {
    auto v = find(key);
    return v ? string_of(*v, key) : std::string(fallback);
  }
  bool boolean_or(const char* key, bool fallback) const {
    auto v = find(key);
    return v ? boolean_of(*v, key) : fallback;
  }
  bool boolean(const char* key) const { return boolean_of(at(key), key); }
  // Numbers on the wire must be exact: -1 or 1.5 are refused, not converted.
  uint64_t u64(const char* key, uint64_t max = UINT64_MAX) const {
    uint64_t n = 0;
    if (at(key).get_uint64().get(n) != simdjson::SUCCESS) {
      fail(std::string("\"") + key + "\" must be a non-negative integer");
    }
    if (n > max) fail(std::string("\"") + key + "\" out of range");
    return n;
  }
  simdjson::dom::array array(const char* key) const {
    element v = at(key);
    if (v.type() != element_type::ARRAY) fail(std::string("\"") + key + "\" must be an array");
    return simdjson::dom::array(v);
  }
  std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> out;
    for (element item : array(key)) out.push_back(string_of(item, key));
    return out;
  }

  static std::string string_of(element v, const char* key) {
    if (v.type() != element_type::STRING) fail(std::string("\"") + key + "\" must be a string");
    return std::string(std::string_view(v));
  }
  static bool boolean_of(element v, const char* key) {
    if (v.type() != element_type::BOOL) fail(std::string("\"") + key + "\" must be a boolean");
    return bool(v);
  }

 private:
  simdjson::dom::object object_;
};

// A sub-object for the model's nlohmann readers. Numbers are typed as nlohmann's parser types
// them (non-negative integers unsigned), so that their checks see what they saw before.
json to_nlohmann(element v) {
  switch (v.type()) {
    case element_type::OBJECT: {
      json j = json::object();
      for (const auto field : simdjson::dom::object(v)) {
        j[std::string(field.key)] = to_nlohmann(field.value);
      }
      return j;
    }
    case element_type::ARRAY: {
      json j = json::array();
      for (element item : simdjson::dom::array(v)) j.push_back(to_nlohmann(item));
      return j;
    }
    case element_type::STRING:
      return std::string(std::string_view(v));
    case element_type::INT64: {
      const int64_t n = int64_t(v);
      if (n >= 0) return static_cast<uint64_t>(n);
      return n;
    }
    case element_type::UINT64:
      return uint64_t(v);
    case element_type::DOUBLE:
      return double(v);
    case element_type::BOOL:
      return bool(v);
    case element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

model::Endpoint endpoint_from(element v) {
  const Members m(v, "endpoint");
  model::Endpoint e;
  e.address = m.string("address");
  e.port = static_cast<uint16_t>(m.u64("port", 65535));
  return e;
}

// Policies written alike in one message decode to one shared value (model::Shared): the routes
// of an Ingress, and Ingresses with the same annotations, share one object in the data plane as
// in the controller (docs/benchmarks.md, "Sharing route and upstream policies"). Keyed by the
// policy's JSON text, minified: the same text is the same value. One memo per message and thread.
template <class T>
class PolicyMemo {
 public:
  using FromJson = T (*)(const json&);
  explicit PolicyMemo(FromJson from_json) : from_json_(from_json) {}
  model::Shared<T> get(element v) {
    std::string key = simdjson::minify(v);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    model::Shared<T> value(from_json_(to_nlohmann(v)));
    memo_.emplace(std::move(key), value);
    return value;
  }

 private:
  FromJson from_json_;
  std::unordered_map<std::string, model::Shared<T>> memo_;
};
using RoutePolicies = PolicyMemo<model::RoutePolicy>;
using UpstreamPolicies = PolicyMemo<model::UpstreamPolicy>;

model::Upstream upstream_from(element v, UpstreamPolicies& policies) {
  const Members m(v, "upstream");
  model::Upstream u;
  u.name = m.string("name");
  for (element e : m.array("endpoints")) u.endpoints.push_back(endpoint_from(e));
  if (auto tls = m.find("tls")) {
    const Members t(*tls, "upstream \"tls\"");
    u.tls.enabled = true;
    u.tls.server_name = t.string_or("server_name", "");
    u.tls.ca_pem = t.string_or("ca_pem", "");
  }
  // Unknown fields are refused (upstream_policy_from_json), so that a peer never half-applies a
  // policy it does not know.
  if (auto p = m.find("policy")) u.policy = policies.get(*p);
  return u;
}

model::Route route_from(element v, RoutePolicies& policies) {
  const Members m(v, "route");
  model::Route r;
  r.path = m.string("path");
  const std::string match = m.string("match");
  auto kind = model::path_match_from_string(match);
  if (!kind) fail("unknown path match \"" + match + "\"");
  r.match = *kind;
  r.upstream = m.string("upstream");
  r.ingress = m.string_or("ingress", "");
  r.substitution = m.string_or("substitution", "");
  if (auto p = m.find("policy")) r.policy = policies.get(*p);
  if (auto c = m.find("canary")) r.canary = model::canary_from_json(to_nlohmann(*c));
  r.fallback_upstream = m.string_or("fallback_upstream", "");
  if (m.find("precedence_length")) {
    r.precedence_length = static_cast<uint32_t>(m.u64("precedence_length", UINT32_MAX));
  }
  // The match conditions' members (model/conditions.h reads them from the route's object).
  json conditions = json::object();
  for (const char* key : {"method", "headers", "query", "backends"}) {
    if (auto c = m.find(key)) conditions[key] = to_nlohmann(*c);
  }
  if (!conditions.empty()) model::conditions_from_json(conditions, r);
  return r;
}

model::Substitution substitution_from(element v) {
  const Members m(v, "substitution");
  model::Substitution s;
  s.name = m.string("name");
  for (element rule : m.array("rules")) {
    const Members r(rule, "substitution rule");
    s.rules.push_back(
        substitution::Rule{r.string("match"), r.string("replace"), r.string_or("flags", "")});
  }
  s.mime_types = m.strings("mime_types");
  s.max_buffer = m.u64("max_buffer");
  return s;
}

model::VirtualHost vhost_from(element v, RoutePolicies& policies) {
  const Members m(v, "virtual host");
  model::VirtualHost h;
  h.host = m.string("host");
  for (element r : m.array("routes")) h.routes.push_back(route_from(r, policies));
  h.ssl_redirect = m.boolean_or("ssl_redirect", false);
  h.redirect_to = m.string_or("redirect_to", "");
  h.listener = m.string_or("listener", "");
  h.falls_through = m.boolean_or("falls_through", false);
  return h;
}

model::TlsHost tls_host_from(element v) {
  const Members m(v, "TLS host");
  model::TlsHost t{m.string("host"), m.string("certificate")};
  if (auto c = m.find("client_auth")) t.client_auth = model::client_auth_from_json(to_nlohmann(*c));
  t.passthrough_upstream = m.string_or("passthrough_upstream", "");
  t.listener = m.string_or("listener", "");
  return t;
}

model::Listener listener_from(element v) {
  const Members m(v, "listener");
  model::Listener l;
  l.name = m.string("name");
  const uint64_t port = m.u64("port");
  if (port == 0 || port > 65535) fail("listener " + l.name + ": bad port");
  l.port = static_cast<uint16_t>(port);
  l.tls = m.boolean("tls");
  return l;
}

model::Certificate certificate_from(element v) {
  const Members m(v, "certificate");
  model::Certificate c;
  c.name = m.string("name");
  c.cert_pem = m.string("cert_pem");
  c.key_pem = m.string("key_pem");
  return c;
}

// Each item of the array `key` (if present: `required` says whether it must be) read by `read`
// into `map` under `key_of(item)`; a key twice is refused (`what` names the items).
template <typename Map, typename Read, typename KeyOf>
void read_section(const Members& m, const char* key, bool required, const char* what, Map& map,
                  Read read, KeyOf key_of) {
  if (!required && !m.find(key)) return;
  for (element item : m.array(key)) {
    auto value = read(item);
    std::string k = key_of(value);
    // The encoder writes the map's order: each item goes at the end, without a search.
    const size_t before = map.size();
    map.emplace_hint(map.end(), k, std::move(value));
    if (map.size() == before) fail(std::string("duplicate ") + what + " \"" + k + "\"");
  }
}

model::Config config_from(element v) {
  const Members m(v, "config");
  model::Config c;
  auto name = [](const auto& item) { return item.name; };
  auto host = [](const auto& item) { return model::host_key(item); };
  // The upstreams are read beside the virtual hosts, on a second thread when there are many: the
  // parsed document is only read, the two sections fill two maps, and a full configuration's
  // decoding is on a start's way to serving (docs/benchmarks.md, "Start-up at scale"). An error
  // in the virtual hosts is reported before one in the upstreams, as when read in turn.
  const auto upstreams = m.find("upstreams");
  const bool beside = upstreams && upstreams->type() == element_type::ARRAY &&
                      simdjson::dom::array(*upstreams).size() >= kItemsForAThread;
  // (Declared after what it uses: when the virtual hosts throw, its destructor waits for it.)
  RoutePolicies route_policies(model::route_policy_from_json);
  UpstreamPolicies upstream_policies(model::upstream_policy_from_json);  // the other thread's
  std::future<void> read_upstreams = run_beside(beside, [&] {
    read_section(
        m, "upstreams", true, "upstream", c.upstreams,
        [&](element u) { return upstream_from(u, upstream_policies); }, name);
  });
  read_section(
      m, "virtual_hosts", true, "virtual host", c.virtual_hosts,
      [&](element h) { return vhost_from(h, route_policies); }, host);
  read_upstreams.get();
  if (auto d = m.find_non_null("default_route")) c.default_route = route_from(*d, route_policies);
  read_section(m, "certificates", false, "certificate", c.certificates, certificate_from, name);
  read_section(m, "tls_hosts", false, "TLS host", c.tls_hosts, tls_host_from, host);
  read_section(m, "substitutions", false, "substitution", c.substitutions, substitution_from, name);
  read_section(m, "listeners", false, "listener", c.listeners, listener_from, name);
  return c;
}

// The items of the array `key`, if present, read by `read`.
template <typename T, typename Read>
void read_list(const Members& m, const char* key, std::vector<T>& out, Read read) {
  if (!m.find(key)) return;
  for (element item : m.array(key)) out.push_back(read(item));
}

model::Delta delta_from(element v) {
  const Members m(v, "delta");
  model::Delta d;
  RoutePolicies route_policies(model::route_policy_from_json);
  UpstreamPolicies upstream_policies(model::upstream_policy_from_json);
  for (element h : m.array("upsert_virtual_hosts")) {
    d.upsert_virtual_hosts.push_back(vhost_from(h, route_policies));
  }
  d.remove_virtual_hosts = m.strings("remove_virtual_hosts");
  for (element u : m.array("upsert_upstreams")) {
    d.upsert_upstreams.push_back(upstream_from(u, upstream_policies));
  }
  d.remove_upstreams = m.strings("remove_upstreams");
  read_list(m, "upsert_certificates", d.upsert_certificates, certificate_from);
  if (m.find("remove_certificates")) d.remove_certificates = m.strings("remove_certificates");
  read_list(m, "upsert_tls_hosts", d.upsert_tls_hosts, tls_host_from);
  if (m.find("remove_tls_hosts")) d.remove_tls_hosts = m.strings("remove_tls_hosts");
  read_list(m, "upsert_substitutions", d.upsert_substitutions, substitution_from);
  if (m.find("remove_substitutions")) d.remove_substitutions = m.strings("remove_substitutions");
  read_list(m, "upsert_listeners", d.upsert_listeners, listener_from);
  if (m.find("remove_listeners")) d.remove_listeners = m.strings("remove_listeners");
  if (m.boolean_or("default_route_changed", false)) {
    d.default_route_changed = true;
    m.at("default_route");
    if (auto r = m.find_non_null("default_route")) d.default_route = route_from(*r, route_policies);
  }
  return d;
}

// The root of `text` parsed by `parser` (which owns the tree), or nullopt when it is not one JSON
// document.
std::optional<element> parse_document(simdjson::dom::parser& parser, std::string_view text) {
  element root;
  if (parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(root) !=
      simdjson::SUCCESS) {
    return std::nullopt;
  }
  return root;
}

struct Encoder {
  json operator()(const Hello& m) const {
    return json{{"type", "hello"}, {"protocol", m.protocol}, {"node", m.node}};
  }
  json operator()(const HelloReply& m) const {
    return json{{"type", "hello_reply"}, {"protocol", m.protocol}, {"version", m.version}};
  }
  json operator()(const Snapshot& m) const {
    return json{{"type", "snapshot"}, {"version", m.version}, {"config", to_json(m.config)}};
  }
  json operator()(const DeltaMsg& m) const {
    return json{
        {"type", "delta"}, {"version", m.version}, {"base", m.base}, {"delta", to_json(m.delta)}};
  }
  json operator()(const Ack& m) const { return json{{"type", "ack"}, {"version", m.version}}; }
  json operator()(const Nack& m) const {
    return json{{"type", "nack"}, {"version", m.version}, {"reason", m.reason}};
  }
};

}  // namespace

namespace {
// Kubernetes object text can carry bytes that are not UTF-8; they are replaced rather than
// letting the encoder throw.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
}  // namespace

std::string encode_json(const Message& m) { return dump(std::visit(Encoder{}, m)); }

namespace {
// The frame header: the payload's length, big-endian, in the frame's first four bytes.
void put_length(std::string& frame, uint32_t n) {
  frame[0] = static_cast<char>((n >> 24) & 0xff);
  frame[1] = static_cast<char>((n >> 16) & 0xff);
  frame[2] = static_cast<char>((n >> 8) & 0xff);
  frame[3] = static_cast<char>(n & 0xff);
}
}  // namespace

std::string encode_frame(const Message& m) {
  std::string body = encode_json(m);
  std::string frame;
  frame.reserve(4 + body.size());
  frame.append(4, '\0');
  put_length(frame, static_cast<uint32_t>(body.size()));
  frame += body;
  return frame;
}

namespace {

// ---- The snapshot's hosts and upstreams written as text ----
// What dump(to_json(x)) writes, byte for byte (protocol_test.cc compares them), for the parts of
// a large snapshot that are plain: a document per host and per upstream was most of a 10,000-host
// snapshot's encoding. Members in nlohmann's order (sorted by key); anything with a policy,
// canary or match conditions goes through to_json() as before.

// A JSON string: as is when every byte is printable ASCII other than '"' and '\\' (hosts, paths
// and names), else as nlohmann escapes it.
void put_string(std::string& out, std::string_view s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
  } else {
    out += dump(json(std::string(s)));
  }
}

void put_member(std::string& out, bool& first, std::string_view key) {
  if (!first) out += ',';
  first = false;
  out += '"';
  out += key;
  out += "\":";
}

bool plain_route(const model::Route& r) {
  return r.policy.is_default() && !r.canary && r.method.empty() && r.headers.empty() &&
         r.query.empty() && r.backends.empty();
}

void put_route(std::string& out, const model::Route& r) {
  if (!plain_route(r)) {
    out += dump(to_json(r));
    return;
  }
  bool first = true;
  out += '{';
  if (!r.fallback_upstream.empty()) {
    put_member(out, first, "fallback_upstream");
    put_string(out, r.fallback_upstream);
  }
  put_member(out, first, "ingress");
  put_string(out, r.ingress);
  put_member(out, first, "match");
  put_string(out, model::to_string(r.match));
  put_member(out, first, "path");
  put_string(out, r.path);
  if (r.precedence_length != 0) {
    put_member(out, first, "precedence_length");
    out += std::to_string(r.precedence_length);
  }
  if (!r.substitution.empty()) {
    put_member(out, first, "substitution");
    put_string(out, r.substitution);
  }
  put_member(out, first, "upstream");
  put_string(out, r.upstream);
  out += '}';
}

void put_item(std::string& out, const model::VirtualHost& v) {
  bool first = true;
  out += '{';
  if (v.falls_through) {
    put_member(out, first, "falls_through");
    out += "true";
  }
  put_member(out, first, "host");
  put_string(out, v.host);
  if (!v.listener.empty()) {
    put_member(out, first, "listener");
    put_string(out, v.listener);
  }
  if (!v.redirect_to.empty()) {
    put_member(out, first, "redirect_to");
    put_string(out, v.redirect_to);
  }
  put_member(out, first, "routes");
  out += '[';
  for (size_t i = 0; i < v.routes.size(); ++i) {
    if (i != 0) out += ',';
    put_route(out, v.routes[i]);
  }
  out += ']';
  if (v.ssl_redirect) {
    put_member(out, first, "ssl_redirect");
    out += "true";
  }
  out += '}';
}

void put_item(std::string& out, const model::Upstream& u) {
  if (!u.policy.is_default()) {
    out += dump(to_json(u));
    return;
  }
  out += R"({"endpoints":[)";
  for (size_t i = 0; i < u.endpoints.size(); ++i) {
    if (i != 0) out += ',';
    out += R"({"address":)";
    put_string(out, u.endpoints[i].address);
    out += R"(,"port":)";
    out += std::to_string(u.endpoints[i].port);
    out += '}';
  }
  out += R"(],"name":)";
  put_string(out, u.name);
  if (u.tls.enabled) {
    out += R"(,"tls":{"ca_pem":)";
    put_string(out, u.tls.ca_pem);
    out += R"(,"server_name":)";
    put_string(out, u.tls.server_name);
    out += '}';
  }
  out += '}';
}

template <typename T>
void put_item(std::string& out, const T& item) {
  out += dump(to_json(item));
}

}  // namespace

std::string encode_snapshot_frame(uint64_t version, const model::Config& c) {
  // What dump(Encoder{}(Snapshot{version, c})) writes, in the same order: nlohmann's objects
  // keep their keys sorted, so "config" (its sections in config_sections' order) comes before
  // "type" and "version" (protocol_test.cc compares the two encodings).
  auto write_items = [](std::string& out, const auto& map) {
    out += '[';
    bool first = true;
    for (const auto& [_, item] : map) {
      if (!first) out += ',';
      first = false;
      put_item(out, item);
    }
    out += ']';
  };
  // The virtual hosts are written beside the other sections, on a second thread when there are
  // many (a full configuration's frame is on a start's way to serving), and put in their place.
  std::future<std::string> hosts =
      run_beside(c.virtual_hosts.size() >= kItemsForAThread, [&c, &write_items] {
        std::string out;
        write_items(out, c.virtual_hosts);
        return out;
      });
  std::string frame(4, '\0');
  frame += R"({"config":{)";
  bool first_key = true;
  auto array = [&](std::string_view k, const auto& map) {
    put_member(frame, first_key, k);
    if (static_cast<const void*>(&map) == static_cast<const void*>(&c.virtual_hosts)) {
      frame += hosts.get();
    } else {
      write_items(frame, map);
    }
  };
  auto object = [&](std::string_view k, const auto& value) {
    put_member(frame, first_key, k);
    put_item(frame, value);
  };
  config_sections(c, array, object);
  frame += R"(},"type":"snapshot","version":)";
  frame += std::to_string(version);
  frame += '}';
  put_length(frame, static_cast<uint32_t>(frame.size() - 4));
  return frame;
}

DecodeResult decode_json(std::string_view text) {
  DecodeResult r;
  simdjson::dom::parser parser;
  const std::optional<element> root = parse_document(parser, text);
  if (!root) {
    r.error = "malformed JSON";
    return r;
  }
  try {
    if (root->type() != element_type::OBJECT) fail("message is not an object");
    const Members m(*root, "message");
    const std::string type = m.string("type");
    if (type == "hello") {
      r.message = Hello{static_cast<int>(m.u64("protocol", 1 << 30)), m.string_or("node", "")};
    } else if (type == "hello_reply") {
      r.message = HelloReply{static_cast<int>(m.u64("protocol", 1 << 30)), m.u64("version")};
    } else if (type == "snapshot") {
      r.message = Snapshot{m.u64("version"), config_from(m.at("config"))};
    } else if (type == "delta") {
      r.message = DeltaMsg{m.u64("version"), m.u64("base"), delta_from(m.at("delta"))};
    } else if (type == "ack") {
      r.message = Ack{m.u64("version")};
    } else if (type == "nack") {
      r.message = Nack{m.u64("version"), m.string_or("reason", "")};
    } else {
      r.error = "unknown message type \"" + type + "\"";
    }
  } catch (const std::exception& e) {
    r.message.reset();
    r.error = std::string("bad message: ") + e.what();
  }
  return r;
}

namespace {

uint32_t frame_length(const char* header) {
  const auto* p = reinterpret_cast<const unsigned char*>(header);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

void FrameReader::append(const char* data, size_t n) {
  buffer_.append(data, n);
  if (buffer_.size() - consumed_ >= 4) {
    const size_t frame = 4 + size_t{frame_length(buffer_.data() + consumed_)};
    if (frame <= kMaxReservedFrame) buffer_.reserve(consumed_ + frame);
  }
}

std::optional<std::string> FrameReader::next() {
  if (!error_.empty()) return std::nullopt;
  size_t avail = buffer_.size() - consumed_;
  if (avail < 4) return std::nullopt;
  const uint32_t n = frame_length(buffer_.data() + consumed_);
  if (n > kMaxFrameBytes) {
    error_ = "frame of " + std::to_string(n) + " bytes exceeds the limit of " +
             std::to_string(kMaxFrameBytes);
    return std::nullopt;
  }
  if (avail - 4 < n) return std::nullopt;
  if (consumed_ == 0 && buffer_.size() == 4 + size_t{n}) {
    // The buffer is this one frame (the usual case): its bytes become the payload without a
    // copy, and the reader starts again with no memory held.
    std::string payload = std::move(buffer_);
    buffer_ = std::string();
    payload.erase(0, 4);
    return payload;
  }
  std::string payload = buffer_.substr(consumed_ + 4, n);
  consumed_ += 4 + n;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > 64 * 1024) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return payload;
}

std::string config_to_json(const model::Config& c) { return dump(to_json(c)); }

std::optional<model::Config> config_from_json(std::string_view text, std::string* error) {
  simdjson::dom::parser parser;
  const std::optional<element> root = parse_document(parser, text);
  if (!root) {
    if (error) *error = "malformed JSON";
    return std::nullopt;
  }
  try {
    return config_from(*root);
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return std::nullopt;
  }
}

}  // namespace tidegate::protocol
