#include "push/pusher.h"

#include <chrono>
#include <set>

namespace tidegate::controller::push {

Pusher::Pusher(std::unique_ptr<Transport> transport, std::string node)
    : transport_(std::move(transport)), node_(std::move(node)) {
  // Versions only need to grow within one data plane's lifetime; starting from the clock keeps
  // them growing across controller restarts too, which makes logs easier to read.
  next_version_ = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
}

model::Delta upstream_delta(const model::Config& from, const model::Config& to,
                            const std::vector<std::string>& names) {
  return upstream_delta(from.upstreams, to, names);
}

model::Delta upstream_delta(const std::map<std::string, model::Upstream>& from,
                            const model::Config& to, const std::vector<std::string>& names) {
  model::Delta d;
  // Sorted and unique, as model::diff would list them.
  std::set<std::string> unique(names.begin(), names.end());
  for (const auto& name : unique) {
    auto now = to.upstreams.find(name);
    auto was = from.find(name);
    if (now == to.upstreams.end()) {
      if (was != from.end()) d.remove_upstreams.push_back(name);
    } else if (was == from.end() || !(was->second == now->second)) {
      d.upsert_upstreams.push_back(now->second);
    }
  }
  return d;
}

std::optional<model::Config> Pusher::last_acked() const {
  if (!acked_base_) return std::nullopt;
  model::Config c = *acked_base_;
  c.upstreams = acked_upstreams_;
  return c;
}

void Pusher::remember(const model::Config& desired) {
  if (shared_ != nullptr) {
    acked_base_ = shared_;
  } else {
    // A copy without the upstreams (kept below).
    auto base = std::make_shared<model::Config>();
    base->virtual_hosts = desired.virtual_hosts;
    base->default_route = desired.default_route;
    base->certificates = desired.certificates;
    base->tls_hosts = desired.tls_hosts;
    base->substitutions = desired.substitutions;
    base->listeners = desired.listeners;
    acked_base_ = std::move(base);
  }
  acked_upstreams_ = desired.upstreams;
}

void Pusher::forget() {
  acked_base_.reset();
  acked_upstreams_.clear();
}

PushResult Pusher::push(const model::Config& desired,
                        const std::vector<std::string>* changed_upstreams,
                        std::shared_ptr<const model::Config> shared) {
  const bool hinted = changed_upstreams != nullptr && acked_previous_ && acked_base_;
  acked_previous_ = false;
  shared_ = std::move(shared);
  PushResult result = push_to(desired, hinted ? changed_upstreams : nullptr);
  shared_.reset();
  acked_previous_ = result.status == PushStatus::kAcked || result.status == PushStatus::kUnchanged;
  return result;
}

PushResult Pusher::push_to(const model::Config& desired,
                           const std::vector<std::string>* changed_upstreams) {
  PushResult result;
  if (!transport_->connected()) {
    forget();
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
  if (!acked_base_) return send_snapshot(desired);
  model::Delta delta = changed_upstreams
                           ? upstream_delta(acked_upstreams_, desired, *changed_upstreams)
                           : model::diff(*acked_base_, acked_upstreams_, desired);
  if (delta.empty()) {
    // Equal to what the data plane serves: keep the new shared Config rather than the older one
    // (after a full translation that changed nothing, the older would stay alive beside it).
    if (shared_ != nullptr) acked_base_ = shared_;
    result.status = PushStatus::kUnchanged;
    result.version = acked_version_;
    return result;
  }
  uint64_t version = ++next_version_;
  protocol::Message msg = protocol::DeltaMsg{version, acked_version_, std::move(delta)};
  auto answer = transport_->call(msg, kAnswerTimeout, &result.error);
  if (!answer) return result;  // disconnected: the next push reconnects and resyncs
  result.version = version;
  if (auto* ack = std::get_if<protocol::Ack>(&*answer); ack && ack->version == version) {
    if (changed_upstreams) {
      // Only upstreams differ: patch them rather than copy the whole Config.
      const model::Delta& sent = std::get<protocol::DeltaMsg>(msg).delta;
      for (const auto& name : sent.remove_upstreams) acked_upstreams_.erase(name);
      for (const auto& up : sent.upsert_upstreams) acked_upstreams_[up.name] = up;
    } else {
      remember(desired);
    }
    acked_version_ = version;
    result.status = PushStatus::kAcked;
    return result;
  }
  if (auto* nack = std::get_if<protocol::Nack>(&*answer)) {
    // The data plane keeps serving what it had when it refuses content, but a refusal can also mean
    // that the two sides disagree about the base: the next attempt is a full snapshot either way.
    forget();
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
  auto answer = transport_->call_snapshot(version, desired, kAnswerTimeout, &result.error);
  if (!answer) return result;
  if (auto* ack = std::get_if<protocol::Ack>(&*answer); ack && ack->version == version) {
    remember(desired);
    acked_version_ = version;
    result.status = PushStatus::kAcked;
    return result;
  }
  if (auto* nack = std::get_if<protocol::Nack>(&*answer)) {
    // The data plane keeps what it had, which we no longer know exactly: forget it, so that the
    // next attempt is a snapshot again.
    forget();
    result.status = PushStatus::kNacked;
    result.error = nack->reason;
    return result;
  }
  result.error = "unexpected answer to snapshot";
  transport_->close();
  return result;
}

}  // namespace tidegate::controller::push
