#include "tls/certificate_cache.h"

#include <functional>

#include "log/log.h"

namespace tidegate::dataplane::tls {

uint64_t fingerprint(const model::Certificate& cert) {
  uint64_t a = std::hash<std::string>{}(cert.cert_pem);
  uint64_t b = std::hash<std::string>{}(cert.key_pem);
  return a ^ (b * 0x9e3779b97f4a7c15ULL);
}

SSL_CTX* CertificateCache::get(const model::Certificate& cert, uint64_t fp) {
  auto it = index_.find(cert.name);
  if (it != index_.end()) {
    if (it->second->fingerprint == fp) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->ctx.get();
    }
    // Replaced since it was built: drop the stale context (open connections hold their own
    // reference to it through their SSL object).
    lru_.erase(it->second);
    index_.erase(it);
  }
  std::string error;
  SslCtxPtr ctx = make_server_context(cert.cert_pem, cert.key_pem, settings_, &error);
  ++builds_;
  if (!ctx) {
    TG_WARN("tls", "certificate " << cert.name << ": " << error << "; using the default");
    return nullptr;
  }
  lru_.push_front(Entry{cert.name, fp, std::move(ctx)});
  index_[cert.name] = lru_.begin();
  while (index_.size() > capacity_) {
    index_.erase(lru_.back().name);
    lru_.pop_back();
  }
  return lru_.front().ctx.get();
}

}  // namespace tidegate::dataplane::tls
