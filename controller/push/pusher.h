#pragma once
// Brings the data plane to a desired Config: a full snapshot after every (re)connect, deltas
// against the last acknowledged Config after that. The acknowledged Config moves only on ACK
// (ingress-nginx's "running configuration changes only after the data plane accepted it"). After
// a NACK the pusher forgets it and sends a full snapshot next: a refusal can also mean the two
// sides disagree about the base, and a snapshot settles both cases.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/model.h"
#include "push/transport.h"

namespace tidegate::controller::push {

enum class PushStatus {
  kAcked,         // the data plane serves `desired` now
  kUnchanged,     // it already did; nothing was sent
  kNacked,        // it refused; reason in PushResult::error; it keeps its previous config
  kDisconnected,  // could not reach it; try again later (reconnect sends a snapshot)
};

struct PushResult {
  PushStatus status = PushStatus::kDisconnected;
  std::string error;
  uint64_t version = 0;
  bool full_snapshot = false;
};

class Pusher {
 public:
  explicit Pusher(std::unique_ptr<Transport> transport, std::string node = "tidegate-controller");
  PushResult push(const model::Config& desired);
  bool connected() const { return transport_->connected(); }
  // False when the data plane went away since the last push (the next push resyncs).
  bool alive() { return transport_->alive(); }
  const std::optional<model::Config>& last_acked() const { return acked_; }
  uint64_t acked_version() const { return acked_version_; }

  static constexpr std::chrono::milliseconds kAnswerTimeout{10'000};

 private:
  PushResult send_snapshot(const model::Config& desired);

  std::unique_ptr<Transport> transport_;
  std::string node_;
  std::optional<model::Config> acked_;  // what the data plane serves, as far as we know
  uint64_t acked_version_ = 0;
  uint64_t next_version_ = 0;
};

}  // namespace tidegate::controller::push
