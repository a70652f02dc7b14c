#pragma once
// Prometheus metrics of the data plane (issue #6), served as text on the admin port at /metrics.
//
// Recording never takes a lock and never allocates: every worker thread owns a WorkerMetrics
// shard of plain counters (std::atomic<uint64_t> written with relaxed load+store by their one
// owner, which compiles to an ordinary add; the atomics only make the scraper's concurrent reads
// well defined). A scrape (Metrics::Collect, on the admin server's thread) sums the shards into
// prometheus::MetricFamily values that prometheus-cpp's TextSerializer prints.
//
// Per-route series carry the labels {ingress, namespace, host, service}. They come from the
// configuration, never from the request: `host` is the virtual host that owns the route
// ("foo.com", "*.foo.com", "*", or "" for the defaultBackend), `ingress`/`namespace` from
// Route::ingress, `service` from Route::upstream ("ns/svc:port" -> "svc"). Each distinct tuple
// is interned once, off the request path, into a LabelSetId; the request path only indexes a
// slot with it. Each routing table holds a reference on the ids of its routes (RouteMetricIds);
// when the last table holding an id goes, its series leave /metrics and the id, its slots
// zeroed, serves the next new tuple (as ingress-nginx drops the metrics of a deleted Ingress).
// At most `max_label_sets` tuples are in use at once; past the bound, new tuples share one
// overflow label set (every label "_overflow_") and tidegate_metrics_label_set_overflows_total
// counts them. See docs/observability.md.
//
// Usage:
//   Metrics metrics(workers);                                // main
//   RouteMetricIds ids(*snapshot->router, metrics);          // once per snapshot, control thread
//   auto id = ids.find(match);                               // request path, after routing
//   worker_metrics.record_request({id, verb, status, ...});  // request path, at the end

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <boost/beast/http/verb.hpp>

#include "model/model.h"

namespace tidegate::dataplane::router {
class Router;
struct Match;
}  // namespace tidegate::dataplane::router

namespace tidegate::dataplane::runtime {
struct Snapshot;
}

namespace tidegate::dataplane::observability {

using LabelSetId = uint32_t;
// Requests that matched no route (404, 400, 503 before any configuration): every label "".
inline constexpr LabelSetId kNoRouteLabels = 0;
// Every label "_overflow_": label sets interned after the bound was reached.
inline constexpr LabelSetId kOverflowLabels = 1;
inline constexpr size_t kDefaultMaxLabelSets = 4096;

// The method label: the common verbs, everything else is "OTHER" (bounded).
enum class Method : uint8_t {
  kGet,
  kHead,
  kPost,
  kPut,
  kDelete,
  kPatch,
  kOptions,
  kConnect,
  kTrace,
  kOther,
};
inline constexpr size_t kMethodCount = 10;
Method method_of(boost::beast::http::verb verb) noexcept;
const char* to_string(Method m) noexcept;

// The status label: "1xx".."5xx", and "other" for anything outside 100-599 (0 = no response).
inline constexpr size_t kStatusClassCount = 6;
inline size_t status_class(unsigned status) noexcept {
  return status >= 100 && status < 600 ? status / 100 : 0;
}

// Histogram buckets (upper bounds, seconds; +Inf implied).
inline constexpr size_t kFiniteBuckets = 11;
inline constexpr size_t kBuckets = kFiniteBuckets + 1;
// Request and upstream response durations: Prometheus' default buckets.
inline constexpr double kDurationBuckets[kFiniteBuckets] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                            0.5,   1,    2.5,   5,    10};
// Upstream connect time: finer, loopback and in-cluster connects take well under a millisecond.
inline constexpr double kConnectBuckets[kFiniteBuckets] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 1};

