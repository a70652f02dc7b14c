#pragma once
// Keep-alive connections to upstream endpoints. One Pool per worker thread: only that thread
// touches it, so it needs no lock.

#include <chrono>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "runtime/io_types.h"

#include "runtime/snapshot.h"

namespace tidegate::dataplane::upstream {

using runtime::Endpoint;
using TlsStream = boost::beast::ssl_stream<runtime::Stream>;

struct Connection {
  Connection(const runtime::Executor& ex, const Endpoint& ep, uint64_t key,
             size_t read_buffer_bytes)
      : stream(ex), endpoint(ep), tls_key(key) {
    buffer.reserve(read_buffer_bytes);
  }
  // The TCP connection. For a TLS upstream it moves into `tls` once connected; use lowest() for
  // the socket and its timeouts, and with_stream() for reads and writes.
  runtime::Stream stream;
  std::unique_ptr<TlsStream> tls;
  runtime::Stream& lowest() { return tls ? boost::beast::get_lowest_layer(*tls) : stream; }
  template <class F>
  void with_stream(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(stream);
    }
  }
  boost::beast::flat_buffer buffer;
  Endpoint endpoint;
  uint64_t tls_key = 0;  // runtime::UpstreamState::tls_key of the upstream it was opened for
  std::chrono::steady_clock::time_point idle_since;
  bool reused = false;  // taken from the pool rather than freshly connected
};

// Closes `connection` (when set) and lets go of it. A read or write in progress refers to its
// buffer and streams, and its handler, run later with operation_aborted (or a queued completion
// that reads again on the closed socket), still touches them (Beast commits to the buffer before
// it looks at the error): every operation's handler holds the connection (Http1Upstream), so it
// is destroyed after the last one. Destroying it at once was a use after free (an HTTP/2 client
// resetting a stream whose upstream read was pending; found with an ASan data plane).
void discard(std::shared_ptr<Connection>& connection);

// Connections are shared per endpoint and TLS settings (runtime::UpstreamState::tls_key).
struct PoolKey {
  Endpoint endpoint;
  uint64_t tls_key;
  bool operator==(const PoolKey&) const = default;
};
struct PoolKeyHash {
  size_t operator()(const PoolKey& k) const noexcept {
    return runtime::EndpointHash{}(k.endpoint) ^ (k.tls_key * 0x9e3779b97f4a7c15ULL);
  }
};

class Pool {
 public:
  // Idle connections kept per endpoint and how long one may stay idle.
  static constexpr size_t kMaxIdlePerEndpoint = 256;
  static constexpr std::chrono::seconds kIdleTimeout{60};
  // An idle connection older than this is checked for a close by the peer before reuse.
  static constexpr std::chrono::milliseconds kPeekAfterIdle{1000};

  // An idle connection to `ep` that the peer has not closed, or null.
  std::shared_ptr<Connection> take(const Endpoint& ep, uint64_t tls_key);
  // Keeps `c` for reuse (the caller has checked that the endpoint is still configured).
  void put(std::shared_ptr<Connection> c);
  // Closes idle connections to endpoints not in `keep` (an endpoint left the configuration).
  void retain_only(const runtime::EndpointSet& keep);
  // Closes connections idle for longer than kIdleTimeout.
  void expire(std::chrono::steady_clock::time_point now);
  size_t idle_count() const;

 private:
  std::unordered_map<PoolKey, std::vector<std::shared_ptr<Connection>>, PoolKeyHash> idle_;
};

}  // namespace tidegate::dataplane::upstream
