#pragma once
// Brings the data plane to a desired Config: a full snapshot after every (re)connect, deltas
// against the last acknowledged Config after that. The acknowledged Config moves only on ACK
// (ingress-nginx's "running configuration changes only after the data plane accepted it"). After
// a NACK the pusher forgets it and sends a full snapshot next: a refusal can also mean the two
// sides disagree about the base, and a snapshot settles both cases.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  // `changed_upstreams`, when not null, says that `desired` differs from the Config given to the
  // previous push() only in these upstreams (changed, added or gone): when the data plane
  // acknowledged that previous Config, the delta is built from them alone and the acknowledged
  // Config updated in place, so an endpoint change costs the changed upstreams rather than a diff
  // and a copy of the whole Config. Otherwise (or with null) the whole Configs are diffed.
  // `shared`, when not null, is `desired` itself, shared, whose parts other than the upstreams
  // never change (translate::IncrementalTranslator::shared_config): once acknowledged, the
  // pusher keeps a reference to those parts and a copy of the upstreams only, rather than a copy
  // of the whole Config (150 MB of the controller at 100,000 hosts, docs/benchmarks.md).
  PushResult push(const model::Config& desired,
                  const std::vector<std::string>* changed_upstreams = nullptr,
                  std::shared_ptr<const model::Config> shared = nullptr);
  bool connected() const { return transport_->connected(); }
  // False when the data plane went away since the last push (the next push resyncs).
  bool alive() { return transport_->alive(); }
  // What the data plane serves as far as we know (a copy, reassembled: for tests and dumps).
  std::optional<model::Config> last_acked() const;
  uint64_t acked_version() const { return acked_version_; }

  static constexpr std::chrono::milliseconds kAnswerTimeout{10'000};

 private:
  PushResult push_to(const model::Config& desired,
                     const std::vector<std::string>* changed_upstreams);
  PushResult send_snapshot(const model::Config& desired);
  // The data plane acknowledged `desired`.
  void remember(const model::Config& desired);
  void forget();

  std::unique_ptr<Transport> transport_;
  std::string node_;
  // What the data plane serves, as far as we know: the parts of acked_base_ other than its
  // upstreams (which are not read: acked_upstreams_ holds them), or nothing when null.
  std::shared_ptr<const model::Config> acked_base_;
  std::map<std::string, model::Upstream> acked_upstreams_;
  // push()'s `shared`, for remember().
  std::shared_ptr<const model::Config> shared_;
  uint64_t acked_version_ = 0;
  uint64_t next_version_ = 0;
  // The previous push() left the data plane serving exactly the Config it was given.
  bool acked_previous_ = false;
};

// The delta from `from` to `to` when they can differ only in the upstreams `names`.
model::Delta upstream_delta(const model::Config& from, const model::Config& to,
                            const std::vector<std::string>& names);
model::Delta upstream_delta(const std::map<std::string, model::Upstream>& from,
                            const model::Config& to, const std::vector<std::string>& names);

}  // namespace tidegate::controller::push
