#include "protocol/protocol.h"

#include <nlohmann/json.hpp>

#include "model/policy.h"

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
  if (json p = model::to_json(u.policy); !p.empty()) j["policy"] = std::move(p);
  return j;
}

json to_json(const model::Route& r) {
  json j{{"path", r.path},
         {"match", model::to_string(r.match)},
         {"upstream", r.upstream},
         {"ingress", r.ingress}};
  if (!r.substitution.empty()) j["substitution"] = r.substitution;
  if (json p = model::to_json(r.policy); !p.empty()) j["policy"] = std::move(p);
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

// Decoders throw nlohmann exceptions or std::runtime_error on malformed input; decode_json turns
// them into an error string, so nothing escapes to the caller.

// nlohmann converts -1 or 1.5 to uint64_t silently; numbers on the wire must be exact.
uint64_t get_u64(const json& j, const char* key, uint64_t max = UINT64_MAX) {
  const json& v = j.at(key);
  if (!v.is_number_unsigned()) {
    throw std::runtime_error(std::string("\"") + key + "\" must be a non-negative integer");
  }
  uint64_t n = v.get<uint64_t>();
  if (n > max) throw std::runtime_error(std::string("\"") + key + "\" out of range");
  return n;
}
model::Endpoint endpoint_from(const json& j) {
  model::Endpoint e;
  e.address = j.at("address").get<std::string>();
  e.port = static_cast<uint16_t>(get_u64(j, "port", 65535));
  return e;
}

model::Upstream upstream_from(const json& j) {
  model::Upstream u;
  u.name = j.at("name").get<std::string>();
  for (const auto& e : j.at("endpoints")) u.endpoints.push_back(endpoint_from(e));
  if (auto it = j.find("tls"); it != j.end()) {
    u.tls.enabled = true;
    u.tls.server_name = it->value("server_name", "");
    u.tls.ca_pem = it->value("ca_pem", "");
  }
  // Unknown fields are refused (upstream_policy_from_json), so that a peer never half-applies a
  // policy it does not know.
  if (auto it = j.find("policy"); it != j.end()) u.policy = model::upstream_policy_from_json(*it);
  return u;
}

model::Route route_from(const json& j) {
  model::Route r;
  r.path = j.at("path").get<std::string>();
  auto m = model::path_match_from_string(j.at("match").get<std::string>());
  if (!m)
    throw std::runtime_error("unknown path match \"" + j.at("match").get<std::string>() + "\"");
  r.match = *m;
  r.upstream = j.at("upstream").get<std::string>();
  r.ingress = j.value("ingress", "");
  r.substitution = j.value("substitution", "");
  if (auto it = j.find("policy"); it != j.end()) r.policy = model::route_policy_from_json(*it);
  if (auto it = j.find("canary"); it != j.end()) r.canary = model::canary_from_json(*it);
  r.fallback_upstream = j.value("fallback_upstream", std::string());
  if (auto it = j.find("precedence_length"); it != j.end()) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() > UINT32_MAX) {
      throw std::runtime_error("route \"precedence_length\" must be a 32-bit unsigned integer");
    }
    r.precedence_length = it->get<uint32_t>();
  }
  model::conditions_from_json(j, r);
  return r;
}

model::Substitution substitution_from(const json& j) {
  model::Substitution s;
  s.name = j.at("name").get<std::string>();
  for (const auto& r : j.at("rules")) {
    s.rules.push_back(substitution::Rule{r.at("match").get<std::string>(),
                                         r.at("replace").get<std::string>(), r.value("flags", "")});
  }
  s.mime_types = j.at("mime_types").get<std::vector<std::string>>();
  s.max_buffer = get_u64(j, "max_buffer");
  return s;
}

model::VirtualHost vhost_from(const json& j) {
  model::VirtualHost v;
  v.host = j.at("host").get<std::string>();
  for (const auto& r : j.at("routes")) v.routes.push_back(route_from(r));
  v.ssl_redirect = j.value("ssl_redirect", false);
  v.redirect_to = j.value("redirect_to", std::string());
  v.listener = j.value("listener", std::string());
  v.falls_through = j.value("falls_through", false);
  return v;
}

