#include "upstream/pool.h"

#include <sys/socket.h>

#include <cerrno>

namespace tidegate::dataplane::upstream {

namespace {

// True when the peer has closed or reset an idle connection (or sent unexpected bytes): a cheap
// non-blocking peek saves a failed request on a connection the server already gave up.
bool peer_closed(Connection& c, std::chrono::steady_clock::time_point now) {
  if (c.buffer.size() != 0) return true;
  // A connection used moments ago is almost never closed by now; skipping the peek saves a
  // syscall per request under load. A rare miss is caught by the retry of a reused connection.
  if (now - c.idle_since < Pool::kPeekAfterIdle) return false;
  char byte;
  ssize_t n = ::recv(c.lowest().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n > 0) return true;
  return !(errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

std::shared_ptr<Connection> Pool::take(const Endpoint& ep, uint64_t tls_key) {
  auto it = idle_.find(PoolKey{ep, tls_key});
  if (it == idle_.end()) return nullptr;
  auto& list = it->second;
  auto now = std::chrono::steady_clock::now();
  while (!list.empty()) {
    std::shared_ptr<Connection> c = std::move(list.back());
    list.pop_back();
    if (!peer_closed(*c, now)) {
      c->reused = true;
      return c;
    }
  }
  return nullptr;
}

void Pool::put(std::shared_ptr<Connection> c) {
  auto& list = idle_[PoolKey{c->endpoint, c->tls_key}];
  if (list.size() >= kMaxIdlePerEndpoint) return;  // dropping `c` closes it
  c->idle_since = std::chrono::steady_clock::now();
  c->lowest().expires_never();
  list.push_back(std::move(c));
}

void Pool::retain_only(const runtime::EndpointSet& keep) {
  for (auto it = idle_.begin(); it != idle_.end();) {
    if (!keep.contains(it->first.endpoint)) {
      it = idle_.erase(it);
    } else {
      ++it;
    }
  }
}

void Pool::expire(std::chrono::steady_clock::time_point now) {
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& list = it->second;
    std::erase_if(list, [&](const std::shared_ptr<Connection>& c) {
      return now - c->idle_since > kIdleTimeout;
    });
    if (list.empty()) {
      it = idle_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t Pool::idle_count() const {
  size_t n = 0;
  for (const auto& [_, list] : idle_) n += list.size();
  return n;
}

void discard(std::shared_ptr<Connection>& connection) {
  if (!connection) return;
  // The close cancels what is waiting; each operation's handler holds the connection until its
  // last completion, including one already queued that would read again on the closed socket.
  connection->lowest().close();
  connection.reset();
}

}  // namespace tidegate::dataplane::upstream
