// The response cache (docs/annotations.md, "Response cache"): the exchange's part. Before the
// backend is asked, a route with enable-cache looks the request up in its worker's shard
// (server/response_cache.h); a fresh entry is the answer. A miss asks the backend; the first
// miss of a key fills it while later ones wait for it (request collapsing), and a storable
// answer is kept as it goes to the client: the head as the response filters left it (before
// the per-request fields: CORS, HSTS, cookies), the body as written.

#include <ctime>

#include "log/log.h"
#include "server/exchange.h"
#include "server/file_response.h"
#include "server/http_date.h"
#include "server/worker.h"
#include "text/text.h"

namespace tidegate::dataplane::server {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// Fields of the backend's head not kept with a stored response: framing (the hit gets its own),
// Age (recomputed), and what a previous cache in front of the backend said.
bool kept_in_cache(std::string_view name) {
  for (std::string_view skip : {"content-length", "transfer-encoding", "age", "x-cache"}) {
    if (boost::beast::iequals(name, skip)) return false;
  }
  return true;
}

}  // namespace

bool Exchange::lookup_cache() {
  auto& req = downstream_.request();
  const CompiledRoute* compiled = compiled_route();
  const RequestTarget target = split_target(req.target(), req[http::field::host]);
  cache_key_.clear();
  cache_key_ += client_https_ ? "https|" : "http|";
  cache_key_ += std::to_string(compiled != nullptr ? compiled->cache_tag : 0);
  cache_key_ += '|';
  // The backend's settings (a Service's appProtocol, TLS): a change purges as a route's does.
  const runtime::UpstreamState* backend = snapshot_->upstream(route_->upstream);
  cache_key_ += std::to_string(backend != nullptr ? backend->config_tag : 0);
  cache_key_ += '|';
  // The Host with its port: a backend may build links from the Host it is sent.
  cache_key_ += text::ascii_lower(std::string(target.host));
  cache_key_ += '|';
  cache_key_.append(target.path_and_query.data(), target.path_and_query.size());
  const bool has_body =
      !downstream_.request_complete() || downstream_.request_content_length().value_or(0) > 0;
  // Upgrades, and routes with a canary (whose answer depends on which backend the request's
  // header, cookie or the weight picks), never meet the cache.
  const bool upgrade =
      downstream_.upgrade_requested() || !downstream_.other_upgrade_requested().empty();
  if (upgrade || route_->canary ||
      request_cacheability(req.method(), req, has_body) == RequestCacheability::kBypass) {
    cache_state_ = CacheState::kBypass;
    return false;
  }
  return cache_lookup_again(false);
}

bool Exchange::cache_lookup_again(bool after_wait) {
  auto& cache = worker_.cache();
  auto& req = downstream_.request();
  if (auto entry = cache.find(cache_key_, req, std::chrono::steady_clock::now())) {
    serve_cached(std::move(entry));
    return true;
  }
  cache_state_ = CacheState::kMiss;
  cache_request_fields_ = copy_fields(req);  // Vary is read from the request as received
  if (head_request_) return false;           // a HEAD fills nothing (no body to store)
  if (cache.begin_fill(cache_key_)) {
    cache_filling_ = true;
    return false;
  }
  if (after_wait) return false;  // waited once already: to the backend
  // Another exchange of this worker is asking the backend for this key: wait for its answer,
  // at most kCacheLockTimeout (nginx's proxy_cache_lock_timeout), then go on alone.
  const uint64_t token = ++cache_wait_token_;
  // The waiter holds the connection weakly: a client that leaves is not kept alive by it.
  const bool waiting = cache.wait(cache_key_, [weak = std::weak_ptr<void>(downstream_.hold()), this,
                                               token, executor = downstream_.executor()] {
    auto self = weak.lock();
    if (!self) return;
    asio::post(executor, [self, this, token] { on_cache_wake(token); });
  });
  if (!waiting) return false;  // too many wait already: to the backend
  if (!cache_timer_) cache_timer_.emplace(downstream_.executor());
  cache_timer_->expires_after(kCacheLockTimeout);
  cache_timer_->async_wait([self = downstream_.hold(), this, token](error_code ec) {
    if (!ec) on_cache_wake(token);
  });
  return true;
}

void Exchange::on_cache_wake(uint64_t token) {
  if (cancelled_ || token != cache_wait_token_) return;  // ended, or woken already
  ++cache_wait_token_;
  cache_timer_->cancel();
  if (cache_lookup_again(true)) return;
  go_to_backend();
}

