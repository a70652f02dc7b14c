#include "observability/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <memory>
#include <sstream>

#include "router/router.h"
#include "runtime/snapshot.h"

namespace tidegate::dataplane::observability {

namespace http = boost::beast::http;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

namespace {

constexpr std::array<const char*, kStatusClassCount> kStatusClassNames = {"other", "1xx", "2xx",
                                                                          "3xx",   "4xx", "5xx"};

uint64_t to_us(std::chrono::nanoseconds d) {
  return d.count() <= 0 ? 0 : static_cast<uint64_t>(d.count()) / 1000;
}

// Bucket bounds in microseconds, computed once from the seconds tables.
struct BoundsUs {
  uint64_t v[kFiniteBuckets];
  explicit constexpr BoundsUs(const double (&seconds)[kFiniteBuckets]) : v{} {
    for (size_t i = 0; i < kFiniteBuckets; ++i)
      v[i] = static_cast<uint64_t>(seconds[i] * 1e6 + 0.5);
  }
};
constexpr BoundsUs kDurationBoundsUs(kDurationBuckets);
constexpr BoundsUs kConnectBoundsUs(kConnectBuckets);

void observe(HistogramSlots& h, const BoundsUs& bounds, uint64_t us) noexcept {
  size_t i = 0;
  while (i < kFiniteBuckets && us > bounds.v[i]) ++i;
  h.bucket[i].add(1);
  h.sum_us.add(us);
}

// The folded (summed over shards) value of one label set.
struct Folded {
  uint64_t requests[kMethodCount][kStatusClassCount] = {};
  uint64_t protocols[kProtocolCount] = {};
  uint64_t grpc[kGrpcCodeCount] = {};
  struct Histogram {
    uint64_t bucket[kBuckets] = {};
    uint64_t sum_us = 0;
    uint64_t count() const {
      uint64_t n = 0;
      for (uint64_t b : bucket) n += b;
      return n;
    }
  } request_duration, upstream_duration, upstream_connect;
  uint64_t bytes_in = 0, bytes_out = 0, rate_limited = 0, auth_errors = 0;
  uint64_t substitution_bytes_in = 0, substitution_bytes_out = 0, substitution_skipped = 0;
  uint64_t substitution_responses = 0, substitution_replacements = 0,
           substitution_forced_releases = 0, substitution_rules_skipped = 0,
           substitution_compressed = 0, substitution_abandoned = 0;
  uint64_t any_substitution() const {
    return substitution_bytes_in + substitution_bytes_out + substitution_skipped +
           substitution_responses + substitution_replacements + substitution_forced_releases +
           substitution_rules_skipped + substitution_compressed + substitution_abandoned;
  }

