#pragma once
// The one root: the snapshot the data plane serves. The control thread owns it and replaces it
// whole; each worker receives the same pointer through its own event queue and reads it without
// any lock (Envoy's thread-local slot pattern). A request keeps the snapshot it started with.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "protocol/protocol.h"
#include "runtime/snapshot.h"

namespace tidegate::dataplane::runtime {

class Publisher {
 public:
  using Sink = std::function<void(std::shared_ptr<const Snapshot>)>;
  explicit Publisher(size_t workers) : workers_(workers) {}

  void add_sink(Sink sink) { sinks_.push_back(std::move(sink)); }

  // Control thread only. Each returns an empty string on success, else the reason for a NACK;
  // on failure nothing changes. A delta that changes upstreams only is applied to the serving
  // snapshot's upstream table (runtime::update_upstreams: routes not recompiled, unchanged
  // upstreams shared); any other delta rebuilds the whole snapshot.
  std::string apply_snapshot(const protocol::Snapshot& msg);
  // The same, taking the message's configuration instead of copying it (a first snapshot at
  // 10,000 hosts: one copy of every host, route and upstream less).
  std::string apply_snapshot(protocol::Snapshot&& msg);
  std::string apply_delta(const protocol::DeltaMsg& msg);

  std::shared_ptr<const Snapshot> current() const { return current_; }  // control thread only

  // Any thread.
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  uint64_t applied() const { return applied_.load(std::memory_order_relaxed); }
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  uint64_t expired_certificates() const { return expired_.load(std::memory_order_relaxed); }

 private:
  std::string publish(uint64_t version, model::Config config);
  std::string publish(std::shared_ptr<const Snapshot> snap);
  // Parses each certificate and checks its key: a bad one refuses the whole update (the
  // controller checks them too, so this is a second line). Expired ones are accepted and counted.
  std::string check_certificates(const std::vector<const model::Certificate*>& certs);

  size_t workers_;
  std::vector<Sink> sinks_;
  std::shared_ptr<const Snapshot> current_;
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> expired_{0};
};

}  // namespace tidegate::dataplane::runtime
