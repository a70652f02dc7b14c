#pragma once
// External authentication (auth-url, docs/annotations.md): what the request path needs of a
// route's model::ExternalAuth, prepared once per routing table (route_table.h): the auth
// request's Host and target, the templates (model/external_auth.h) and the cache of answers.
// The call itself is part of the exchange (server/exchange_auth.cc).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/external_auth.h"
#include "server/headers.h"

namespace tidegate::dataplane::server {

// What a template reads of the request.
struct TemplateRequest {
  bool https = false;
  std::string_view host_header;  // as sent (may carry the port)
  std::string_view target;       // path and query as sent
  std::string_view method;
  std::string_view remote_addr;
  const Fields* fields = nullptr;
};

// The template with the request's values put in (an absent header, cookie or argument is "").
std::string expand_template(const std::vector<model::TemplatePart>& parts,
                            const TemplateRequest& req);

// An answer of the authentication service as remembered: its status and the fields the
// exchange uses (auth-response-headers on 2xx, WWW-Authenticate on 401).
struct AuthAnswer {
  unsigned status = 0;
  std::vector<std::pair<std::string, std::string>> fields;
};

// auth-cache-key: answers by key, one shard per worker (each written by its own worker only:
// no lock on the request path). Bounded: a full shard forgets its expired entries, then all.
class AuthCache {
 public:
  static constexpr size_t kMaxEntriesPerWorker = 10'000;
  explicit AuthCache(size_t workers) : shards_(workers == 0 ? 1 : workers) {}
  const AuthAnswer* find(size_t worker, const std::string& key,
                         std::chrono::steady_clock::time_point now);
  void store(size_t worker, std::string key, AuthAnswer answer,
             std::chrono::steady_clock::time_point expires);
  size_t size(size_t worker) const {
    return worker < shards_.size() ? shards_[worker].map.size() : 0;
  }

 private:
  struct Entry {
    AuthAnswer answer;
    std::chrono::steady_clock::time_point expires;
  };
  struct alignas(64) Shard {
    std::unordered_map<std::string, Entry> map;
  };
  std::vector<Shard> shards_;
};

struct CompiledExternalAuth {
  CompiledExternalAuth(const model::ExternalAuth& auth, size_t workers);
  bool usable = false;    // the URL parsed (validated before; false only on a bad push)
  bool https = false;     // of the URL (the upstream's TLS follows it)
  std::string authority;  // the auth request's Host
  std::vector<model::TemplatePart> target, signin, request_redirect, cache_key;
  // With auth-cache-key. Mutable: each worker writes its own shard of the shared table.
  mutable std::optional<AuthCache> cache;
  // How long an answer with `status` is kept; nullopt: not cached.
  std::optional<std::chrono::seconds> cache_time(unsigned status) const;
  std::vector<model::AuthCacheRule> rules;
};

}  // namespace tidegate::dataplane::server
