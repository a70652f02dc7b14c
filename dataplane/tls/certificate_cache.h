#pragma once
// A bounded LRU of parsed server contexts, one per worker (so no lock): 10,000 hosts do not cost
// 10,000 parsed certificates, only the ones clients actually ask for. Entries are keyed by
// certificate name and checked against the PEM's fingerprint, so a replaced certificate is rebuilt
// on its next handshake and the old context is released once no connection uses it.

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

#include "model/model.h"
#include "tls/tls_context.h"

namespace tidegate::dataplane::tls {

class CertificateCache {
 public:
  static constexpr size_t kDefaultCapacity = 1000;

  CertificateCache(const ServerSettings& settings, size_t capacity = kDefaultCapacity)
      : settings_(settings), capacity_(capacity) {}

  // The context for `cert`, built on a miss; null when it cannot be built (then the caller keeps
  // the default certificate).
  SSL_CTX* get(const model::Certificate& cert, uint64_t fingerprint);
  size_t size() const { return index_.size(); }
  uint64_t builds() const { return builds_; }

 private:
  struct Entry {
    std::string name;
    uint64_t fingerprint = 0;
    SslCtxPtr ctx;
  };
  const ServerSettings& settings_;
  size_t capacity_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t builds_ = 0;
};

uint64_t fingerprint(const model::Certificate& cert);

}  // namespace tidegate::dataplane::tls