// A counter written by one thread and read by any: relaxed load + store, no read-modify-write.
class Slot {
 public:
  void add(uint64_t n) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

struct HistogramSlots {
  Slot bucket[kBuckets];  // not cumulative: the scrape accumulates
  Slot sum_us;            // microseconds, so that the sum stays an exact integer
};

// One label set's slots in one shard.
// The client protocol of a request: HTTP/1.x (1.0 and 1.1) or HTTP/2.
inline constexpr size_t kProtocolCount = 2;
inline constexpr const char* kProtocolNames[kProtocolCount] = {"http/1.1", "h2"};
// gRPC status codes 0 (OK) … 16 (UNAUTHENTICATED).
inline constexpr size_t kGrpcCodeCount = 17;

struct RouteSlots {
  Slot requests[kMethodCount][kStatusClassCount];
  HistogramSlots request_duration;
  HistogramSlots upstream_duration;
  HistogramSlots upstream_connect;
  Slot bytes_in;
  Slot bytes_out;
  Slot rate_limited;
  Slot auth_errors;
  Slot substitution_bytes_in;
  Slot substitution_bytes_out;
  Slot substitution_skipped_by_memo;
  Slot substitution_responses;
  Slot substitution_replacements;
  Slot substitution_forced_releases;
  Slot substitution_abandoned;
  Slot substitution_rules_skipped;
  Slot substitution_compressed_passthrough;
  Slot protocol_requests[kProtocolCount];
  Slot grpc_statuses[kGrpcCodeCount];
};

// What the request path reports once per request, when the response is complete (or the
// exchange failed).
struct RequestObservation {
  LabelSetId labels = kNoRouteLabels;
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  unsigned status = 0;                   // sent to the client; 0 when none was sent
  uint64_t bytes_in = 0;                 // request bytes read from the client (headers and body)
  uint64_t bytes_out = 0;                // response bytes written to the client (headers and body)
  std::chrono::nanoseconds duration{0};  // first request byte to last response byte
  // From sending the request upstream to the last byte of its response; negative when the
  // request never got an upstream response (not observed then).
  std::chrono::nanoseconds upstream_duration{-1};
  bool http2 = false;    // the client spoke HTTP/2
  int grpc_status = -1;  // a gRPC call: the grpc-status its client was given (-1: none)
};

// What the request path reports about body substitution (docs/substitutions.md), once per
// response of an applicable type: when it went through the engine to its end, when the memo
// relayed it unscanned, or when it came compressed and was relayed untouched.
struct SubstitutionObservation {
  LabelSetId labels = kNoRouteLabels;
  uint64_t responses = 0;               // 1: streamed through the engine to its end
  uint64_t bytes_in = 0;                // body bytes fed to the engine
  uint64_t bytes_out = 0;               // body bytes the engine produced
  uint64_t replacements = 0;            // matches replaced
  uint64_t forced_releases = 0;         // held bytes released unmodified at the buffer limit
  uint64_t abandoned = 0;               // 1: the engine gave up on its CPU budget
  uint64_t skipped_by_memo = 0;         // 1: relayed unscanned, the memo says no rule matches it
  uint64_t rules_skipped = 0;           // rules not run because the memo says they do not match
  uint64_t compressed_passthrough = 0;  // 1: a Content-Encoding, relayed untouched
};

// One worker's shard. Record functions: the owning worker thread only (they are not atomic
// read-modify-writes), with ids it holds a reference on (through its routing table).
// Construction: Metrics; page allocation, release and slot resets: Metrics::Registry, under its
// mutex.
class WorkerMetrics {
 public:
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;
  ~WorkerMetrics();

  void record_request(const RequestObservation& r) noexcept;
  // One per upstream connection established (a retry that connects again records again).
  void record_upstream_connect(LabelSetId labels, std::chrono::nanoseconds took) noexcept;
  void record_rate_limited(LabelSetId labels) noexcept;
  // auth-url: the authentication service failed (no answer, an unusable one, not configured).
  void record_auth_error(LabelSetId labels) noexcept;
  void record_substitution(const SubstitutionObservation& s) noexcept;
  // Pages of label-set slots allocated now (64 label sets each); any thread, for tests.
  size_t pages() const noexcept;

  void connection_opened() noexcept {
    connections_open_.add(1);
    connections_total_.add(1);
  }
  void connection_closed() noexcept { connections_open_.add(~uint64_t{0}); }  // -1, mod 2^64
  void tls_handshake(bool ok) noexcept { (ok ? tls_handshakes_ : tls_handshake_failures_).add(1); }
  void tunnel_opened() noexcept {
    tunnels_open_.add(1);
    tunnels_total_.add(1);
  }
  void tunnel_closed() noexcept { tunnels_open_.add(~uint64_t{0}); }
  // HTTP/2 client connections (also counted as connections) and their request streams; a
  // connection closed for a flood or another limit (GOAWAY ENHANCE_YOUR_CALM or a protocol error).
  void http2_connection_opened() noexcept {
    http2_open_.add(1);
    http2_total_.add(1);
  }
  void http2_connection_closed() noexcept { http2_open_.add(~uint64_t{0}); }
  void http2_stream() noexcept { http2_streams_.add(1); }
  void http2_refused() noexcept { http2_refused_.add(1); }
  // Mirrored requests (server/mirror.h): answered (a response head came back), failed (connect,
  // send or no answer), skipped (not sent: the limit in flight, no endpoint, a body too long).
  void mirror_answered() noexcept { mirror_answered_.add(1); }
  void mirror_failed() noexcept { mirror_failed_.add(1); }
  void mirror_skipped() noexcept { mirror_skipped_.add(1); }

