#include "server/external_auth.h"

#include <algorithm>

#include "text/text.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

namespace {

// The value of `name` in a "k=v; k2=v2" Cookie header or a "k=v&k2=v2" query; "" when absent.
std::string_view find_pair(std::string_view list, char separator, std::string_view name) {
  while (!list.empty()) {
    size_t end = list.find(separator);
    std::string_view item = text::trim_ows(list.substr(0, end));
    list = end == std::string_view::npos ? std::string_view{} : list.substr(end + 1);
    size_t eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == name) return item.substr(eq + 1);
    if (eq == std::string_view::npos && item == name) return {};
  }
  return {};
}

}  // namespace

std::string expand_template(const std::vector<model::TemplatePart>& parts,
                            const TemplateRequest& req) {
  using V = model::TemplateVariable;
  std::string out;
  const size_t question = req.target.find('?');
  const std::string_view path = req.target.substr(0, question);
  const std::string_view query =
      question == std::string_view::npos ? std::string_view{} : req.target.substr(question + 1);
  for (const auto& part : parts) {
    switch (part.variable) {
      case V::kLiteral:
        out += part.text;
        break;
      case V::kScheme:
        out += req.https ? "https" : "http";
        break;
      case V::kHost:
        out += text::ascii_lower(std::string(host_without_port(req.host_header)));
        break;
      case V::kHttpHost:
        out += req.host_header;
        break;
      case V::kRequestUri:
        out += req.target;
        break;
      case V::kEscapedRequestUri:
        out += text::percent_encode(req.target);
        break;
      case V::kUri:
        out += path;
        break;
      case V::kArgs:
        out += query;
        break;
      case V::kRequestMethod:
        out += req.method;
        break;
      case V::kRemoteAddr:
        out += req.remote_addr;
        break;
      case V::kHeader:
        if (req.fields != nullptr) {
          if (auto it = req.fields->find(part.text); it != req.fields->end()) out += it->value();
        }
        break;
      case V::kCookie:
        if (req.fields != nullptr) {
          for (auto it = req.fields->find(http::field::cookie);
               it != req.fields->end() && it->name() == http::field::cookie; ++it) {
            auto v = find_pair(it->value(), ';', part.text);
            if (!v.empty()) {
              out += v;
              break;
            }
          }
        }
        break;
      case V::kArg:
        out += find_pair(query, '&', part.text);
        break;
    }
  }
  return out;
}

const AuthAnswer* AuthCache::find(size_t worker, const std::string& key,
                                  std::chrono::steady_clock::time_point now) {
  if (worker >= shards_.size()) return nullptr;
  auto& map = shards_[worker].map;
  auto it = map.find(key);
  if (it == map.end()) return nullptr;
  if (it->second.expires <= now) {
    map.erase(it);
    return nullptr;
  }
  return &it->second.answer;
}

void AuthCache::store(size_t worker, std::string key, AuthAnswer answer,
                      std::chrono::steady_clock::time_point expires) {
  if (worker >= shards_.size()) return;
  auto& map = shards_[worker].map;
  if (map.size() >= kMaxEntriesPerWorker && !map.contains(key)) {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(map, [now](const auto& kv) { return kv.second.expires <= now; });
    if (map.size() >= kMaxEntriesPerWorker) map.clear();
  }
  map.insert_or_assign(std::move(key), Entry{std::move(answer), expires});
}

CompiledExternalAuth::CompiledExternalAuth(const model::ExternalAuth& auth, size_t workers)
    : rules(auth.cache_rules) {
  std::string error;
  auto url = model::parse_auth_url(auth.url, &error);
  if (!url) return;
  https = url->https;
  authority = url->authority();
  bool ok = !model::parse_template(url->target, &target).has_value() &&
            !model::parse_template(auth.signin, &signin).has_value() &&
            !model::parse_template(auth.request_redirect, &request_redirect).has_value() &&
            !model::parse_template(auth.cache_key, &cache_key).has_value();
  usable = ok;
  if (ok && !auth.cache_key.empty()) cache.emplace(workers);
}

std::optional<std::chrono::seconds> CompiledExternalAuth::cache_time(unsigned status) const {
  for (const auto& r : rules) {
    if (r.statuses.empty() ||
        std::find(r.statuses.begin(), r.statuses.end(), status) != r.statuses.end()) {
      if (r.seconds == 0) return std::nullopt;
      return std::chrono::seconds(r.seconds);
    }
  }
  return std::nullopt;
}

}  // namespace tidegate::dataplane::server