void Exchange::serve_cached(std::shared_ptr<const CachedResponse> entry) {
  cache_state_ = CacheState::kHit;
  auto& req = downstream_.request();
  // Conditional requests answered from the entry's validators (RFC 9110 section 13.2.2).
  // Preconditions only for a 2xx entry (RFC 9110 section 13.1: a 404 is sent as it is).
  bool not_modified = false;
  const auto inm = req[http::field::if_none_match];
  const auto ims = req[http::field::if_modified_since];
  if (entry->status < 200 || entry->status >= 300) {
    not_modified = false;
  } else if (!inm.empty()) {
    not_modified = !entry->etag.empty() && etag_list_matches(inm, entry->etag, false);
  } else if (!ims.empty() && !entry->last_modified.empty()) {
    const auto since = parse_http_date(ims);
    const auto modified = parse_http_date(entry->last_modified);
    not_modified = since && modified && *modified <= *since;
  }
  const unsigned status = not_modified ? 304 : entry->status;
  auto& res =
      local_response_.emplace(static_cast<http::status>(status), downstream_.http_version());
  for (const auto& [name, value] : entry->fields) res.insert(name, value);
  res.set(http::field::age, std::to_string(entry->age(std::chrono::steady_clock::now())));
  res.set("X-Cache", "HIT");
  for (const auto& h : policy().response_headers) res.set(h.name, h.value);
  add_cors_fields(res);
  add_hsts(res);
  const bool body = !not_modified && status != 204 && status != 304;
  if (body) {
    res.content_length(entry->body.size());
    if (!head_request_) res.body() = entry->body;
  }
  write_local_response(!downstream_.request_complete());
}

void Exchange::start_cache_capture(ResponseMessage& res, unsigned status, bool body_expected,
                                   std::optional<uint64_t> content_length) {
  if (cache_state_ == CacheState::kBypass) {
    // An unsafe method that succeeded changed the resource: its stored GET goes (RFC 9111
    // section 4.4).
    const auto method = downstream_.request().method();
    if (status < 400 && method != http::verb::get && method != http::verb::head &&
        method != http::verb::options && method != http::verb::trace) {
      worker_.cache().erase(cache_key_);
    }
    res.set("X-Cache", "BYPASS");
    return;
  }
  if (cache_state_ != CacheState::kMiss) return;
  const char* why = "";
  std::optional<int64_t> lifetime;
  const int64_t now_unix = unix_now();
  if (!head_request_ && !error_page_ && (body_expected || status == 204)) {
    const bool authenticated = policy().external_auth.has_value() || client_auth_ != nullptr;
    lifetime = storable_lifetime(status, res, now_unix, authenticated, &why);
    if (lifetime && varies_on_proxy_fields(res)) lifetime.reset();
  }
  const size_t max_item = worker_.cache().max_item_bytes();
  if (lifetime && (!content_length || *content_length <= max_item)) {
    auto entry = std::make_shared<CachedResponse>();
    entry->status = status;
    for (const auto& f : res) {
      if (kept_in_cache(f.name_string())) {
        entry->fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
      }
    }
    entry->vary = vary_values(res, cache_request_fields_);
    entry->stored = std::chrono::steady_clock::now();
    entry->lifetime = *lifetime;
    entry->initial_age = initial_age(res, now_unix);
    entry->etag = std::string(res[http::field::etag]);
    entry->last_modified = std::string(res[http::field::last_modified]);
    if (content_length) entry->body.reserve(static_cast<size_t>(*content_length));
    cache_capture_ = std::move(entry);
    if (!body_expected) store_capture();  // a 204: stored with its head
  } else {
    end_cache_fill();  // nothing will be stored: the waiters go on now
  }
  res.set("X-Cache", "MISS");
}

void Exchange::capture_body(const char* data, std::size_t n, bool last) {
  if (cache_capture_->body.size() + n > worker_.cache().max_item_bytes()) {
    cache_capture_.reset();  // too large after all: passed through, not stored
    end_cache_fill();
    return;
  }
  cache_capture_->body.append(data, n);
  if (last) store_capture();
}

void Exchange::store_capture() {
  worker_.cache().insert(cache_key_, std::move(cache_capture_));
  cache_capture_.reset();
  end_cache_fill();
}

void Exchange::end_cache_fill() {
  cache_capture_.reset();  // an unfinished body is never stored
  if (!cache_filling_) return;
  cache_filling_ = false;
  worker_.cache().end_fill(cache_key_);
}

}  // namespace tidegate::dataplane::server
