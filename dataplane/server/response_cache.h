#pragma once
// The response cache (docs/annotations.md, "Response cache"): an RFC 9111 shared cache of the
// routes that enable it, bounded in memory, one shard per worker (the hit path takes no lock),
// least recently used entries evicted first. The rules of what may be stored and served are
// the pure functions below; the exchange (server/exchange_cache.cc) applies them.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/beast/http/verb.hpp>

#include "server/headers.h"

namespace tidegate::dataplane::server {

// Request fields as (lower-case name, value), in order: what a stored response's Vary is
// compared against.
using FieldList = std::vector<std::pair<std::string, std::string>>;

// Cache-Control directives a cache acts on (RFC 9111 section 5.2), of a request or a response.
struct CacheControl {
  bool no_store = false;
  bool no_cache = false;
  bool is_private = false;
  bool is_public = false;
  std::optional<int64_t> max_age;   // seconds
  std::optional<int64_t> s_maxage;  // seconds (responses)
};
// Reads every Cache-Control value of `fields` (several fields are one list); unknown directives
// are ignored, a malformed delta-seconds makes its directive absent (max-age) or, for the
// request's max-age, 0.
CacheControl parse_cache_control(const Fields& fields);

// Whether a request may be answered from the cache, and its answer stored.
enum class RequestCacheability {
  kUse,     // look up; store the answer
  kBypass,  // go to the backend, store nothing (X-Cache: BYPASS)
};
RequestCacheability request_cacheability(boost::beast::http::verb method, const Fields& request,
                                         bool has_body);

// The freshness lifetime of a response that may be stored, in seconds (> 0), or nullopt with
// the reason in *why: a status not cacheable, no-store, private, no-cache, Set-Cookie, Vary: *,
// Content-Range, or no explicit freshness (s-maxage, then max-age, then Expires - Date; no
// heuristic freshness: a response that says nothing is not stored).
// `authenticated`: the proxy authenticated the request (auth-url, client certificates): as for
// a request with Authorization (RFC 9111 section 3.5), only an answer marked public or with
// s-maxage may be shared.
std::optional<int64_t> storable_lifetime(unsigned status, const Fields& response, int64_t now_unix,
                                         bool authenticated, const char** why);
// Vary names a field the proxy sets or replaces on the way up (X-Forwarded-*, X-Real-IP,
// X-Request-ID, ssl-client-*, X-Sendfile-Type): the values seen by the cache are not the
// backend's, so such an answer is not stored.
bool varies_on_proxy_fields(const Fields& response);

// The age a response already has when it arrives (RFC 9111 section 4.2.3, without the request
// delay): its Age field, or how far its Date lies behind `now_unix` when that is more.
int64_t initial_age(const Fields& response, int64_t now_unix);

// One stored response.
struct CachedResponse {
  unsigned status = 200;
  FieldList fields;  // the head as stored (no hop-by-hop fields, no Age)
  std::string body;
  // Vary: the request's values of these fields (lower-case names) when it was stored.
  FieldList vary;
  std::chrono::steady_clock::time_point stored;
  int64_t lifetime = 0;     // seconds of freshness from when it was generated
  int64_t initial_age = 0;  // the Age (and Date lag) it already had when stored
  std::string etag;
  std::string last_modified;

  // Seconds since the origin generated it (RFC 9111 section 4.2.3).
  int64_t age(std::chrono::steady_clock::time_point now) const;
  bool fresh(std::chrono::steady_clock::time_point now) const { return age(now) < lifetime; }
  // What it costs against the shard's capacity.
  size_t cost() const;
};

// The request's values of the Vary field names, as stored with a response ("" for absent;
// several fields of a name joined by ", ").
FieldList vary_values(const Fields& response, const FieldList& request);
bool vary_matches(const CachedResponse& entry, const Fields& request);
// The fields of `request` as a FieldList (lower-case names), kept before the request is edited.
FieldList copy_fields(const Fields& request);

class ResponseCache {
 public:
  ResponseCache(size_t capacity_bytes, size_t max_item_bytes)
      : capacity_(capacity_bytes), max_item_(max_item_bytes) {}
  // The largest body that can be stored: the item limit, within the shard's capacity.
  size_t max_item_bytes() const {
    return std::min(max_item_, capacity_ > kEntryOverhead ? capacity_ - kEntryOverhead : 0);
  }
  static constexpr size_t kEntryOverhead = 4096;

  // A fresh entry under `key` whose Vary values match `request`; a stale one is dropped.
  std::shared_ptr<const CachedResponse> find(const std::string& key, const Fields& request,
                                             std::chrono::steady_clock::time_point now);
  // Stores (replacing the entry under `key`), evicting the least recently used entries until
  // it fits. An entry larger than the item limit or the capacity is not stored.
  void insert(const std::string& key, std::shared_ptr<const CachedResponse> entry);
  // Drops the entry under `key` (an unsafe request changed the resource: RFC 9111 4.4).
  void erase(const std::string& key);

  // Request collapsing: the first miss of a key fills it (true); later misses wait (false) and
  // are woken by end_fill(), whatever its outcome, to look again.
  bool begin_fill(const std::string& key);
  // False when too many wait already (kMaxWaiters): the caller goes on alone.
  bool wait(const std::string& key, std::function<void()> wake);
  static constexpr size_t kMaxWaiters = 256;
  void end_fill(const std::string& key);

  size_t bytes() const { return bytes_; }
  size_t entries() const { return map_.size(); }

 private:
  struct Slot {
    std::shared_ptr<const CachedResponse> entry;
    std::list<std::string>::iterator lru;  // position in lru_ (front: most recent)
  };
  void erase(std::unordered_map<std::string, Slot>::iterator it);

  size_t capacity_;
  size_t max_item_;
  size_t bytes_ = 0;
  std::unordered_map<std::string, Slot> map_;
  std::list<std::string> lru_;
  std::unordered_map<std::string, std::vector<std::function<void()>>> filling_;
};

}  // namespace tidegate::dataplane::server