model::TlsHost tls_host_from(const json& j) {
  model::TlsHost t{j.at("host").get<std::string>(), j.at("certificate").get<std::string>()};
  if (auto it = j.find("client_auth"); it != j.end()) {
    t.client_auth = model::client_auth_from_json(*it);
  }
  t.passthrough_upstream = j.value("passthrough_upstream", std::string());
  t.listener = j.value("listener", std::string());
  return t;
}

model::Listener listener_from(const json& j) {
  model::Listener l;
  l.name = j.at("name").get<std::string>();
  uint64_t port = get_u64(j, "port");
  if (port == 0 || port > 65535) throw std::runtime_error("listener " + l.name + ": bad port");
  l.port = static_cast<uint16_t>(port);
  l.tls = j.at("tls").get<bool>();
  return l;
}

model::Certificate certificate_from(const json& j) {
  model::Certificate c;
  c.name = j.at("name").get<std::string>();
  c.cert_pem = j.at("cert_pem").get<std::string>();
  c.key_pem = j.at("key_pem").get<std::string>();
  return c;
}

model::Config config_from(const json& j) {
  model::Config c;
  for (const auto& v : j.at("virtual_hosts")) {
    auto vh = vhost_from(v);
    std::string key = model::host_key(vh);
    if (!c.virtual_hosts.emplace(key, std::move(vh)).second) {
      throw std::runtime_error("duplicate virtual host \"" + key + "\"");
    }
  }
  for (const auto& u : j.at("upstreams")) {
    auto up = upstream_from(u);
    std::string key = up.name;
    if (!c.upstreams.emplace(key, std::move(up)).second) {
      throw std::runtime_error("duplicate upstream \"" + key + "\"");
    }
  }
  if (j.contains("default_route") && !j["default_route"].is_null()) {
    c.default_route = route_from(j["default_route"]);
  }
  if (j.contains("certificates")) {
    for (const auto& item : j["certificates"]) {
      auto cert = certificate_from(item);
      std::string key = cert.name;
      if (!c.certificates.emplace(key, std::move(cert)).second) {
        throw std::runtime_error("duplicate certificate \"" + key + "\"");
      }
    }
  }
  if (j.contains("tls_hosts")) {
    for (const auto& item : j["tls_hosts"]) {
      auto th = tls_host_from(item);
      std::string key = model::host_key(th);
      if (!c.tls_hosts.emplace(key, std::move(th)).second) {
        throw std::runtime_error("duplicate TLS host \"" + key + "\"");
      }
    }
  }
  if (j.contains("substitutions")) {
    for (const auto& item : j["substitutions"]) {
      auto sub = substitution_from(item);
      std::string key = sub.name;
      if (!c.substitutions.emplace(key, std::move(sub)).second) {
        throw std::runtime_error("duplicate substitution \"" + key + "\"");
      }
    }
  }
  if (j.contains("listeners")) {
    for (const auto& item : j["listeners"]) {
      auto l = listener_from(item);
      std::string key = l.name;
      if (!c.listeners.emplace(key, std::move(l)).second) {
        throw std::runtime_error("duplicate listener \"" + key + "\"");
      }
    }
  }
  return c;
}