 private:
  friend class Metrics;
  static constexpr size_t kPageSlots = 64;
  struct Page {
    RouteSlots slots[kPageSlots];
  };

  explicit WorkerMetrics(size_t max_label_sets);
  // An id beyond the bound or on a page never allocated (a bug upstream) lands in
  // kNoRouteLabels. This is no guard against an id used after its release: its page may be
  // given back between the load and the write (RouteTable holds the references for that).
  RouteSlots& route(LabelSetId id) noexcept {
    size_t page = id / kPageSlots;
    Page* p = page < page_count_ ? pages_[page].load(std::memory_order_acquire) : nullptr;
    if (p == nullptr) return pages_[0].load(std::memory_order_relaxed)->slots[kNoRouteLabels];
    return p->slots[id % kPageSlots];
  }
  const RouteSlots* route_if_allocated(LabelSetId id) const noexcept;
  // A reused id starts from zero (Metrics::Registry, under its mutex, once nothing records
  // with the id any more).
  void reset_route(LabelSetId id) noexcept;

  size_t page_count_;
  std::unique_ptr<std::atomic<Page*>[]> pages_;
  alignas(64) Slot connections_open_;
  Slot connections_total_;
  Slot tls_handshakes_;
  Slot tls_handshake_failures_;
  Slot tunnels_open_;
  Slot tunnels_total_;
  Slot http2_open_;
  Slot http2_total_;
  Slot http2_streams_;
  Slot http2_refused_;
  Slot mirror_answered_;
  Slot mirror_failed_;
  Slot mirror_skipped_;
};

struct RouteLabels {
  std::string ingress;
  std::string namespace_;
  std::string host;
  std::string service;
  // A GRPCRoute method match's service and method, from the configuration (never from a
  // request): "/pkg.Svc/Method" exact gives both, "/pkg.Svc/" prefix the service; else empty,
  // and then not exposed as labels at all.
  std::string grpc_service;
  std::string grpc_method;
  bool operator==(const RouteLabels&) const = default;
};
// The labels of `route` served under virtual host `virtual_host` (see the top of this file).
RouteLabels route_labels(std::string_view virtual_host, const model::Route& route);

// Configuration apply results, reported by the control server (any thread).
class ConfigMetrics {
 public:
  void applied(uint64_t version,
               std::chrono::system_clock::time_point when = std::chrono::system_clock::now()) {
    generation_.store(version, std::memory_order_relaxed);
    last_apply_ms_.store(
        std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count(),
        std::memory_order_relaxed);
    acks_.fetch_add(1, std::memory_order_relaxed);
  }
  void rejected() { nacks_.fetch_add(1, std::memory_order_relaxed); }

  uint64_t generation() const { return generation_.load(std::memory_order_relaxed); }
  int64_t last_apply_ms() const { return last_apply_ms_.load(std::memory_order_relaxed); }
  uint64_t acks() const { return acks_.load(std::memory_order_relaxed); }
  uint64_t nacks() const { return nacks_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> last_apply_ms_{0};
  std::atomic<uint64_t> acks_{0};
  std::atomic<uint64_t> nacks_{0};
};

struct MetricsOptions {
  // Distinct route label sets in use at once, the two reserved ones included.
  size_t max_label_sets = kDefaultMaxLabelSets;
};

class Metrics : public prometheus::Collectable {
 public:
  explicit Metrics(size_t workers, MetricsOptions options = {});
  ~Metrics() override;

  WorkerMetrics& worker(size_t index) { return *workers_.at(index); }
  size_t workers() const { return workers_.size(); }
  ConfigMetrics& config() { return config_; }

  // Off the request path (snapshot build), any thread: the id of `labels`, the same for equal
  // labels while any reference on it is held; kOverflowLabels once the bound is reached. Takes
  // one reference, which release() gives back. Allocates the shards' slots for a new id before
  // returning it, so a worker may use it as soon as it receives it. A released id is reused
  // with its slots zeroed: its holders must have stopped recording with it (a worker records
  // only with the ids of the routing table it holds, which holds the references).
  LabelSetId intern(const RouteLabels& labels) { return registry_->intern(labels); }
  // Gives back one reference from intern(); ids 0 and 1 are never released.
  void release(LabelSetId id) { registry_->release({&id, 1}); }
  // Label sets in use, the two reserved ones included.
  size_t label_sets() const;

  // More families appended at each scrape, on the scraping thread (the admin server's, i.e. the
  // control thread): the access log's counters, the current snapshot's endpoints. Register
  // before the first scrape.
  using Source = std::function<void(std::vector<prometheus::MetricFamily>&)>;
  void add_source(Source source) { sources_.push_back(std::move(source)); }

