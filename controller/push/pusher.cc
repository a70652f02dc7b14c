#include "push/pusher.h"

#include <chrono>

namespace tidegate::controller::push {

Pusher::Pusher(std::unique_ptr<Transport> transport, std::string node)
    : transport_(std::move(transport)), node_(std::move(node)) {
  // Versions only need to grow within one data plane's lifetime; starting from the clock keeps
  // them growing across controller restarts too, which makes logs easier to read.
  next_version_ = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
}

PushResult Pusher::push(const model::Config& desired) {
  PushResult result;
  if (!transport_->connected()) {
    acked_.reset();
    if (!transport_->connect(&result.error)) return result;
    auto answer = transport_->call(protocol::Hello{protocol::kProtocolVersion, node_},
                                   kAnswerTimeout, &result.error);
    if (!answer) return result;
    if (auto* nack = std::get_if<protocol::Nack>(&*answer)) {
      result.error = "data plane refused hello: " + nack->reason;
      transport_->close();
      return result;
    }
    if (!std::holds_alternative<protocol::HelloReply>(*answer)) {
      result.error = "unexpected answer to hello";
      transport_->close();
      return result;
    }
    // Whatever the data plane serves, a new connection starts from a full snapshot: the two
    // sides cannot know that they agree otherwise.
    return send_snapshot(desired);
  }
  if (!acked_) return send_snapshot(desired);
  model::Delta delta = model::diff(*acked_, desired);
  if (delta.empty()) {
    result.status = PushStatus::kUnchanged;
    result.version = acked_version_;
    return result;
  }
  uint64_t version = ++next_version_;
  auto answer = transport_->call(protocol::DeltaMsg{version, acked_version_, std::move(delta)},
                                 kAnswerTimeout, &result.error);
  if (!answer) return result;  // disconnected: the next push reconnects and resyncs
  result.version = version;
  if (auto* ack = std::get_if<protocol::Ack>(&*answer); ack && ack->version == version) {
    acked_ = desired;
    acked_version_ = version;
    result.status = PushStatus::kAcked;
    return result;
  }
  if (auto* nack = std::get_if<protocol::Nack>(&*answer)) {
    // The data plane keeps serving acked_ when it refuses content, but a refusal can also mean
    // that the two sides disagree about the base: the next attempt is a full snapshot either way.
    acked_.reset();
    result.status = PushStatus::kNacked;
    result.error = nack->reason;
    return result;
  }
  result.error = "unexpected answer to delta";
  transport_->close();
  result.status = PushStatus::kDisconnected;
  return result;
}

PushResult Pusher::send_snapshot(const model::Config& desired) {
  PushResult result;
  result.full_snapshot = true;
  uint64_t version = ++next_version_;
  result.version = version;
  auto answer =
      transport_->call(protocol::Snapshot{version, desired}, kAnswerTimeout, &result.error);
  if (!answer) return result;
  if (auto* ack = std::get_if<protocol::Ack>(&*answer); ack && ack->version == version) {
    acked_ = desired;
    acked_version_ = version;
    result.status = PushStatus::kAcked;
    return result;
  }
  if (auto* nack = std::get_if<protocol::Nack>(&*answer)) {
    // The data plane keeps what it had, which we no longer know exactly: forget it, so that the
    // next attempt is a snapshot again.
    acked_.reset();
    result.status = PushStatus::kNacked;
    result.error = nack->reason;
    return result;
  }
  result.error = "unexpected answer to snapshot";
  transport_->close();
  return result;
}

}  // namespace tidegate::controller::push
