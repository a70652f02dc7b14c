#pragma once
// Kubernetes Events (core/v1) on Ingresses: one for each problem the translator reports about an
// Ingress (an invalid annotation, host, path, backend...) and for each part of the configuration
// the data plane refused (a NACK), naming the field and the reason.
//
// The recorder is told the *current* set of problems (set()); it posts an Event when a problem
// appears, refreshes it (count + 1, lastTimestamp) while it persists, at most once per
// refresh_interval, and forgets it when it is resolved (a problem that comes back is a new Event).
// So a sync that finds the same problems posts nothing. Writes are rate-bound by a token bucket
// (burst, then one per refill period); what does not fit waits for the next round, and the
// pending set is bounded by the problems themselves. Only the leader writes (is_leader); a replica
// that becomes leader posts the current problems once.
//
// What to post is decided by pure functions (events_from_diagnostics, events_from_nack), unit
// tested apart from the I/O.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kube/client.h"
#include "model/model.h"
#include "store/store.h"
#include "translate/translate.h"

namespace tidegate::controller::status {

inline constexpr std::string_view kReasonTranslationError = "InvalidConfiguration";
inline constexpr std::string_view kReasonTranslationWarning = "IgnoredConfiguration";
inline constexpr std::string_view kReasonRejected = "RejectedByDataPlane";
// The API server keeps Events for an hour by default (--event-ttl); a refresh every half hour
// keeps a persisting problem visible.
inline constexpr std::chrono::minutes kDefaultEventRefresh{30};
inline constexpr size_t kMaxEventMessageBytes = 1024;

struct IngressEvent {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string reason;
  std::string message;
  auto key() const { return std::tie(namespace_, name, reason, message); }
  bool operator==(const IngressEvent&) const = default;
};

// One event per diagnostic naming an Ingress ("Ingress ns/name") that is in the store: errors as
// kReasonTranslationError, warnings as kReasonTranslationWarning. Deduplicated, in a fixed order.
std::vector<IngressEvent> events_from_diagnostics(const std::vector<translate::Diagnostic>& diags,
                                                  const store::Store& store);

// The data plane refused `refused` with `reason` ("; "-separated problems, each naming a host,
// an upstream, a certificate, a TLS host or the default route). Each problem is attributed to the
// Ingresses that produced what it names, with the field: "spec.rules[0] (host a.example)",
// "spec.rules[0].http.paths[1].backend", "spec.tls[0].secretName", "spec.defaultBackend". A
// problem that names nothing of an Ingress (a protocol disagreement) gives no event.
std::vector<IngressEvent> events_from_nack(const model::Config& refused, const store::Store& store,
                                           const std::string& reason);

struct EventOptions {
  std::string component = "tidegate-controller";
  std::string host;  // source.host: our host name
  std::chrono::milliseconds refresh_interval{kDefaultEventRefresh};
  size_t burst = 25;                       // writes allowed at once
  std::chrono::milliseconds refill{1000};  // then one write per refill
  std::chrono::milliseconds period{1000};  // how often pending work is retried
};

class EventRecorder {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `is_leader` may be empty (always leader). `now` may be empty (the steady clock).
  EventRecorder(kube::ApiClient& client, std::function<bool()> is_leader, EventOptions options,
                Clock now = {});
  ~EventRecorder();

  enum class Source { kTranslation, kDataPlane };
  // Any thread: the current problems of one source (replacing what it said before).
  void set(Source source, std::vector<IngressEvent> events);

  void start();
  void stop();
  // One round: posts and refreshes what the bucket allows. Called by the thread; public for tests.
  void sync();

 private:
  struct Posted {
    std::string name;  // the Event's metadata.name
    int count = 1;
    std::chrono::steady_clock::time_point last{};
    std::string first_timestamp;
  };
  using Key = std::tuple<std::string, std::string, std::string, std::string>;
  bool take_token(std::chrono::steady_clock::time_point now);
  bool post(const IngressEvent& event, Posted* posted);
  bool refresh(const IngressEvent& event, Posted* posted);
  void run();

  kube::ApiClient& client_;
  std::function<bool()> is_leader_;
  EventOptions options_;
  Clock now_;
  std::mutex mu_;  // guards desired_, stopping_, dirty_
  std::condition_variable cv_;
  std::map<Source, std::vector<IngressEvent>> desired_;
  bool stopping_ = false;
  bool dirty_ = false;
  // The sync thread's own state.
  std::map<Key, Posted> posted_;
  double tokens_ = 0;
  std::chrono::steady_clock::time_point tokens_at_{};
  size_t dropped_logged_ = 0;
  std::thread thread_;
};

// RFC 3339 in seconds, UTC: the format of an Event's first/lastTimestamp.
std::string time_now_seconds();

}  // namespace tidegate::controller::status