  void add(const RouteSlots& s) {
    for (size_t m = 0; m < kMethodCount; ++m) {
      for (size_t c = 0; c < kStatusClassCount; ++c) requests[m][c] += s.requests[m][c].get();
    }
    for (size_t p = 0; p < kProtocolCount; ++p) protocols[p] += s.protocol_requests[p].get();
    for (size_t c = 0; c < kGrpcCodeCount; ++c) grpc[c] += s.grpc_statuses[c].get();
    add(request_duration, s.request_duration);
    add(upstream_duration, s.upstream_duration);
    add(upstream_connect, s.upstream_connect);
    bytes_in += s.bytes_in.get();
    bytes_out += s.bytes_out.get();
    rate_limited += s.rate_limited.get();
    auth_errors += s.auth_errors.get();
    substitution_bytes_in += s.substitution_bytes_in.get();
    substitution_bytes_out += s.substitution_bytes_out.get();
    substitution_skipped += s.substitution_skipped_by_memo.get();
    substitution_responses += s.substitution_responses.get();
    substitution_replacements += s.substitution_replacements.get();
    substitution_forced_releases += s.substitution_forced_releases.get();
    substitution_rules_skipped += s.substitution_rules_skipped.get();
    substitution_compressed += s.substitution_compressed_passthrough.get();
    substitution_abandoned += s.substitution_abandoned.get();
  }
  static void add(Histogram& to, const HistogramSlots& from) {
    for (size_t i = 0; i < kBuckets; ++i) to.bucket[i] += from.bucket[i].get();
    to.sum_us += from.sum_us.get();
  }
  uint64_t total_requests() const {
    uint64_t n = 0;
    for (const auto& row : requests) {
      for (uint64_t v : row) n += v;
    }
    return n;
  }
};

MetricFamily family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

std::vector<ClientMetric::Label> labels_of(const RouteLabels& l) {
  std::vector<ClientMetric::Label> out{{"ingress", l.ingress},
                                       {"namespace", l.namespace_},
                                       {"host", l.host},
                                       {"service", l.service}};
  // Only on the series of GRPCRoute method matches (which they tell apart).
  if (!l.grpc_service.empty()) out.push_back({"grpc_service", l.grpc_service});
  if (!l.grpc_method.empty()) out.push_back({"grpc_method", l.grpc_method});
  return out;
}

ClientMetric counter(std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  return m;
}

ClientMetric gauge(std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  return m;
}

ClientMetric histogram(std::vector<ClientMetric::Label> labels, const Folded::Histogram& h,
                       const double (&bounds)[kFiniteBuckets]) {
  ClientMetric m;
  m.label = std::move(labels);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    cumulative += h.bucket[i];
    ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < kFiniteBuckets ? bounds[i] : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back(b);
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = static_cast<double>(h.sum_us) / 1e6;
  return m;
}

}  // namespace

// ---- Method ----

Method method_of(http::verb verb) noexcept {
  switch (verb) {
    case http::verb::get:
      return Method::kGet;
    case http::verb::head:
      return Method::kHead;
    case http::verb::post:
      return Method::kPost;
    case http::verb::put:
      return Method::kPut;
    case http::verb::delete_:
      return Method::kDelete;
    case http::verb::patch:
      return Method::kPatch;
    case http::verb::options:
      return Method::kOptions;
    case http::verb::connect:
      return Method::kConnect;
    case http::verb::trace:
      return Method::kTrace;
    default:
      return Method::kOther;
  }
}

const char* to_string(Method m) noexcept {
  static constexpr const char* kNames[kMethodCount] = {
      "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "OTHER"};
  auto i = static_cast<size_t>(m);
  return i < kMethodCount ? kNames[i] : "OTHER";
}

// ---- WorkerMetrics ----

WorkerMetrics::WorkerMetrics(size_t max_label_sets)
    : page_count_((max_label_sets + kPageSlots - 1) / kPageSlots),
      pages_(new std::atomic<Page*>[page_count_]) {
  for (size_t i = 0; i < page_count_; ++i) pages_[i].store(nullptr, std::memory_order_relaxed);
  pages_[0].store(new Page(), std::memory_order_release);  // the reserved label sets
}

WorkerMetrics::~WorkerMetrics() {
  for (size_t i = 0; i < page_count_; ++i) delete pages_[i].load(std::memory_order_acquire);
}

const RouteSlots* WorkerMetrics::route_if_allocated(LabelSetId id) const noexcept {
  size_t page = id / kPageSlots;
  if (page >= page_count_) return nullptr;
  const Page* p = pages_[page].load(std::memory_order_acquire);
  return p == nullptr ? nullptr : &p->slots[id % kPageSlots];
}

size_t WorkerMetrics::pages() const noexcept {
  size_t n = 0;
  for (size_t i = 0; i < page_count_; ++i)
    n += pages_[i].load(std::memory_order_acquire) != nullptr;
  return n;
}

void WorkerMetrics::reset_route(LabelSetId id) noexcept {
  size_t page = id / kPageSlots;
  Page* p = page < page_count_ ? pages_[page].load(std::memory_order_acquire) : nullptr;
  if (p == nullptr) return;
  RouteSlots* slots = &p->slots[id % kPageSlots];
  std::destroy_at(slots);  // plain counters: a fresh object is all zeros
  std::construct_at(slots);
}

void WorkerMetrics::record_request(const RequestObservation& r) noexcept {
  RouteSlots& s = route(r.labels);
  s.requests[static_cast<size_t>(method_of(r.method))][status_class(r.status)].add(1);
  s.protocol_requests[r.http2 ? 1 : 0].add(1);
  if (r.grpc_status >= 0 && static_cast<size_t>(r.grpc_status) < kGrpcCodeCount) {
    s.grpc_statuses[r.grpc_status].add(1);
  }
  observe(s.request_duration, kDurationBoundsUs, to_us(r.duration));
  if (r.upstream_duration.count() >= 0) {
    observe(s.upstream_duration, kDurationBoundsUs, to_us(r.upstream_duration));
  }
  s.bytes_in.add(r.bytes_in);
  s.bytes_out.add(r.bytes_out);
}

void WorkerMetrics::record_upstream_connect(LabelSetId labels,
                                            std::chrono::nanoseconds took) noexcept {
  observe(route(labels).upstream_connect, kConnectBoundsUs, to_us(took));
}

void WorkerMetrics::record_rate_limited(LabelSetId labels) noexcept {
  route(labels).rate_limited.add(1);
}

void WorkerMetrics::record_auth_error(LabelSetId labels) noexcept {
  route(labels).auth_errors.add(1);
}

void WorkerMetrics::record_substitution(const SubstitutionObservation& o) noexcept {
  RouteSlots& s = route(o.labels);
  s.substitution_responses.add(o.responses);
  s.substitution_bytes_in.add(o.bytes_in);
  s.substitution_bytes_out.add(o.bytes_out);
  s.substitution_replacements.add(o.replacements);
  s.substitution_forced_releases.add(o.forced_releases);
  s.substitution_skipped_by_memo.add(o.skipped_by_memo);
  s.substitution_rules_skipped.add(o.rules_skipped);
  s.substitution_compressed_passthrough.add(o.compressed_passthrough);
  s.substitution_abandoned.add(o.abandoned);
}

// ---- Labels ----

RouteLabels route_labels(std::string_view virtual_host, const model::Route& route) {
  RouteLabels l;
  l.host = std::string(virtual_host);
  std::string_view ingress = route.ingress;
  if (auto slash = ingress.find('/'); slash != std::string_view::npos) {
    l.namespace_ = std::string(ingress.substr(0, slash));
    l.ingress = std::string(ingress.substr(slash + 1));
  } else {
    l.ingress = std::string(ingress);
  }
  // "namespace/service:port" -> "service".
  std::string_view service = route.upstream;
  if (auto slash = service.find('/'); slash != std::string_view::npos) {
    service.remove_prefix(slash + 1);
  }
  l.service = std::string(service.substr(0, service.rfind(':')));
  // A GRPCRoute method match (the translator ranks those by precedence_length): its path is
  // "/service/method" (exact) or "/service/" (prefix); a regex names no one service.
  if (route.precedence_length > 0 && route.match != model::PathMatch::kRegex &&
      route.path.size() > 2 && route.path.front() == '/') {
    std::string_view path = std::string_view(route.path).substr(1);
    const auto slash = path.find('/');
    if (slash != std::string_view::npos && slash > 0) {
      l.grpc_service = std::string(path.substr(0, slash));
      if (route.match == model::PathMatch::kExact)
        l.grpc_method = std::string(path.substr(slash + 1));
    }
  }
  return l;
}

size_t Metrics::Registry::LabelsHash::operator()(const RouteLabels& l) const noexcept {
  std::hash<std::string> h;
  size_t seed = h(l.ingress);
  for (const std::string* s :
       {&l.namespace_, &l.host, &l.service, &l.grpc_service, &l.grpc_method}) {
    seed ^= h(*s) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
  }
  return seed;
}

// ---- Metrics ----

Metrics::Metrics(size_t workers, MetricsOptions options) : options_(options) {
  options_.max_label_sets = std::max<size_t>(options_.max_label_sets, 2);
  for (size_t i = 0; i < std::max<size_t>(workers, 1); ++i) {
    workers_.push_back(std::unique_ptr<WorkerMetrics>(new WorkerMetrics(options_.max_label_sets)));
  }
  registry_ = std::make_shared<Registry>(options_.max_label_sets, &workers_);
}

Metrics::~Metrics() { registry_->detach(); }

size_t Metrics::label_sets() const { return registry_->in_use(); }

Metrics::Registry::Registry(size_t max_label_sets,
                            std::vector<std::unique_ptr<WorkerMetrics>>* workers)
    : max_label_sets_(max_label_sets), workers_(workers), free_((max_label_sets + 63) / 64, 0) {
  pending_.reserve(max_label_sets);
  labels_.push_back(RouteLabels{});  // kNoRouteLabels
  labels_.push_back(RouteLabels{"_overflow_", "_overflow_", "_overflow_", "_overflow_"});
  refs_.assign(2, 1);       // never released
  page_used_.assign(1, 2);  // page 0, allocated by each shard
  ids_.emplace(labels_[kNoRouteLabels], kNoRouteLabels);
  ids_.emplace(labels_[kOverflowLabels], kOverflowLabels);
}

void Metrics::Registry::detach() {
  std::lock_guard lock(mutex_);
  workers_ = nullptr;
}

void Metrics::Registry::use(LabelSetId id) {
  const size_t page = id / WorkerMetrics::kPageSlots;
  if (page >= page_used_.size()) page_used_.resize(page + 1, 0);
  if (page_used_[page]++ > 0 || workers_ == nullptr) return;
  for (const auto& w : *workers_) {
    w->pages_[page].store(new WorkerMetrics::Page(), std::memory_order_release);
  }
}

void Metrics::Registry::make_free(LabelSetId id) {
  free_[id / 64] |= uint64_t{1} << (id % 64);
  ++free_count_;
  const size_t page = id / WorkerMetrics::kPageSlots;
  if (--page_used_[page] > 0 || workers_ == nullptr) return;
  // Nobody reads the page any more: workers record only with ids they hold, a scrape only with
  // ids it listed (pending until it ends), and every id of the page is in neither.
  for (const auto& w : *workers_) {
    delete w->pages_[page].exchange(nullptr, std::memory_order_acq_rel);
  }
}

LabelSetId Metrics::Registry::intern(const RouteLabels& labels) {
  std::lock_guard lock(mutex_);
  if (auto it = ids_.find(labels); it != ids_.end()) {
    if (it->second > kOverflowLabels) ++refs_[it->second];
    return it->second;
  }
  LabelSetId id;
  if (free_count_ > 0) {
    size_t word = 0;
    while (free_[word] == 0) ++word;
    id = static_cast<LabelSetId>(word * 64 + static_cast<size_t>(std::countr_zero(free_[word])));
    free_[word] &= free_[word] - 1;
    --free_count_;
    // Whoever recorded with it let go of it before it was released (see Metrics::intern). A
    // page still allocated keeps the id's old counts: they start again from zero.
    if (page_used_[id / WorkerMetrics::kPageSlots] > 0 && workers_ != nullptr) {
      for (const auto& w : *workers_) w->reset_route(id);
    }
    labels_[id] = labels;
  } else if (labels_.size() < max_label_sets_) {
    id = static_cast<LabelSetId>(labels_.size());
    labels_.push_back(labels);
    refs_.push_back(0);
  } else {
    ++overflows_;
    return kOverflowLabels;
  }
  use(id);
  refs_[id] = 1;
  ids_.emplace(labels, id);
  return id;
}

void Metrics::Registry::release(std::span<const LabelSetId> ids) {
  std::lock_guard lock(mutex_);
  for (LabelSetId id : ids) {
    if (id <= kOverflowLabels || id >= refs_.size() || refs_[id] == 0) continue;
    if (--refs_[id] > 0) continue;
    ids_.erase(labels_[id]);
    labels_[id] = RouteLabels{};
    if (scrapes_ == 0) {
      make_free(id);
    } else {
      pending_.push_back(id);
    }
  }
}

size_t Metrics::Registry::in_use() const {
  std::lock_guard lock(mutex_);
  return labels_.size() - free_count_ - pending_.size();
}

void Metrics::Registry::begin_scrape(std::vector<std::pair<LabelSetId, RouteLabels>>& live,
                                     uint64_t& overflows) {
  std::lock_guard lock(mutex_);
  live.reserve(labels_.size());
  for (LabelSetId id = 0; id < labels_.size(); ++id) {
    if (refs_[id] > 0) live.emplace_back(id, labels_[id]);
  }
  overflows = overflows_;
  ++scrapes_;
}

void Metrics::Registry::end_scrape() {
  std::lock_guard lock(mutex_);
  if (--scrapes_ > 0) return;
  for (LabelSetId id : pending_) make_free(id);
  pending_.clear();
}

std::vector<MetricFamily> Metrics::Collect() const {
  std::vector<std::pair<LabelSetId, RouteLabels>> labels;
  uint64_t overflows = 0;
  registry_->begin_scrape(labels, overflows);
  struct EndScrape {
    Registry& registry;
    ~EndScrape() { registry.end_scrape(); }
  } end_scrape{*registry_};

  auto requests =
      family("tidegate_requests_total",
             "Requests answered, by route labels, method and status class.", MetricType::Counter);
  auto request_duration =
      family("tidegate_request_duration_seconds",
             "Time from the first request byte to the last response byte.", MetricType::Histogram);
  auto upstream_duration =
      family("tidegate_upstream_response_duration_seconds",
             "Time from sending the request upstream to the last byte of its response.",
             MetricType::Histogram);
  auto upstream_connect =
      family("tidegate_upstream_connect_duration_seconds",
             "Time to establish a new upstream connection.", MetricType::Histogram);
  auto bytes_in =
      family("tidegate_request_bytes_total", "Request bytes read from clients (headers and body).",
             MetricType::Counter);
  auto bytes_out =
      family("tidegate_response_bytes_total",
             "Response bytes written to clients (headers and body).", MetricType::Counter);
  auto protocol_requests =
      family("tidegate_protocol_requests_total",
             "Requests answered, by route labels and the client's protocol (http/1.1, h2).",
             MetricType::Counter);
  auto grpc_responses =
      family("tidegate_grpc_responses_total",
             "gRPC calls answered, by route labels and the grpc-status the client was given.",
             MetricType::Counter);
  auto rate_limited = family("tidegate_rate_limited_requests_total",
                             "Requests refused by a rate limit.", MetricType::Counter);
  auto auth_errors = family("tidegate_external_auth_errors_total",
                            "Requests refused because the authentication service (auth-url) "
                            "failed or is not configured.",
                            MetricType::Counter);
  auto subst_in = family("tidegate_substitution_input_bytes_total",
                         "Response body bytes fed to body substitution.", MetricType::Counter);
  auto subst_out =
      family("tidegate_substitution_output_bytes_total",
             "Response body bytes produced by body substitution.", MetricType::Counter);
  auto subst_responses =
      family("tidegate_substitution_responses_total",
             "Responses streamed through body substitution to their end.", MetricType::Counter);
  auto subst_replacements = family("tidegate_substitution_replacements_total",
                                   "Matches replaced by body substitution.", MetricType::Counter);
  auto subst_forced = family(
      "tidegate_substitution_forced_releases_total",
      "Times a partial match outgrew the substitution buffer and its bytes went out unmodified.",
      MetricType::Counter);
  auto subst_abandoned =
      family("tidegate_substitution_abandoned_total",
             "Responses whose substitution exceeded its CPU budget: the rest of the body went out "
             "unmodified.",
             MetricType::Counter);
  auto subst_skipped =
      family("tidegate_substitution_skipped_by_memo_total",
             "Responses relayed unscanned because the memo says no substitution rule matches them.",
             MetricType::Counter);
  auto subst_rules_skipped =
      family("tidegate_substitution_rules_skipped_total",
             "Substitution rules not run on a response because the memo says they do not match it.",
             MetricType::Counter);
  auto subst_compressed = family("tidegate_substitution_compressed_passthrough_total",
                                 "Responses of a substituted type relayed untouched because they "
                                 "came with a Content-Encoding.",
                                 MetricType::Counter);

  for (const auto& [id, set_labels] : labels) {
    Folded f;
    bool any = false;
    for (const auto& w : workers_) {
      if (const RouteSlots* s = w->route_if_allocated(id)) {
        f.add(*s);
        any = true;
      }
    }
    if (!any) continue;
    const auto route = labels_of(set_labels);
    for (size_t m = 0; m < kMethodCount; ++m) {
      for (size_t c = 0; c < kStatusClassCount; ++c) {
        if (f.requests[m][c] == 0) continue;
        auto l = route;
        l.push_back({"method", to_string(static_cast<Method>(m))});
        l.push_back({"status", kStatusClassNames[c]});
        requests.metric.push_back(counter(std::move(l), static_cast<double>(f.requests[m][c])));
      }
    }
    for (size_t p = 0; p < kProtocolCount; ++p) {
      if (f.protocols[p] == 0) continue;
      auto l = route;
      l.push_back({"protocol", kProtocolNames[p]});
      protocol_requests.metric.push_back(
          counter(std::move(l), static_cast<double>(f.protocols[p])));
    }
    for (size_t c = 0; c < kGrpcCodeCount; ++c) {
      if (f.grpc[c] == 0) continue;
      auto l = route;
      l.push_back({"grpc_status", std::to_string(c)});
      grpc_responses.metric.push_back(counter(std::move(l), static_cast<double>(f.grpc[c])));
    }
    // Series appear at their first observation, so that label sets never used cost nothing.
    if (f.request_duration.count() > 0) {
      request_duration.metric.push_back(histogram(route, f.request_duration, kDurationBuckets));
    }
    if (f.upstream_duration.count() > 0) {
      upstream_duration.metric.push_back(histogram(route, f.upstream_duration, kDurationBuckets));
    }
    if (f.upstream_connect.count() > 0) {
      upstream_connect.metric.push_back(histogram(route, f.upstream_connect, kConnectBuckets));
    }
    if (f.total_requests() > 0) {
      bytes_in.metric.push_back(counter(route, static_cast<double>(f.bytes_in)));
      bytes_out.metric.push_back(counter(route, static_cast<double>(f.bytes_out)));
    }
    if (f.rate_limited > 0) {
      rate_limited.metric.push_back(counter(route, static_cast<double>(f.rate_limited)));
    }
    if (f.auth_errors > 0) {
      auth_errors.metric.push_back(counter(route, static_cast<double>(f.auth_errors)));
    }
    if (f.any_substitution() > 0) {
      auto add = [&route](MetricFamily& family, uint64_t v) {
        family.metric.push_back(counter(route, static_cast<double>(v)));
      };
      add(subst_responses, f.substitution_responses);
      add(subst_in, f.substitution_bytes_in);
      add(subst_out, f.substitution_bytes_out);
      add(subst_replacements, f.substitution_replacements);
      add(subst_forced, f.substitution_forced_releases);
      add(subst_skipped, f.substitution_skipped);
      add(subst_rules_skipped, f.substitution_rules_skipped);
      add(subst_compressed, f.substitution_compressed);
      add(subst_abandoned, f.substitution_abandoned);
    }
  }

  uint64_t open = 0, total = 0, tls_ok = 0, tls_failed = 0, tunnels = 0, tunnels_total = 0;
  uint64_t h2_open = 0, h2_total = 0, h2_streams = 0, h2_refused = 0;
  uint64_t mirrors[3] = {0, 0, 0};  // answered, failed, skipped
  for (const auto& w : workers_) {
    open += w->connections_open_.get();  // opened and closed on the same worker: sums exactly
    total += w->connections_total_.get();
    tls_ok += w->tls_handshakes_.get();
    tls_failed += w->tls_handshake_failures_.get();
    tunnels += w->tunnels_open_.get();
    tunnels_total += w->tunnels_total_.get();
    h2_open += w->http2_open_.get();
    h2_total += w->http2_total_.get();
    h2_streams += w->http2_streams_.get();
    h2_refused += w->http2_refused_.get();
    mirrors[0] += w->mirror_answered_.get();
    mirrors[1] += w->mirror_failed_.get();
    mirrors[2] += w->mirror_skipped_.get();
  }
  auto as_gauge = [](uint64_t v) { return static_cast<double>(static_cast<int64_t>(v)); };

  std::vector<MetricFamily> out;
  for (auto* f :
       {&requests, &protocol_requests, &grpc_responses, &request_duration, &upstream_duration,
        &upstream_connect, &bytes_in, &bytes_out, &rate_limited, &auth_errors, &subst_responses,
        &subst_in, &subst_out, &subst_replacements, &subst_forced, &subst_skipped,
        &subst_rules_skipped, &subst_compressed, &subst_abandoned}) {
    out.push_back(std::move(*f));
  }
  auto one = [&out](std::string name, std::string help, MetricType type, double value) {
    auto f = family(std::move(name), std::move(help), type);
    f.metric.push_back(type == MetricType::Gauge ? gauge({}, value) : counter({}, value));
    out.push_back(std::move(f));
  };
  one("tidegate_connections_active", "Client connections open now.", MetricType::Gauge,
      as_gauge(open));
  one("tidegate_connections_total", "Client connections accepted.", MetricType::Counter,
      static_cast<double>(total));
  one("tidegate_tls_handshakes_total", "Client TLS handshakes completed.", MetricType::Counter,
      static_cast<double>(tls_ok));
  one("tidegate_tls_handshake_failures_total", "Client TLS handshakes that failed.",
      MetricType::Counter, static_cast<double>(tls_failed));
  one("tidegate_websocket_tunnels_open",
      "Upgraded connections (WebSocket and other 101 upgrades) tunnelling now.", MetricType::Gauge,
      as_gauge(tunnels));
  one("tidegate_websocket_tunnels_total", "Upgraded connections opened.", MetricType::Counter,
      static_cast<double>(tunnels_total));
  one("tidegate_http2_connections_active", "Client connections speaking HTTP/2 now.",
      MetricType::Gauge, as_gauge(h2_open));
  one("tidegate_http2_connections_total", "Client connections that became HTTP/2.",
      MetricType::Counter, static_cast<double>(h2_total));
  one("tidegate_http2_streams_total", "HTTP/2 request streams (each is also a request).",
      MetricType::Counter, static_cast<double>(h2_streams));
  one("tidegate_http2_connection_errors_total",
      "HTTP/2 connections closed for a limit or a protocol error (GOAWAY other than NO_ERROR).",
      MetricType::Counter, static_cast<double>(h2_refused));
  {
    auto f = family("tidegate_mirror_requests_total",
                    "Mirrored requests (RequestMirror) by result: answered (a response head came "
                    "back), failed (connect, send or no answer), skipped (not sent: the limit in "
                    "flight, no endpoint, a body too long).",
                    MetricType::Counter);
    const char* results[3] = {"answered", "failed", "skipped"};
    for (size_t i = 0; i < 3; ++i) {
      f.metric.push_back(counter({{"result", results[i]}}, static_cast<double>(mirrors[i])));
    }
    out.push_back(std::move(f));
  }
  one("tidegate_config_generation", "Configuration version being served.", MetricType::Gauge,
      static_cast<double>(config_.generation()));
  one("tidegate_config_last_apply_timestamp_seconds",
      "Unix time at which the last configuration was applied (0: never).", MetricType::Gauge,
      static_cast<double>(config_.last_apply_ms()) / 1000.0);
  one("tidegate_config_acks_total", "Configuration updates accepted (ACK).", MetricType::Counter,
      static_cast<double>(config_.acks()));
  one("tidegate_config_nacks_total", "Configuration messages refused (NACK).", MetricType::Counter,
      static_cast<double>(config_.nacks()));
  one("tidegate_metrics_label_sets", "Route label sets in use (bounded).", MetricType::Gauge,
      static_cast<double>(labels.size()));
  one("tidegate_metrics_label_set_overflows_total",
      "Route label sets that found the bound reached and share the \"_overflow_\" labels.",
      MetricType::Counter, static_cast<double>(overflows));

  for (const auto& source : sources_) source(out);
  return out;
}

std::string Metrics::scrape() const {
  std::ostringstream os;
  prometheus::TextSerializer().Serialize(os, Collect());
  return os.str();
}

// ---- RouteMetricIds ----

RouteMetricIds::RouteMetricIds(const std::vector<const router::Router*>& routers,
                               Metrics& metrics) {
  held_.registry = metrics.registry_;
  auto take = [&](const RouteLabels& labels) {
    // The slot first (kNoRouteLabels is never released), so that no reference goes unrecorded.
    held_.ids.push_back(kNoRouteLabels);
    return held_.ids.back() = metrics.intern(labels);
  };
  for (const router::Router* router : routers) {
    router->for_each_route([&](std::string_view host, const model::Route& route) {
      // A route met twice (shared by two routers) keeps its first id, and one reference.
      auto [it, fresh] = ids_.try_emplace(&route, kNoRouteLabels);
      if (!fresh) return;
      it->second = take(route_labels(host, route));
      if (route.canary) {
        model::Route canary_route;
        canary_route.ingress = route.ingress;
        canary_route.upstream = route.canary->upstream;
        canary_ids_.emplace(&route, take(route_labels(host, canary_route)));
      }
    });
  }
}

RouteMetricIds::Held::~Held() {
  if (registry) registry->release(ids);
}

LabelSetId RouteMetricIds::find(const router::Match& match) const noexcept {
  return find(match.route);
}

// ---- Snapshot ----

void append_snapshot_metrics(const runtime::Snapshot* snapshot, std::vector<MetricFamily>& out) {
  auto f =
      family("tidegate_upstream_endpoints",
             "Endpoints of each upstream in the configuration being served.", MetricType::Gauge);
  if (snapshot != nullptr) {
    for (const auto& [name, state] : snapshot->upstreams) {
      f.metric.push_back(gauge({{"upstream", name}}, static_cast<double>(state->endpoints.size())));
    }
    std::sort(f.metric.begin(), f.metric.end(), [](const ClientMetric& a, const ClientMetric& b) {
      return a.label[0].value < b.label[0].value;
    });
  }
  out.push_back(std::move(f));
}

}  // namespace tidegate::dataplane::observability
