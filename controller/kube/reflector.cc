#include "kube/reflector.h"

#include <ctime>
#include <future>

#include "kube/json_reader.h"
#include "kube/proto_reader.h"
#include "log/log.h"

namespace tidegate::controller::kube {

using objects::Kind;

Reflector::Reflector(ApiClient& client, Kind kind, std::string namespace_, ReflectorSink& sink,
                     ReflectorOptions options)
    : client_(client),
      kind_(kind),
      namespace_(resource_of(kind).namespaced ? std::move(namespace_) : std::string()),
      sink_(sink),
      options_(options),
      backoff_(options.backoff_min, options.backoff_max, std::random_device{}()),
      rng_(std::random_device{}()) {}

Reflector::~Reflector() { stop(); }

std::string Reflector::name() const {
  std::string n = objects::to_string(kind_);
  if (!namespace_.empty()) n += " in " + namespace_;
  return n;
}

void Reflector::start() {
  thread_ = std::thread([this] { run(); });
}

void Reflector::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (current_) current_->cancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Reflector::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stopping_; });
}

std::optional<objects::Object> Reflector::convert(const objects::Node& node) {
  objects::ParseResult<objects::Object> result;
  switch (kind_) {
    case Kind::kIngress: {
      auto r = objects::parse_ingress(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kIngressClass: {
      auto r = objects::parse_ingress_class(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kService: {
      auto r = objects::parse_service(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kEndpointSlice: {
      auto r = objects::parse_endpoint_slice(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kSecret: {
      auto r = objects::parse_secret(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kSubstitutionRuleSet: {
      auto r = objects::parse_substitution_rule_set(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kGatewayClass: {
      auto r = objects::parse_gateway_class(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kGateway: {
      auto r = objects::parse_gateway(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kHTTPRoute: {
      auto r = objects::parse_http_route(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kGRPCRoute: {
      auto r = objects::parse_grpc_route(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kReferenceGrant: {
      auto r = objects::parse_reference_grant(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kNamespace: {
      auto r = objects::parse_namespace(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kBackendTLSPolicy: {
      auto r = objects::parse_backend_tls_policy(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
    case Kind::kConfigMap: {
      auto r = objects::parse_config_map(node);
      if (r.ok()) return objects::Object(std::move(*r.value));
      result.error = r.error;
      break;
    }
  }
  // The message names the field, never a value, so this is safe for Secrets too.
  const std::string_view ns = node["metadata"]["namespace"].ScalarView();
  const std::string_view name = node["metadata"]["name"].ScalarView();
  TG_WARN("kube", objects::to_string(kind_) << " " << ns << (ns.empty() ? "" : "/") << name
                                            << " ignored: " << result.error);
  return std::nullopt;
}

namespace {

// The most later items reserved for from a page's remainingItemCount (a larger count is not
// believed: beyond it the vector grows as it fills).
constexpr uint64_t kMaxReservedItems = 250'000;

bool not_there(int status) { return status == 404 || status == 403; }

// This thread's CPU time in ms: with the API server and other lists on the same cores, a page's
// decoding takes longer on the wall clock than on the CPU.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

void Reflector::note_absent(const Response& r) {
  const bool was_absent = absent_.exchange(true);
  const std::string resource = group_resource(kind_);
  const long recheck_s =
      std::chrono::duration_cast<std::chrono::seconds>(options_.absent_recheck).count();
  if (r.status == 404) {
    // The usual case: the CRD is not installed. Not a problem, so not a warning.
    TG_LOG(was_absent ? log::Level::kDebug : log::Level::kInfo, "kube",
           "list " << name() << ": " << resource
                   << " is not served (404: its CRD is not installed); no " << name()
                   << " until it is, checking every " << recheck_s << " s");
  } else {
    Status s = status_from_body(r.status, r.body);
    TG_LOG(was_absent ? log::Level::kDebug : log::Level::kWarn, "kube",
           "list " << name() << " forbidden (" << s.code << " " << s.message
                   << "); treated as none: grant get, list and watch on " << resource
                   << "; checking every " << recheck_s << " s");
  }
}

Reflector::ListEnd Reflector::list() {
  using clock = std::chrono::steady_clock;
  const auto started = clock::now();
  clock::duration waiting{}, decoding{};
  double decoding_cpu_ms = 0;  // of `decoding`, on this thread's CPU (the rest: waiting for one)
  size_t pages = 0, protobuf_pages = 0, bytes = 0, count = 0;
  std::vector<objects::Object> all;
  // The first list of a kind the sink takes page by page: each page is stored while the next
  // one is on its way (at 100,000 objects a kind, storing them all at the end took ~0.2 s).
  const bool paged = !pages_added_ && lists_ == 0 && sink_.takes_pages(kind_);
  clock::duration storing{};
  std::string version;
  // Protobuf for the kinds read_protobuf_list knows (the API server encodes and sends it in a
  // fraction of JSON's time: kube/proto_reader.h); each answer says which encoding it is in.
  const bool protobuf = options_.protobuf_lists && has_protobuf_schema(kind_) && !protobuf_failed_;
  auto fetch = [this, protobuf](const std::string& token, size_t expected_bytes) {
    return client_.get_list(list_url(kind_, namespace_, options_.list_page_size, token), protobuf,
                            expected_bytes);
  };
  // The next page is asked for as soon as this one's continue token is read, before this one is
  // decoded: the API server prepares it (and the connection is set up) meanwhile.
  std::future<Response> next;
  std::string next_token;  // the token `next` asked with
  // The page before's tree, its items converted: the next protobuf page is read into it.
  std::shared_ptr<objects::Document> scratch;
  Response r = fetch("", first_page_bytes_);
  waiting += clock::now() - started;
  for (;;) {
    if (options_.optional && pages == 0 && not_there(r.status)) {
      note_absent(r);
      sink_.replace(kind_, {});  // the CRD (and with it every object) may have been deleted
      return ListEnd::kAbsent;
    }
    if (r.status != 200) {
      // 410 here means our continue token expired mid-list: start over (the caller backs off).
      Status s = r.status == 0 ? Status{0, "", r.error} : status_from_body(r.status, r.body);
      TG_WARN("kube", "list " << name() << " failed: "
                              << (r.status ? std::to_string(s.code) + " " + s.reason + " " : "")
                              << s.message);
      return ListEnd::kFailed;
    }
    ++pages;
    bytes += r.body.size();
    const size_t page_bytes = r.body.size();
    if (pages == 1) first_page_bytes_ = page_bytes;
    const auto decode_start = clock::now();
    const double decode_cpu_start = thread_cpu_ms();
    const bool is_pb = is_protobuf(r.content_type);
    protobuf_pages += is_pb ? 1 : 0;
    if (auto token = is_pb ? peek_protobuf_continue_token(r.body) : peek_continue_token(r.body);
        token && !token->empty()) {
      next_token = *token;
      next = std::async(std::launch::async, fetch, next_token, page_bytes);
    }
    std::string error;
    auto page = is_pb ? parse_protobuf_list(r.body, kind_, &error, std::move(scratch))
                      : parse_list(r.body, &error);
    if (!page && is_pb) {
      // A page our schema cannot read (an API server whose encoding changed under us): this
      // kind's lists are asked for in JSON from now on, which reads any object it can.
      protobuf_failed_ = true;
      TG_WARN("kube", "list " << name() << ": " << error << "; listing " << name()
                              << " in JSON from now on");
      return ListEnd::kFailed;
    }
    if (!page) {
      TG_WARN("kube", "list " << name() << ": " << error);
      return ListEnd::kFailed;  // (a page asked for meanwhile is awaited and dropped)
    }
    r = Response{};  // the body is read; its objects live in the page
    // Room for this page's objects, and the later pages' when the server says how many there
    // are (a list's vector grown by doubling was a fifth of the controller's page faults over a
    // start at 10,000 objects per kind: docs/benchmarks.md).
    size_t room = all.size() + page->items.size();
    if (page->remaining_items && !page->continue_token.empty() && !paged) {
      room += static_cast<size_t>(
          std::min<uint64_t>(*page->remaining_items, uint64_t{kMaxReservedItems}));
    }
    // Without the count (a server that does not send it) the vector still grows by doubling.
    if (room > all.capacity()) all.reserve(std::max(room, 2 * all.capacity()));
    for (const auto& item : page->items) {
      if (auto o = convert(item)) all.push_back(std::move(*o));
    }
    version = page->resource_version;
    page->items.clear();
    scratch = std::move(page->document);
    decoding += clock::now() - decode_start;
    decoding_cpu_ms += thread_cpu_ms() - decode_cpu_start;
    if (paged) {
      const auto store_start = clock::now();
      count += all.size();
      pages_added_ = true;
      sink_.add_page(kind_, std::move(all));
      all = {};
      storing += clock::now() - store_start;
    }
    if (page->continue_token.empty()) break;
    const auto wait_start = clock::now();
    if (next.valid() && next_token == page->continue_token) {
      r = next.get();
    } else {
      if (next.valid()) next.get();  // the peek read another token (not expected): drop it
      r = fetch(page->continue_token, page_bytes);
    }
    waiting += clock::now() - wait_start;
  }
  scratch.reset();  // the last page's tree is not kept while the objects are stored
  const auto store_start = clock::now();
  if (paged) {
    sink_.end_pages(kind_);
  } else {
    count = all.size();
    sink_.replace(kind_, std::move(all));
  }
  const auto stored = clock::now();
  storing += stored - store_start;
  resource_version_ = version;
  ++lists_;
  if (absent_.exchange(false)) {
    TG_INFO("kube", group_resource(kind_) << " is served now");
  }
  TG_INFO("kube", "listed " << count << " " << name() << " at resourceVersion " << version);
  auto ms = [](clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  // For bench/propagation.py: where a list's time goes (start-up at scale).
  TG_DEBUG("kube", "list " << name() << " timing: " << pages << " pages, " << bytes << " bytes in "
                           << ms(stored - started) << " ms: waiting for pages " << ms(waiting)
                           << " ms, decoding " << ms(decoding) << " ms (CPU "
                           << static_cast<long long>(decoding_cpu_ms) << " ms), storing "
                           << ms(storing) << " ms; "
                           << (protobuf_pages == pages ? "protobuf"
                               : protobuf_pages == 0   ? "JSON"
                                                       : "protobuf and JSON"));
  return ListEnd::kListed;
}

Reflector::WatchEnd Reflector::watch() {
  std::uniform_int_distribution<int> spread(0, static_cast<int>(options_.watch_timeout.count()));
  const int timeout = static_cast<int>(options_.watch_timeout.count()) + spread(rng_);
  Response failed;
  auto stream = client_.stream(watch_url(kind_, namespace_, resource_version_, timeout), &failed);
  if (!stream) {
    if (failed.status == 410) return WatchEnd::kGone;
    if (options_.optional && not_there(failed.status)) return WatchEnd::kAbsent;
    Status s = failed.status == 0 ? Status{0, "", failed.error}
                                  : status_from_body(failed.status, failed.body);
    // The first failure in a row is a warning; the retries after it are not news.
    TG_LOG(failing_ ? log::Level::kDebug : log::Level::kWarn, "kube",
           "watch " << name() << " failed: " << (failed.status ? std::to_string(s.code) + " " : "")
                    << s.message << (failing_ ? "" : "; retrying with backoff"));
    failing_ = true;
    return WatchEnd::kError;
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) return WatchEnd::kClosed;
    current_ = stream.get();
  }
  TG_DEBUG("kube", "watch " << name() << " open from " << resource_version_);
  struct Clear {
    Reflector* self;
    ~Clear() {
      std::lock_guard lock(self->mu_);
      self->current_ = nullptr;
    }
  } clear{this};
  bool got_any = false;
  std::string line, error;
  while (stream->next_line(&line, &error)) {
    const auto read = std::chrono::steady_clock::now();
    const long long read_wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count();
    std::string why;
    auto ev = parse_watch_event(line, &why);
    if (!ev) {
      TG_WARN("kube", "watch " << name() << ": " << why << "; restarting the watch");
      return WatchEnd::kError;
    }
    if (!got_any) {
      got_any = true;
      backoff_.reset();  // the connection works
      if (failing_) TG_INFO("kube", "watch " << name() << " works again");
      failing_ = false;
    }
    switch (ev->type) {
      case EventType::kAdded:
      case EventType::kModified:
        if (auto o = convert(ev->object)) {
          sink_.upsert(std::move(*o));
        } else {
          // An object we cannot read any more must not keep serving its old version.
          std::string ns = ev->object["metadata"]["namespace"]
                               ? ev->object["metadata"]["namespace"].Scalar()
                               : std::string();
          std::string nm = ev->object["metadata"]["name"] ? ev->object["metadata"]["name"].Scalar()
                                                          : std::string();
          sink_.remove(kind_, ns, nm);
        }
        break;
      case EventType::kDeleted: {
        const objects::Node meta = ev->object["metadata"];
        std::string ns = meta["namespace"] ? meta["namespace"].Scalar() : std::string();
        std::string nm = meta["name"] ? meta["name"].Scalar() : std::string();
        sink_.remove(kind_, ns, nm);
        break;
      }
      case EventType::kBookmark:
        break;
      case EventType::kError:
        if (ev->status.code == 410) return WatchEnd::kGone;
        if (options_.optional && not_there(ev->status.code)) return WatchEnd::kAbsent;
        TG_WARN("kube", "watch " << name() << ": error " << ev->status.code << " "
                                 << ev->status.reason << ": " << ev->status.message);
        return WatchEnd::kError;
    }
    // For bench/propagation.py: when the event was read (wall clock, to line up with the
    // writer's), and how long decoding it and handing it to the sink took.
    TG_DEBUG("kube", "watch " << name() << ": event " << static_cast<int>(ev->type) << " at "
                              << ev->resource_version << " read at t=" << read_wall_us
                              << " us, handled in "
                              << std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::steady_clock::now() - read)
                                     .count()
                              << " us");
    if (!ev->resource_version.empty()) resource_version_ = ev->resource_version;
  }
  if (!error.empty()) {
    failing_ = true;
    TG_WARN("kube",
            "watch " << name() << " broke: " << error << "; resuming from " << resource_version_);
    return WatchEnd::kError;
  }
  return WatchEnd::kClosed;
}

void Reflector::run() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (resource_version_.empty()) {
      const ListEnd listed = list();
      if (listed == ListEnd::kFailed) {
        if (!sleep_for(backoff_.next())) return;
        continue;
      }
      synced_ = true;
      sink_.listed(kind_);
      backoff_.reset();
      if (listed == ListEnd::kAbsent) {
        // Nothing to watch: look again later (a CRD installed meanwhile is picked up then).
        if (!sleep_for(options_.absent_recheck)) return;
        continue;
      }
    }
    switch (watch()) {
      case WatchEnd::kClosed:
        break;  // the server's timeoutSeconds: resume at once
      case WatchEnd::kGone:
        TG_INFO("kube", "watch " << name() << ": resourceVersion " << resource_version_
                                 << " is gone (compacted, or older than a restarted API server's "
                                    "cache); relisting");
        resource_version_.clear();
        break;
      case WatchEnd::kAbsent:
        // Served when we listed, not any more (the CRD was deleted, or our role changed): the
        // relist says so and empties the kind.
        TG_INFO("kube", "watch " << name() << ": " << group_resource(kind_)
                                 << " is no longer served; relisting");
        resource_version_.clear();
        if (!sleep_for(backoff_.next())) return;
        break;
      case WatchEnd::kError:
        if (!sleep_for(backoff_.next())) return;
        break;
    }
  }
}

}  // namespace tidegate::controller::kube