  std::vector<prometheus::MetricFamily> Collect() const override;
  // Collect() in the Prometheus text exposition format (version 0.0.4).
  std::string scrape() const;

 private:
  MetricsOptions options_;
  std::vector<std::unique_ptr<WorkerMetrics>> workers_;
  ConfigMetrics config_;
  std::vector<Source> sources_;

  friend class RouteMetricIds;
  // The label sets and their references, shared with the RouteMetricIds that hold references
  // (a routing table may outlive the Metrics in main's teardown). Off the request path.
  class Registry {
   public:
    Registry(size_t max_label_sets, std::vector<std::unique_ptr<WorkerMetrics>>* workers);
    LabelSetId intern(const RouteLabels& labels);
    // One reference on each (an id twice: two), under one lock.
    void release(std::span<const LabelSetId> ids);
    size_t in_use() const;
    // Metrics is going: no more page allocation or release (its shards go with it).
    void detach();
    // A scrape: the label sets in use (id, labels) and the overflow count. The ids it returns
    // are not reused until end_scrape(), so that its slots are read under the labels it prints.
    void begin_scrape(std::vector<std::pair<LabelSetId, RouteLabels>>& live, uint64_t& overflows);
    void end_scrape();

   private:
    struct LabelsHash {
      size_t operator()(const RouteLabels& l) const noexcept;
    };
    // Under mutex_: `id` becomes reusable; its page is released in every shard once none of
    // the page's ids is in use.
    void make_free(LabelSetId id);
    // Under mutex_: `id` is in use; its page is allocated in every shard if it was not.
    void use(LabelSetId id);

    mutable std::mutex mutex_;
    size_t max_label_sets_;
    std::vector<std::unique_ptr<WorkerMetrics>>* workers_;  // null once detached
    std::vector<RouteLabels> labels_;                       // by LabelSetId
    std::vector<uint32_t> refs_;  // by LabelSetId; 0: free (never for ids 0 and 1)
    std::unordered_map<RouteLabels, LabelSetId, LabelsHash> ids_;
    // Released and reusable, a bit per id, taken lowest first: the ids in use stay packed into
    // the first pages, so that pages emptied by removed routes go back to the allocator. Sized
    // for the bound at construction, as pending_ is reserved, so that a release (from a routing
    // table's destructor) never allocates.
    std::vector<uint64_t> free_;
    size_t free_count_ = 0;
    std::vector<LabelSetId> pending_;  // released while a scrape was reading
    std::vector<uint32_t> page_used_;  // by page: ids in use or pending
    size_t scrapes_ = 0;               // scrapes between begin_scrape and end_scrape
    uint64_t overflows_ = 0;
  };
  std::shared_ptr<Registry> registry_;
};

// The label-set id of every route of one snapshot's router, interned once (control thread,
// while the snapshot is built), with a reference on each, given back when it is destroyed.
// find() is what the request path calls: a pointer-keyed lookup, no allocation, no lock.
class RouteMetricIds {
 public:
  RouteMetricIds() = default;
  RouteMetricIds(const RouteMetricIds&) = delete;
  RouteMetricIds& operator=(const RouteMetricIds&) = delete;
  RouteMetricIds(const router::Router& router, Metrics& metrics)
      : RouteMetricIds(std::vector<const router::Router*>{&router}, metrics) {}
  RouteMetricIds(const std::vector<const router::Router*>& routers, Metrics& metrics);
  LabelSetId find(const model::Route* route) const noexcept {
    if (route == nullptr) return kNoRouteLabels;
    auto it = ids_.find(route);
    return it == ids_.end() ? kNoRouteLabels : it->second;
  }
  LabelSetId find(const router::Match& match) const noexcept;
  // The labels of requests a route sends to its canary backend (service: the canary's).
  LabelSetId find_canary(const model::Route* route) const noexcept {
    auto it = canary_ids_.find(route);
    return it == canary_ids_.end() ? find(route) : it->second;
  }
  size_t size() const { return ids_.size(); }

 private:
  // Every reference taken, given back at once when this goes (a member, so that a constructor
  // that throws gives back what it took too).
  struct Held {
    Held() = default;
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held();
    std::shared_ptr<Metrics::Registry> registry;
    std::vector<LabelSetId> ids;
  } held_;
  std::unordered_map<const model::Route*, LabelSetId> ids_;
  std::unordered_map<const model::Route*, LabelSetId> canary_ids_;
};

// tidegate_upstream_endpoints{upstream} from the snapshot being served (null: nothing). For a
// Metrics source registered by main: it reads the snapshot on the control thread.
void append_snapshot_metrics(const runtime::Snapshot* snapshot,
                             std::vector<prometheus::MetricFamily>& out);

}  // namespace tidegate::dataplane::observability
