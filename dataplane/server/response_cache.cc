#include "server/response_cache.h"

#include <algorithm>
#include <array>

#include "server/http_date.h"
#include "text/text.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

namespace {

std::string lower_name(std::string_view s) { return text::ascii_lower(std::string(s)); }

// delta-seconds: digits; a value past 2^31 is 2^31 (RFC 9111 section 1.2.2).
std::optional<int64_t> delta_seconds(std::string_view v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  if (v.empty()) return std::nullopt;
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = std::min<int64_t>(n * 10 + (c - '0'), int64_t{1} << 31);
  }
  return n;
}

// Fields of one name are contiguous in Beast's list (an insert goes after the last of its name).
// Calls f(item) for each comma-separated item of every `name` field, trimmed, empty ones
// skipped (quoted commas are not split: Cache-Control's quoted values hold field names only).
template <class F>
void for_each_item(const Fields& fields, std::string_view name, F&& f) {
  for (auto it = fields.find(name);
       it != fields.end() && boost::beast::iequals(it->name_string(), name); ++it) {
    std::string_view v = it->value();
    bool quoted = false;
    size_t start = 0;
    for (size_t i = 0; i <= v.size(); ++i) {
      if (i < v.size() && v[i] == '"') quoted = !quoted;
      if (i == v.size() || (v[i] == ',' && !quoted)) {
        if (auto item = text::trim_ows(v.substr(start, i - start)); !item.empty()) f(item);
        start = i + 1;
      }
    }
  }
}

std::string joined_values(const FieldList& fields, std::string_view name_lower) {
  std::string out;
  for (const auto& [name, value] : fields) {
    if (name != name_lower) continue;
    if (!out.empty()) out += ", ";
    out += value;
  }
  return out;
}

std::string joined_values(const Fields& fields, std::string_view name) {
  std::string out;
  for (auto it = fields.find(name);
       it != fields.end() && boost::beast::iequals(it->name_string(), name); ++it) {
    if (!out.empty()) out += ", ";
    out += it->value();
  }
  return out;
}

}  // namespace

CacheControl parse_cache_control(const Fields& fields) {
  CacheControl cc;
  for_each_item(fields, "Cache-Control", [&](std::string_view item) {
    const size_t eq = item.find('=');
    const std::string name = lower_name(text::trim_ows(item.substr(0, eq)));
    const std::string_view value =
        eq == std::string_view::npos ? "" : text::trim_ows(item.substr(eq + 1));
    if (name == "no-store") {
      cc.no_store = true;
    } else if (name == "no-cache") {
      cc.no_cache = true;
    } else if (name == "private") {
      cc.is_private = true;
    } else if (name == "public") {
      cc.is_public = true;
    } else if (name == "max-age") {
      cc.max_age = delta_seconds(value);
    } else if (name == "s-maxage") {
      cc.s_maxage = delta_seconds(value);
    }
  });
  return cc;
}

RequestCacheability request_cacheability(http::verb method, const Fields& request, bool has_body) {
  if (method != http::verb::get && method != http::verb::head) return RequestCacheability::kBypass;
  // A request with credentials gets its own answer (stricter than RFC 9111 section 3.5, which
  // allows public responses: the rule and Thruster's).
  if (request.find(http::field::authorization) != request.end() || has_body ||
      request.find(http::field::range) != request.end()) {
    return RequestCacheability::kBypass;
  }
  const CacheControl cc = parse_cache_control(request);
  bool pragma_no_cache = false;
  if (request.find(http::field::cache_control) == request.end()) {
    for_each_item(request, "Pragma", [&](std::string_view item) {
      pragma_no_cache = pragma_no_cache || boost::beast::iequals(item, "no-cache");
    });
  }
  // no-cache (and max-age=0, what a browser's reload sends): the client wants the origin's
  // answer; no-store: nothing of this exchange may be kept.
  if (cc.no_store || cc.no_cache || pragma_no_cache || (cc.max_age && *cc.max_age == 0)) {
    return RequestCacheability::kBypass;
  }
  return RequestCacheability::kUse;
}

std::optional<int64_t> storable_lifetime(unsigned status, const Fields& response, int64_t now_unix,
                                         bool authenticated, const char** why) {
  // Final statuses RFC 9110 calls heuristically cacheable; others are never stored here.
  static constexpr std::array<unsigned, 13> kCacheable = {200, 203, 204, 300, 301, 302, 307,
                                                          308, 404, 405, 410, 414, 501};
  if (std::find(kCacheable.begin(), kCacheable.end(), status) == kCacheable.end()) {
    *why = "status";
    return std::nullopt;
  }
  const CacheControl cc = parse_cache_control(response);
  if (cc.no_store || cc.is_private || cc.no_cache) {
    *why = "Cache-Control";
    return std::nullopt;
  }
  if (authenticated && !cc.is_public && !cc.s_maxage) {
    *why = "authenticated request";
    return std::nullopt;
  }
  if (response.find(http::field::set_cookie) != response.end()) {
    *why = "Set-Cookie";
    return std::nullopt;
  }
  if (response.find(http::field::content_range) != response.end()) {
    *why = "Content-Range";
    return std::nullopt;
  }
  bool vary_star = false;
  for_each_item(response, "Vary", [&](std::string_view item) { vary_star |= item == "*"; });
  if (vary_star) {
    *why = "Vary: *";
    return std::nullopt;
  }
  std::optional<int64_t> lifetime = cc.s_maxage ? cc.s_maxage : cc.max_age;
  if (!lifetime) {
    if (auto it = response.find(http::field::expires); it != response.end()) {
      // An Expires that does not parse means already expired (RFC 9111 section 5.3).
      const auto expires = parse_http_date(text::trim_ows(it->value()));
      std::optional<int64_t> date;
      if (auto d = response.find(http::field::date); d != response.end()) {
        date = parse_http_date(text::trim_ows(d->value()));
      }
      lifetime = expires ? *expires - date.value_or(now_unix) : 0;
    }
  }
  if (!lifetime) {
    *why = "no explicit freshness";
    return std::nullopt;
  }
  if (*lifetime <= 0) {
    *why = "already stale";
    return std::nullopt;
  }
  return lifetime;
}

