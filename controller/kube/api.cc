#include "kube/api.h"

#include <algorithm>
#include <charconv>
#include <exception>

#include "kube/json_reader.h"
#include "kube/proto_reader.h"

namespace tidegate::controller::kube {

using objects::Kind;

Resource resource_of(Kind kind) {
  switch (kind) {
    case Kind::kIngress:
      return {"/apis/networking.k8s.io/v1", "ingresses", true};
    case Kind::kIngressClass:
      return {"/apis/networking.k8s.io/v1", "ingressclasses", false};
    case Kind::kService:
      return {"/api/v1", "services", true};
    case Kind::kEndpointSlice:
      return {"/apis/discovery.k8s.io/v1", "endpointslices", true};
    case Kind::kSecret:
      return {"/api/v1", "secrets", true};
    case Kind::kSubstitutionRuleSet:  // crds/substitutionruleset.yaml
      return {"/apis/tidegate.io/v1alpha1", "substitutionrulesets", true};
    case Kind::kGatewayClass:
      return {"/apis/gateway.networking.k8s.io/v1", "gatewayclasses", false};
    case Kind::kGateway:
      return {"/apis/gateway.networking.k8s.io/v1", "gateways", true};
    case Kind::kHTTPRoute:
      return {"/apis/gateway.networking.k8s.io/v1", "httproutes", true};
    case Kind::kGRPCRoute:
      return {"/apis/gateway.networking.k8s.io/v1", "grpcroutes", true};
    case Kind::kReferenceGrant:
      return {"/apis/gateway.networking.k8s.io/v1beta1", "referencegrants", true};
    case Kind::kNamespace:
      return {"/api/v1", "namespaces", false};
    case Kind::kBackendTLSPolicy:
      return {"/apis/gateway.networking.k8s.io/v1", "backendtlspolicies", true};
    case Kind::kConfigMap:
      return {"/api/v1", "configmaps", true};
  }
  return {"/api/v1", "unknown", true};
}

std::string group_resource(Kind kind) {
  const Resource r = resource_of(kind);
  std::string out(r.plural);
  std::string_view gv = r.group_version_path;
  if (gv.starts_with("/apis/")) {
    gv.remove_prefix(6);
    out.append(".").append(gv.substr(0, gv.find('/')));
  }
  return out;
}

std::string resource_path(Kind kind, std::string_view namespace_, std::string_view name) {
  const Resource r = resource_of(kind);
  std::string path(r.group_version_path);
  if (r.namespaced && !namespace_.empty()) path.append("/namespaces/").append(namespace_);
  path.append("/").append(r.plural);
  if (!name.empty()) path.append("/").append(name);
  return path;
}

std::string query_escape(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string list_url(Kind kind, std::string_view namespace_, int limit,
                     std::string_view continue_token) {
  std::string url = resource_path(kind, namespace_) + "?limit=" + std::to_string(limit);
  if (!continue_token.empty()) url += "&continue=" + query_escape(continue_token);
  return url;
}

std::string watch_url(Kind kind, std::string_view namespace_, std::string_view resource_version,
                      int timeout_seconds) {
  return resource_path(kind, namespace_) +
         "?watch=1&allowWatchBookmarks=true&resourceVersion=" + query_escape(resource_version) +
         "&timeoutSeconds=" + std::to_string(timeout_seconds);
}

namespace {

std::string scalar(const objects::Node& node) { return node.Scalar(); }

// An API answer's JSON as the object parsers' tree; nullopt and *error when it is not JSON.
std::optional<objects::Node> read_api_json(std::string_view text, std::string* error) {
  std::string json_error;
  std::optional<objects::Node> read = read_json(text, &json_error);
  if (!read) *error = "invalid JSON: " + json_error;
  return read;
}

}  // namespace

std::optional<Status> status_of(const objects::Node& node) {
  if (!node.IsMap() || scalar(node["kind"]) != "Status") return std::nullopt;
  Status s;
  const std::string code = scalar(node["code"]);
  int value = 0;
  const auto [end, ec] = std::from_chars(code.data(), code.data() + code.size(), value);
  s.code = ec == std::errc() && end == code.data() + code.size() ? value : 0;
  s.reason = scalar(node["reason"]);
  s.message = scalar(node["message"]);
  return s;
}

Status status_from_body(int http_status, std::string_view body) {
  if (auto s = parse_protobuf_status(body)) {
    if (s->code == 0) s->code = http_status;
    return *s;
  }
  std::string not_json;
  if (std::optional<objects::Node> read = read_json(body, &not_json)) {
    if (auto s = status_of(*read)) {
      if (s->code == 0) s->code = http_status;
      return *s;
    }
  }
  Status s;
  s.code = http_status;
  s.message = body.substr(0, kProtobufMagic.size()) == kProtobufMagic
                  ? std::string("(an answer in protobuf that is not a Status)")
                  : std::string(body.substr(0, 200));
  return s;
}

std::optional<ListPage> parse_list(std::string_view body, std::string* error) {
  try {
    std::optional<objects::Node> read = read_api_json(body, error);
    if (!read) return std::nullopt;
    const objects::Node& root = *read;
    if (!root.IsMap() || !root["items"].IsDefined() ||
        !(root["items"].IsSequence() || root["items"].IsNull())) {
      *error = "not a list";
      return std::nullopt;
    }
    ListPage page;
    page.resource_version = scalar(root["metadata"]["resourceVersion"]);
    page.continue_token = scalar(root["metadata"]["continue"]);
    if (const objects::Node remaining = root["metadata"]["remainingItemCount"];
        remaining.IsScalar()) {
      uint64_t n = 0;
      const std::string_view text = remaining.ScalarView();
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec == std::errc() && end == text.data() + text.size()) {
        page.remaining_items = n;
      }
    }
    if (root["items"].IsSequence()) {
      page.items.reserve(root["items"].size());
      for (const auto& item : root["items"]) page.items.push_back(item);
    }
    if (page.resource_version.empty()) {
      *error = "list without metadata.resourceVersion";
      return std::nullopt;
    }
    return page;
  } catch (const std::exception& e) {
    *error = std::string("invalid JSON: ") + e.what();
    return std::nullopt;
  }
}

std::optional<WatchEvent> parse_watch_event(std::string_view line, std::string* error) {
  try {
    std::optional<objects::Node> read = read_api_json(line, error);
    if (!read) return std::nullopt;
    const objects::Node& root = *read;
    if (!root.IsMap()) {
      *error = "watch event is not an object";
      return std::nullopt;
    }
    const std::string type = scalar(root["type"]);
    WatchEvent ev;
    if (type == "ADDED") {
      ev.type = EventType::kAdded;
    } else if (type == "MODIFIED") {
      ev.type = EventType::kModified;
    } else if (type == "DELETED") {
      ev.type = EventType::kDeleted;
    } else if (type == "BOOKMARK") {
      ev.type = EventType::kBookmark;
    } else if (type == "ERROR") {
      ev.type = EventType::kError;
    } else {
      *error = "unknown watch event type \"" + type + "\"";
      return std::nullopt;
    }
    ev.object = root["object"];
    if (!ev.object.IsMap()) {
      *error = "watch event without an object";
      return std::nullopt;
    }
    if (ev.type == EventType::kError) {
      auto s = status_of(ev.object);
      ev.status = s ? *s : Status{500, "", "ERROR event without a Status"};
    } else {
      ev.resource_version = scalar(ev.object["metadata"]["resourceVersion"]);
    }
    return ev;
  } catch (const std::exception& e) {
    *error = std::string("invalid JSON: ") + e.what();
    return std::nullopt;
  }
}

Backoff::Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, uint32_t seed)
    : min_(min), max_(std::max(min, max)), current_(min), rng_(seed) {}

std::chrono::milliseconds Backoff::next() {
  std::uniform_int_distribution<long> jitter(current_.count() / 2, current_.count());
  std::chrono::milliseconds delay(jitter(rng_));
  current_ = std::min(current_ * 2, max_);
  return delay;
}

}  // namespace tidegate::controller::kube
