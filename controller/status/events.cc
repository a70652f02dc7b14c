#include "status/events.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <regex>
#include <set>

#include "kube/api.h"
#include "log/log.h"
#include "text/text.h"

namespace tidegate::controller::status {

namespace {

constexpr std::string_view kIngressPrefix = "Ingress ";

using text::index_path;

// At most `limit` bytes, not cutting a UTF-8 sequence.
std::string truncate(std::string s, size_t limit) {
  if (s.size() <= limit) return s;
  size_t n = limit - 3;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s + "...";
}

std::pair<std::string, std::string> split_key(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

const objects::Ingress* find_ingress(const store::Store& store, const std::string& key) {
  auto it = store.ingresses().find(key);
  return it == store.ingresses().end() ? nullptr : &it->second;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// Ingress key -> the fields (of that Ingress) a refused part came from.
using Attribution = std::map<std::string, std::vector<std::string>>;

void attribute_host(const model::Config& config, const store::Store& store, const std::string& host,
                    Attribution& out) {
  auto vh = config.virtual_hosts.find(host);
  if (vh == config.virtual_hosts.end()) return;
  std::set<std::string> ingresses;
  for (const auto& r : vh->second.routes) ingresses.insert(r.ingress);
  for (const auto& key : ingresses) {
    const objects::Ingress* in = find_ingress(store, key);
    if (in == nullptr) continue;
    std::vector<std::string> fields;
    for (size_t i = 0; i < in->spec.rules.size(); ++i) {
      const auto& h = in->spec.rules[i].host;
      if ((h.empty() ? "*" : text::ascii_lower(h)) == host) {
        fields.push_back(index_path("spec.rules", i) + " (host " + host + ")");
      }
    }
    if (!fields.empty()) out[key] = fields;
  }
}

void attribute_upstream(const model::Config& config, const store::Store& store,
                        const std::string& upstream, Attribution& out) {
  std::set<std::string> ingresses;
  for (const auto& [host, vh] : config.virtual_hosts) {
    for (const auto& r : vh.routes) {
      if (r.upstream == upstream) ingresses.insert(r.ingress);
    }
  }
  if (config.default_route && config.default_route->upstream == upstream) {
    ingresses.insert(config.default_route->ingress);
  }
  auto colon = upstream.rfind(':');
  if (colon == std::string::npos) return;
  auto [ns, service] = split_key(upstream.substr(0, colon));
  const std::string port = upstream.substr(colon + 1);
  // Init-captures: clang before 16 cannot capture structured bindings (fuzz/run.sh builds with it).
  auto names = [&service = service, &port](const objects::IngressBackend& b) {
    return b.service && b.service->name == service && b.service->port.to_string() == port;
  };
  for (const auto& key : ingresses) {
    const objects::Ingress* in = find_ingress(store, key);
    if (in == nullptr || in->metadata.namespace_ != ns) continue;
    std::vector<std::string> fields;
    if (in->spec.default_backend && names(*in->spec.default_backend)) {
      fields.push_back("spec.defaultBackend");
    }
    for (size_t i = 0; i < in->spec.rules.size(); ++i) {
      for (size_t j = 0; j < in->spec.rules[i].paths.size(); ++j) {
        if (names(in->spec.rules[i].paths[j].backend)) {
          fields.push_back(index_path(index_path("spec.rules", i) + ".http.paths", j) + ".backend");
        }
      }
    }
    if (!fields.empty()) out[key] = fields;
  }
}

// Our Ingresses whose spec.tls[i] satisfies `match(tls, ingress)`.
template <typename Match>
void attribute_tls(const store::Store& store, Match&& match, Attribution& out) {
  for (const auto& [key, in] : store.ingresses()) {
    if (store::select_ingress(in, store.ingress_classes(), store.options()) !=
        store::IngressSelection::kOurs) {
      continue;
    }
    std::vector<std::string> fields;
    for (size_t i = 0; i < in.spec.tls.size(); ++i) {
      if (match(in.spec.tls[i], in)) fields.push_back(index_path("spec.tls", i));
    }
    if (!fields.empty()) out[key] = fields;
  }
}

Attribution attribute(const model::Config& config, const store::Store& store, std::string part) {
  Attribution out;
  if (part.starts_with("router: ")) part = part.substr(8);
  static const std::regex kTlsHost(R"re(TLS host "?([^":; ]+))re");
  static const std::regex kHost(R"re((?:^|[^A-Za-z])host "?([^":; ]+))re");
  static const std::regex kUpstream(R"re(upstream "?([^"/:; ]+/[^"/:; ]+:[^":; ]+))re");
  static const std::regex kCertificate(R"re(certificate "?([^"/:; ]+/[^":; ]+))re");
  std::smatch m;
  if (std::regex_search(part, m, kTlsHost)) {
    const std::string host = m[1];
    attribute_tls(
        store,
        [&](const objects::IngressTLS& tls, const objects::Ingress& in) {
          if (tls.hosts.empty()) {
            return std::any_of(in.spec.rules.begin(), in.spec.rules.end(),
                               [&](const auto& r) { return text::ascii_lower(r.host) == host; });
          }
          return std::any_of(tls.hosts.begin(), tls.hosts.end(),
                             [&](const auto& h) { return text::ascii_lower(h) == host; });
        },
        out);
  } else if (part.starts_with("default route")) {
    if (config.default_route) out[config.default_route->ingress] = {"spec.defaultBackend"};
  } else if (std::regex_search(part, m, kHost)) {
    attribute_host(config, store, m[1], out);
  } else if (std::regex_search(part, m, kUpstream)) {
    attribute_upstream(config, store, m[1], out);
  } else if (std::regex_search(part, m, kCertificate)) {
    auto [ns, secret] = split_key(m[1]);
    attribute_tls(
        store,
        [&ns = ns, &secret = secret](const objects::IngressTLS& tls, const objects::Ingress& in) {
          return in.metadata.namespace_ == ns && tls.secret_name == secret;
        },
        out);
    for (auto& [key, fields] : out) {
      for (auto& f : fields) f += ".secretName";
    }
  }
  return out;
}

std::string json_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A name unique enough for an Event: the Ingress's name (shortened), a dot, a hex suffix from
// the wall clock and a counter (client-go uses the Ingress name and the time in nanoseconds).
std::string event_name(const std::string& ingress) {
  static std::atomic<uint64_t> counter{0};
  uint64_t ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count()) +
                counter.fetch_add(1);
  char hex[20];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(ns));
  return ingress.substr(0, 200) + "." + hex;
}

}  // namespace

std::string time_now_seconds() { return json_time(std::time(nullptr)); }

std::vector<IngressEvent> events_from_diagnostics(const std::vector<translate::Diagnostic>& diags,
                                                  const store::Store& store) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, IngressEvent> out;
  for (const auto& d : diags) {
    if (!d.object.starts_with(kIngressPrefix)) continue;
    const std::string key = d.object.substr(kIngressPrefix.size());
    const objects::Ingress* in = find_ingress(store, key);
    if (in == nullptr) continue;
    IngressEvent e{
        in->metadata.namespace_, in->metadata.name, in->metadata.uid,
        std::string(d.severity == translate::Severity::kError ? kReasonTranslationError
                                                              : kReasonTranslationWarning),
        truncate(d.message, kMaxEventMessageBytes)};
    out.emplace(e.key(), e);
  }
  std::vector<IngressEvent> events;
  for (auto& [_, e] : out) events.push_back(std::move(e));
  return events;
}

std::vector<IngressEvent> events_from_nack(const model::Config& refused, const store::Store& store,
                                           const std::string& reason) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, IngressEvent> out;
  size_t start = 0;
  while (start <= reason.size()) {
    size_t end = reason.find("; ", start);
    if (end == std::string::npos) end = reason.size();
    const std::string part = reason.substr(start, end - start);
    start = end + 2;
    if (part.empty()) continue;
    for (const auto& [key, fields] : attribute(refused, store, part)) {
      const objects::Ingress* in = find_ingress(store, key);
      if (in == nullptr) continue;
      IngressEvent e{
          in->metadata.namespace_, in->metadata.name, in->metadata.uid,
          std::string(kReasonRejected),
          truncate("the data plane refused the configuration from " + join(fields) + ": " + part,
                   kMaxEventMessageBytes)};
      out.emplace(e.key(), e);
    }
  }
  std::vector<IngressEvent> events;
  for (auto& [_, e] : out) events.push_back(std::move(e));
  return events;
}

EventRecorder::EventRecorder(kube::ApiClient& client, std::function<bool()> is_leader,
                             EventOptions options, Clock now)
    : client_(client),
      is_leader_(std::move(is_leader)),
      options_(std::move(options)),
      now_(now ? std::move(now) : Clock([] { return std::chrono::steady_clock::now(); })) {
  tokens_ = static_cast<double>(options_.burst);
  tokens_at_ = now_();
}

EventRecorder::~EventRecorder() { stop(); }

void EventRecorder::start() {
  thread_ = std::thread([this] { run(); });
}

void EventRecorder::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EventRecorder::set(Source source, std::vector<IngressEvent> events) {
  {
    std::lock_guard lock(mu_);
    auto& current = desired_[source];
    if (current == events) return;
    current = std::move(events);
    dirty_ = true;
  }
  cv_.notify_all();
}

void EventRecorder::run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, options_.period, [this] { return stopping_ || dirty_; });
      if (stopping_) return;
      dirty_ = false;
    }
    sync();
  }
}

bool EventRecorder::take_token(std::chrono::steady_clock::time_point now) {
  if (options_.refill.count() > 0) {
    double earned = std::chrono::duration<double>(now - tokens_at_) /
                    std::chrono::duration<double>(options_.refill);
    tokens_ = std::min(static_cast<double>(options_.burst), tokens_ + earned);
  }
  tokens_at_ = now;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

bool EventRecorder::post(const IngressEvent& e, Posted* posted) {
  const std::string now = time_now_seconds();
  posted->name = event_name(e.name);
  posted->count = 1;
  posted->first_timestamp = now;
  nlohmann::json involved = {{"apiVersion", "networking.k8s.io/v1"},
                             {"kind", "Ingress"},
                             {"namespace", e.namespace_},
                             {"name", e.name}};
  if (!e.uid.empty()) involved["uid"] = e.uid;
  nlohmann::json source = {{"component", options_.component}};
  if (!options_.host.empty()) source["host"] = options_.host;
  nlohmann::json body = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", posted->name}, {"namespace", e.namespace_}}},
      {"involvedObject", involved},
      {"reason", e.reason},
      {"message", e.message},
      {"type", "Warning"},
      {"source", source},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
  };
  kube::Response r = client_.send(
      "POST", "/api/v1/namespaces/" + e.namespace_ + "/events",
      body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
  if (r.status == 200 || r.status == 201) {
    TG_INFO("events",
            "Ingress " << e.namespace_ << "/" << e.name << ": " << e.reason << ": " << e.message);
    return true;
  }
  TG_WARN("events", "posting an Event on Ingress " << e.namespace_ << "/" << e.name
                                                   << " failed: " << r.status << " " << r.error);
  return false;
}

bool EventRecorder::refresh(const IngressEvent& e, Posted* posted) {
  nlohmann::json patch = {{"count", posted->count + 1}, {"lastTimestamp", time_now_seconds()}};
  kube::Response r =
      client_.send("PATCH", "/api/v1/namespaces/" + e.namespace_ + "/events/" + posted->name,
                   patch.dump(), "application/merge-patch+json");
  if (r.status == 200) {
    ++posted->count;
    return true;
  }
  if (r.status == 404) return post(e, posted);  // expired (--event-ttl): a new one
  TG_WARN("events", "refreshing Event " << e.namespace_ << "/" << posted->name
                                        << " failed: " << r.status << " " << r.error);
  return false;
}

void EventRecorder::sync() {
  std::map<Key, IngressEvent> want;
  {
    std::lock_guard lock(mu_);
    for (const auto& [source, events] : desired_) {
      for (const auto& e : events) want.emplace(e.key(), e);
    }
  }
  if (is_leader_ && !is_leader_()) {
    posted_.clear();  // a replica that leads again posts the current problems once
    return;
  }
  std::erase_if(posted_, [&](const auto& entry) { return !want.contains(entry.first); });
  const auto now = now_();
  size_t waiting = 0;
  for (const auto& [key, e] : want) {
    auto it = posted_.find(key);
    if (it != posted_.end() && now - it->second.last < options_.refresh_interval) continue;
    if (!take_token(now)) {
      ++waiting;
      continue;
    }
    if (it == posted_.end()) {
      Posted p;
      if (post(e, &p)) {
        p.last = now;
        posted_.emplace(key, std::move(p));
      }
    } else if (refresh(e, &it->second)) {
      it->second.last = now;
    }
  }
  if (waiting > 0 && waiting != dropped_logged_) {
    TG_WARN("events", waiting << " Events wait for the rate limit");
  }
  dropped_logged_ = waiting;
}

}  // namespace tidegate::controller::status