model::Delta delta_from(const json& j) {
  model::Delta d;
  for (const auto& v : j.at("upsert_virtual_hosts"))
    d.upsert_virtual_hosts.push_back(vhost_from(v));
  d.remove_virtual_hosts = j.at("remove_virtual_hosts").get<std::vector<std::string>>();
  for (const auto& u : j.at("upsert_upstreams")) d.upsert_upstreams.push_back(upstream_from(u));
  d.remove_upstreams = j.at("remove_upstreams").get<std::vector<std::string>>();
  if (j.contains("upsert_certificates")) {
    for (const auto& c : j["upsert_certificates"])
      d.upsert_certificates.push_back(certificate_from(c));
  }
  if (j.contains("remove_certificates")) {
    d.remove_certificates = j["remove_certificates"].get<std::vector<std::string>>();
  }
  if (j.contains("upsert_tls_hosts")) {
    for (const auto& t : j["upsert_tls_hosts"]) d.upsert_tls_hosts.push_back(tls_host_from(t));
  }
  if (j.contains("remove_tls_hosts")) {
    d.remove_tls_hosts = j["remove_tls_hosts"].get<std::vector<std::string>>();
  }
  if (j.contains("upsert_substitutions")) {
    for (const auto& s : j["upsert_substitutions"])
      d.upsert_substitutions.push_back(substitution_from(s));
  }
  if (j.contains("remove_substitutions")) {
    d.remove_substitutions = j["remove_substitutions"].get<std::vector<std::string>>();
  }
  if (j.contains("upsert_listeners")) {
    for (const auto& l : j["upsert_listeners"]) d.upsert_listeners.push_back(listener_from(l));
  }
  if (j.contains("remove_listeners")) {
    d.remove_listeners = j["remove_listeners"].get<std::vector<std::string>>();
  }
  if (j.value("default_route_changed", false)) {
    d.default_route_changed = true;
    if (!j.at("default_route").is_null()) d.default_route = route_from(j["default_route"]);
  }
  return d;
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

std::string encode_snapshot_frame(uint64_t version, const model::Config& c) {
  // What dump(Encoder{}(Snapshot{version, c})) writes, in the same order: nlohmann's objects
  // keep their keys sorted, so "config" (its sections in config_sections' order) comes before
  // "type" and "version" (protocol_test.cc compares the two encodings).
  std::string frame(4, '\0');
  frame += R"({"config":{)";
  bool first_key = true;
  auto key = [&](std::string_view k) {
    if (!first_key) frame += ',';
    first_key = false;
    frame += '"';
    frame += k;
    frame += "\":";
  };
  auto array = [&](std::string_view k, const auto& map) {
    key(k);
    frame += '[';
    bool first = true;
    for (const auto& [_, item] : map) {
      if (!first) frame += ',';
      first = false;
      frame += dump(to_json(item));
    }
    frame += ']';
  };
  auto object = [&](std::string_view k, const auto& value) {
    key(k);
    frame += dump(to_json(value));
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
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    r.error = "malformed JSON";
    return r;
  }
  try {
    if (!j.is_object()) throw std::runtime_error("message is not an object");
    const std::string type = j.at("type").get<std::string>();
    if (type == "hello") {
      r.message = Hello{static_cast<int>(get_u64(j, "protocol", 1 << 30)), j.value("node", "")};
    } else if (type == "hello_reply") {
      r.message =
          HelloReply{static_cast<int>(get_u64(j, "protocol", 1 << 30)), get_u64(j, "version")};
    } else if (type == "snapshot") {
      r.message = Snapshot{get_u64(j, "version"), config_from(j.at("config"))};
    } else if (type == "delta") {
      r.message = DeltaMsg{get_u64(j, "version"), get_u64(j, "base"), delta_from(j.at("delta"))};
    } else if (type == "ack") {
      r.message = Ack{get_u64(j, "version")};
    } else if (type == "nack") {
      r.message = Nack{get_u64(j, "version"), j.value("reason", "")};
    } else {
      r.error = "unknown message type \"" + type + "\"";
    }
  } catch (const std::exception& e) {
    r.message.reset();
    r.error = std::string("bad message: ") + e.what();
  }
  return r;
}

std::optional<std::string> FrameReader::next() {
  if (!error_.empty()) return std::nullopt;
  size_t avail = buffer_.size() - consumed_;
  if (avail < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + consumed_);
  uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  if (n > kMaxFrameBytes) {
    error_ = "frame of " + std::to_string(n) + " bytes exceeds the limit of " +
             std::to_string(kMaxFrameBytes);
    return std::nullopt;
  }
  if (avail - 4 < n) return std::nullopt;
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
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    if (error) *error = "malformed JSON";
    return std::nullopt;
  }
  try {
    return config_from(j);
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return std::nullopt;
  }
}

}  // namespace tidegate::protocol