bool varies_on_proxy_fields(const Fields& response) {
  bool proxy_field = false;
  for_each_item(response, "Vary", [&](std::string_view item) {
    const std::string name = lower_name(item);
    for (std::string_view prefix : {"x-forwarded-", "ssl-client-", "x-original-"}) {
      proxy_field |= name.compare(0, prefix.size(), prefix) == 0;
    }
    for (std::string_view exact :
         {"x-real-ip", "x-request-id", "x-sendfile-type", "forwarded", "x-accel-mapping"}) {
      proxy_field |= name == exact;
    }
  });
  return proxy_field;
}

int64_t initial_age(const Fields& response, int64_t now_unix) {
  int64_t age = 0;
  if (auto it = response.find(http::field::age); it != response.end()) {
    age = delta_seconds(text::trim_ows(it->value())).value_or(0);
  }
  if (auto d = response.find(http::field::date); d != response.end()) {
    if (auto date = parse_http_date(text::trim_ows(d->value())))
      age = std::max(age, now_unix - *date);
  }
  return age;
}

int64_t CachedResponse::age(std::chrono::steady_clock::time_point now) const {
  return initial_age + std::chrono::duration_cast<std::chrono::seconds>(now - stored).count();
}

size_t CachedResponse::cost() const {
  size_t n = sizeof(CachedResponse) + body.size() + etag.size() + last_modified.size();
  for (const auto& [k, v] : fields) n += k.size() + v.size() + 32;
  for (const auto& [k, v] : vary) n += k.size() + v.size() + 32;
  return n;
}

FieldList vary_values(const Fields& response, const FieldList& request) {
  FieldList out;
  for_each_item(response, "Vary", [&](std::string_view item) {
    std::string name = lower_name(item);
    for (const auto& [n, _] : out) {
      if (n == name) return;
    }
    std::string value = joined_values(request, name);
    out.emplace_back(std::move(name), std::move(value));
  });
  return out;
}

bool vary_matches(const CachedResponse& entry, const Fields& request) {
  return std::all_of(entry.vary.begin(), entry.vary.end(), [&](const auto& nv) {
    // The usual case, one field or none, is compared in place (the hit path joins nothing).
    auto it = request.find(nv.first);
    if (it == request.end()) return nv.second.empty();
    auto next = std::next(it);
    if (next == request.end() || !boost::beast::iequals(next->name_string(), nv.first)) {
      return it->value() == nv.second;
    }
    return joined_values(request, nv.first) == nv.second;
  });
}

FieldList copy_fields(const Fields& request) {
  FieldList out;
  for (const auto& f : request)
    out.emplace_back(lower_name(f.name_string()), std::string(f.value()));
  return out;
}

std::shared_ptr<const CachedResponse> ResponseCache::find(
    const std::string& key, const Fields& request, std::chrono::steady_clock::time_point now) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  if (!it->second.entry->fresh(now)) {
    erase(it);
    return nullptr;
  }
  if (!vary_matches(*it->second.entry, request)) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.entry;
}

void ResponseCache::insert(const std::string& key, std::shared_ptr<const CachedResponse> entry) {
  if (auto it = map_.find(key); it != map_.end()) erase(it);
  const size_t cost = entry->cost() + key.size();
  if (entry->body.size() > max_item_bytes() || cost > capacity_) return;
  while (bytes_ + cost > capacity_ && !lru_.empty()) erase(map_.find(lru_.back()));
  lru_.push_front(key);
  map_.emplace(key, Slot{std::move(entry), lru_.begin()});
  bytes_ += cost;
}

void ResponseCache::erase(const std::string& key) {
  if (auto it = map_.find(key); it != map_.end()) erase(it);
}

void ResponseCache::erase(std::unordered_map<std::string, Slot>::iterator it) {
  bytes_ -= it->second.entry->cost() + it->first.size();
  lru_.erase(it->second.lru);
  map_.erase(it);
}

bool ResponseCache::begin_fill(const std::string& key) { return filling_.try_emplace(key).second; }

bool ResponseCache::wait(const std::string& key, std::function<void()> wake) {
  auto& waiters = filling_[key];
  if (waiters.size() >= kMaxWaiters) return false;
  waiters.push_back(std::move(wake));
  return true;
}

void ResponseCache::end_fill(const std::string& key) {
  auto it = filling_.find(key);
  if (it == filling_.end()) return;
  auto waiters = std::move(it->second);
  filling_.erase(it);
  for (auto& wake : waiters) wake();
}

}  // namespace tidegate::dataplane::server
