// tidegate-controller: reads Kubernetes objects (from the API server, or a folder of manifests),
// translates them into the routing model and keeps the data plane in sync over its control socket.

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <thread>

#ifdef TIDEGATE_MIMALLOC
#include <mimalloc.h>
#endif

#include "cli/flags.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/kube_source.h"
#include "log/log.h"
#include "migrate/nginx_check.h"
#include "push/pusher.h"
#include "source/manifest_loader.h"
#include "source/manifest_watcher.h"
#include "status/events.h"
#include "status/gateway_status_writer.h"
#include "status/leader_election.h"
#include "status/status_writer.h"
#include "store/store.h"
#include "sync/sync_loop.h"
#include "translate/incremental.h"
#include "translate/translate.h"

using namespace tidegate;
using namespace tidegate::controller;

namespace {

sync::SyncLoop* g_loop = nullptr;
std::atomic<bool> g_stop{false};  // a signal before the loop runs (waiting for the first lists)

void on_signal(int) {
  // Only async-signal-safe work here: a flag the loop sees; see main().
  g_stop = true;
  if (g_loop) g_loop->stop();
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// Logs each problem once while it persists, rather than on every rebuild.
class ProblemLog {
 public:
  void report(std::set<std::string> current) {
    for (const auto& line : current) {
      if (!seen_.contains(line)) TG_WARN("controller", line);
    }
    for (const auto& line : seen_) {
      if (!current.contains(line)) TG_INFO("controller", "resolved: " << line);
    }
    seen_ = std::move(current);
  }

 private:
  std::set<std::string> seen_;
};

// --gateway-http-port / --gateway-https-port: 1-65535, else 0.
int32_t gateway_port(const cli::Flags& flags, const char* name) {
  const std::string& text = flags.get(name);
  if (text.empty() || text.size() > 5 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return 0;
  }
  const int port = std::atoi(text.c_str());
  return port >= 1 && port <= 65535 ? port : 0;
}

// --gateway-listener-ports FROM-TO (1024 <= FROM <= TO <= 65535) into the options; "" leaves
// them off. False: the text is not such a range.
bool gateway_listener_ports(const cli::Flags& flags, translate::TranslateOptions& options) {
  const std::string& text = flags.get("gateway-listener-ports");
  if (text.empty()) return true;
  const auto dash = text.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == text.size() || dash > 5 ||
      text.size() - dash - 1 > 5 || text.find_first_not_of("0123456789-") != std::string::npos ||
      text.rfind('-') != dash) {
    return false;
  }
  const int from = std::atoi(text.substr(0, dash).c_str());
  const int to = std::atoi(text.substr(dash + 1).c_str());
  if (from < 1024 || to > 65535 || from > to) return false;
  options.gateway_listener_ports_from = static_cast<uint16_t>(from);
  options.gateway_listener_ports_to = static_cast<uint16_t>(to);
  return true;
}

// The Kubernetes API source: --kubeconfig, or the in-cluster service account when neither source
// flag is given. Nothing is pushed before every kind's first list: a data plane fed half a
// cluster would answer 404 for routes that exist.
int run_kube(const cli::Flags& flags, const store::ClassOptions& class_options) {
  std::string error;
  std::optional<kube::ClusterConfig> config;
  const std::string kubeconfig = flags.get("kubeconfig");
  if (!kubeconfig.empty()) {
    config = kube::load_kubeconfig(kubeconfig, flags.get("kube-context"), &error);
  } else if (std::getenv("KUBERNETES_SERVICE_HOST")) {
    config = kube::load_in_cluster_config(&error);
  } else {
    std::cerr << "tidegate-controller: give a source: --manifests DIR or --kubeconfig FILE (or run "
                 "in a cluster)\n";
    return 2;
  }
  if (!config) {
    std::cerr << "tidegate-controller: " << error << "\n";
    return 2;
  }
  // Start-up: no thread runs yet (docs/kubernetes.md, "Decisions").
  kube::skip_system_ca_bundle(*config);
  int idle_s = std::atoi(flags.get("watch-idle-timeout").c_str());
  if (idle_s <= 0) {
    std::cerr << "tidegate-controller: --watch-idle-timeout: a positive number of seconds\n";
    return 2;
  }
  int recheck_s = std::atoi(flags.get("crd-recheck-interval").c_str());
  if (recheck_s <= 0) {
    std::cerr << "tidegate-controller: --crd-recheck-interval: a positive number of seconds\n";
    return 2;
  }
  kube::RestClientOptions client_options;
  client_options.idle_timeout = std::chrono::seconds(idle_s);
  kube::KubeSourceOptions source_options;
  source_options.watch_namespace = flags.get("watch-namespace");
  source_options.reflector.absent_recheck = std::chrono::seconds(recheck_s);
  source_options.reflector.protobuf_lists = !flags.get_bool("json-lists");
  source_options.gateway_api = !flags.get_bool("disable-gateway-api");
  translate::TranslateOptions translate_options{
      class_options.ingress_class, class_options.controller_name,
      flags.get_bool("nginx-annotations"), flags.get_bool("enable-compression"),
      class_options.default_backend_service};
  translate_options.gateway_controller_name = class_options.gateway_controller_name;
  translate_options.gateway_http_port = gateway_port(flags, "gateway-http-port");
  translate_options.gateway_https_port = gateway_port(flags, "gateway-https-port");
  if (translate_options.gateway_http_port == 0 || translate_options.gateway_https_port == 0) {
    std::cerr << "tidegate-controller: --gateway-http-port and --gateway-https-port: 1-65535\n";
    return 2;
  }
  if (!gateway_listener_ports(flags, translate_options)) {
    std::cerr << "tidegate-controller: --gateway-listener-ports: FROM-TO, 1024 <= FROM <= TO <= "
                 "65535\n";
    return 2;
  }
  TG_INFO("controller", "watching the API server at "
                            << config->describe() << " for class " << class_options.ingress_class
                            << (source_options.watch_namespace.empty()
                                    ? std::string(" in all namespaces")
                                    : " in namespace " + source_options.watch_namespace)
                            << "; data plane at " << flags.get("dataplane-socket"));

  push::Pusher pusher(std::make_unique<push::UnixTransport>(flags.get("dataplane-socket")));
  ProblemLog problems;
  std::unique_ptr<kube::KubeSource> source;
  std::unique_ptr<status::LeaderElector> elector;
  std::unique_ptr<status::StatusWriter> status_writer;
  std::unique_ptr<status::EventRecorder> events;
  std::unique_ptr<status::GatewayStatusWriter> gateway_status;
  // Kept across builds: EndpointSlice-only batches take the endpoint fast path.
  translate::IncrementalTranslator translator(translate_options);
  // A full translation made ahead of the EndpointSlices' first list (below) whose status and
  // Events are still to be set by the first build.
  bool translated_ahead = false;
  // The process's minor page faults so far, for the debug lines (0 without them): a young
  // process's translation is partly first touches of memory (the list threads' memory goes back
  // to the system as it is freed).
  auto minor_faults = [] {
    if (!log::enabled(log::Level::kDebug)) return 0L;
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
  };
  // The translator keeps its result between builds, so the loop reads it in place (no copy of
  // the whole Config per change) and learns which upstreams the fast path changed.
  auto build = [&]() {
    auto started = std::chrono::steady_clock::now();
    const long faults_before = minor_faults();
    const model::Config* config = nullptr;
    auto lines =
        source->with_store_and_changes([&](const store::Store& s, const store::Changes& changes) {
          const auto& result = translator.update(s, changes);
          config = &result.config;
          const bool full =
              translator.last_path() == translate::UpdatePath::kFull || translated_ahead;
          translated_ahead = false;
          // The Gateway API's status, computed by the full translation (the endpoint fast path
          // changes no status).
          if (gateway_status && full) gateway_status->set(result.gateway_status);
          std::set<std::string> diagnostics;
          for (const auto& d : result.diagnostics) diagnostics.insert(translate::to_string(d));
          // The fast path leaves Ingress diagnostics as they were.
          if (events && full) {
            events->set(status::EventRecorder::Source::kTranslation,
                        status::events_from_diagnostics(result.diagnostics, s));
          }
          return diagnostics;
        });
    TG_DEBUG("controller",
             "translation (" << translate::to_string(translator.last_path()) << ", "
                             << translator.last_upstreams_updated() << " upstreams updated) in "
                             << std::chrono::duration_cast<std::chrono::microseconds>(
                                    std::chrono::steady_clock::now() - started)
                                    .count()
                             << " us (" << minor_faults() - faults_before << " minor page faults)");
    problems.report(std::move(lines));
    return sync::Build{config,
                       translator.last_path() == translate::UpdatePath::kFull
                           ? nullptr
                           : &translator.last_changed_upstreams(),
                       translator.shared_config()};
  };
  sync::SyncLoop loop(sync::SyncLoop::IncrementalBuildFn(build), pusher);
  source = std::make_unique<kube::KubeSource>(
      std::make_unique<kube::RestClient>(*config, client_options), class_options, source_options,
      [&loop, &status_writer](objects::Kind kind) {
        loop.notify();
        // Which Ingresses are ours changes with Ingresses and IngressClasses only.
        if (status_writer &&
            (kind == objects::Kind::kIngress || kind == objects::Kind::kIngressClass)) {
          status_writer->notify();
        }
      });
  // Ingress status and Events, written by the elected replica only.
  status::StatusOptions status_options;
  status_options.publish_service = flags.get("publish-service");
  status_options.clear_on_shutdown = flags.get_bool("update-status-on-shutdown");
  for (size_t start = 0, end; start <= flags.get("publish-address").size(); start = end + 1) {
    const std::string& all = flags.get("publish-address");
    end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    std::string a = all.substr(start, end - start);
    if (!a.empty()) status_options.publish_addresses.push_back(a);
  }
  if (!status_options.publish_service.empty() &&
      status_options.publish_service.find('/') == std::string::npos) {
    std::cerr << "tidegate-controller: --publish-service: NAMESPACE/NAME\n";
    return 2;
  }
  const bool publish_status =
      !status_options.publish_service.empty() || !status_options.publish_addresses.empty();
  const bool post_events = !flags.get_bool("disable-events");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  if (publish_status || post_events || source_options.gateway_api) {
    status::ElectionOptions election;
    election.name = flags.get("election-id");
    election.namespace_ = !flags.get("election-namespace").empty() ? flags.get("election-namespace")
                          : !source_options.watch_namespace.empty() ? source_options.watch_namespace
                          : !config->namespace_.empty()             ? config->namespace_
                                                                    : "default";
    election.identity = std::string(host) + "_" + std::to_string(::getpid());
    int lease_s = std::atoi(flags.get("election-lease-seconds").c_str());
    if (lease_s < 2) {
      std::cerr << "tidegate-controller: --election-lease-seconds: at least 2\n";
      return 2;
    }
    election.lease_duration = std::chrono::seconds(lease_s);
    election.retry_period = std::chrono::seconds(std::max(1, lease_s / 5));
    elector = std::make_unique<status::LeaderElector>(source->client(), election);
  }
  if (publish_status) {
    status_writer = std::make_unique<status::StatusWriter>(*source, elector.get(), status_options);
  }
  if (source_options.gateway_api) {
    status::GatewayStatusOptions gateway_options;
    gateway_options.publish_addresses = status_options.publish_addresses;
    gateway_options.publish_service = status_options.publish_service;
    gateway_options.per_gateway_services = translate_options.per_gateway_listeners();
    if (gateway_options.per_gateway_services && gateway_options.publish_service.empty()) {
      TG_WARN("controller",
              "--gateway-listener-ports without --publish-service: Gateways get "
              "listeners of their own but no Service (status.addresses: "
              "--publish-address)");
    }
    gateway_status = std::make_unique<status::GatewayStatusWriter>(
        source->client(), elector.get(), gateway_options, class_options.gateway_controller_name);
  }
  if (post_events) {
    status::EventOptions event_options;
    event_options.host = host;
    events = std::make_unique<status::EventRecorder>(
        source->client(), [&elector] { return elector->is_leader(); }, event_options);
    sync::SyncHooks hooks;
    hooks.nacked = [&](const model::Config& refused, const std::string& reason) {
      events->set(status::EventRecorder::Source::kDataPlane,
                  source->with_store([&](const store::Store& s) {
                    return status::events_from_nack(refused, s, reason);
                  }));
    };
    hooks.accepted = [&](const model::Config&) {
      events->set(status::EventRecorder::Source::kDataPlane, {});
    };
    loop.set_hooks(std::move(hooks));
  }

  install_signal_handlers();
  source->start();
  if (elector) elector->start();
  if (status_writer) status_writer->start();
  if (gateway_status) gateway_status->start();
  if (events) events->start();
  auto started = std::chrono::steady_clock::now();
  for (;;) {
    const uint64_t lists = source->lists_handed_over();
    if (g_stop || source->synced()) break;
    if (!translated_ahead && source->synced_except(objects::Kind::kEndpointSlice)) {
      // Only the EndpointSlices are still being listed: the Ingresses' translation, which needs
      // everything else, is made now, while they come. Their arrival is then the endpoint fast
      // path (translate/incremental.h: the result equals a full translation of the store), so
      // the first push waits for their upstreams only. Nothing is pushed or reported until then.
      const auto ahead_started = std::chrono::steady_clock::now();
      const long faults_before = minor_faults();
      source->with_store_and_changes([&](const store::Store& s, const store::Changes& changes) {
        translator.update(s, changes);
      });
      translated_ahead = true;
      TG_DEBUG("controller", "translation ahead of the EndpointSlices' list in "
                                 << std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now() - ahead_started)
                                        .count()
                                 << " us (" << minor_faults() - faults_before
                                 << " minor page faults)");
      continue;
    }
    // Woken by each list handed over; the timeout only bounds how late a stop is seen.
    source->wait_for_list(lists, std::chrono::milliseconds(50));
  }
  if (!g_stop) {
    TG_INFO("controller", "initial lists complete in "
                              << std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - started)
                                     .count()
                              << " ms; syncing the data plane");
    g_loop = &loop;
    if (!g_stop) loop.run();
    g_loop = nullptr;
  }
  if (events) events->stop();
  if (gateway_status) gateway_status->stop();
  if (status_writer)
    status_writer->stop();       // clears our status first with --update-status-on-shutdown
  if (elector) elector->stop();  // hands the Lease over at once
  source->stop();
  TG_INFO("controller", "stopped");
  return 0;
}

// --check-nginx-annotations: the Ingresses of the folder, or of the cluster (one list), checked
// and printed (docs/annotations.md, "Migrating from ingress-nginx").
int check_nginx(const std::string& dir, const cli::Flags& flags) {
  std::vector<objects::Ingress> ingresses;
  if (!dir.empty()) {
    auto loaded = source::load_manifest_dir(dir);
    for (const auto& e : loaded.errors) std::cerr << e.file << ": " << e.message << "\n";
    for (const auto& o : loaded.objects) {
      if (const auto* ing = std::get_if<objects::Ingress>(&o.object)) ingresses.push_back(*ing);
    }
  } else {
    std::string error;
    auto config =
        flags.get("kubeconfig").empty()
            ? kube::load_in_cluster_config(&error)
            : kube::load_kubeconfig(flags.get("kubeconfig"), flags.get("kube-context"), &error);
    if (!config) {
      std::cerr << "tidegate-controller: " << error << "\n";
      return 2;
    }
    kube::RestClient client(*config);
    std::string token;
    do {
      auto r = client.get(
          kube::list_url(objects::Kind::kIngress, flags.get("watch-namespace"), 500, token));
      if (r.status != 200) {
        std::cerr << "tidegate-controller: listing Ingresses failed: HTTP " << r.status << " "
                  << r.body.substr(0, 300) << "\n";
        return 1;
      }
      auto page = kube::parse_list(r.body, &error);
      if (!page) {
        std::cerr << "tidegate-controller: " << error << "\n";
        return 1;
      }
      for (const auto& item : page->items) {
        auto ing = objects::parse_ingress(item);
        if (ing.ok()) {
          ingresses.push_back(std::move(*ing.value));
        } else {
          std::cerr << "tidegate-controller: an Ingress that cannot be read: " << ing.error << "\n";
        }
      }
      token = page->continue_token;
    } while (!token.empty());
  }
  std::cout << migrate::format_report(migrate::check_nginx_annotations(ingresses));
  return 0;
}

}  // namespace

// The start reads every object of the cluster through list pages (200 MB of JSON at 100,000
// Ingresses) that are freed once their objects are stored. mimalloc gives freed memory back to
// the system after a delay, and only when the thread that freed it allocates again: the list
// threads go quiet after the start, so 190 MB stayed resident at 100,000 Ingresses
// (bench/propagation.sh; docs/benchmarks.md). The controller frees rarely and in large amounts:
// give it back at once. MIMALLOC_DECOMMIT_DELAY / MIMALLOC_SEGMENT_DECOMMIT_DELAY still win.
static void return_freed_memory_at_once() {
#ifdef TIDEGATE_MIMALLOC
  if (std::getenv("MIMALLOC_DECOMMIT_DELAY") == nullptr) mi_option_set(mi_option_decommit_delay, 0);
  if (std::getenv("MIMALLOC_SEGMENT_DECOMMIT_DELAY") == nullptr) {
    mi_option_set(mi_option_segment_decommit_delay, 0);
  }
#endif
}

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  return_freed_memory_at_once();
  cli::Flags flags;
  flags.define("dataplane-socket", "/tmp/tidegate-control.sock", "the data plane's control socket");
  flags.define("manifests", "", "folder of Kubernetes manifests to read and watch");
  flags.define("kubeconfig", "", "kubeconfig of the cluster to watch (its current context)");
  flags.define("kube-context", "", "kubeconfig context to use instead of the current one");
  flags.define("watch-namespace", "", "watch only this namespace (default: all namespaces)");
  flags.define("publish-address", "",
               "comma-separated IPs or host names to write into our Ingresses' status");
  flags.define("publish-service", "",
               "NAMESPACE/NAME of the Service whose load-balancer addresses go into the status");
  flags.define_bool("update-status-on-shutdown",
                    "the leader clears the status it wrote when it stops (for the last replica)");
  flags.define_bool("disable-events",
                    "do not post Kubernetes Events on Ingresses with problems (on by default)");
  flags.define("election-id", "tidegate-leader",
               "name of the Lease that elects the one replica writing Ingress status");
  flags.define("election-namespace", "",
               "namespace of that Lease (default: --watch-namespace, the kubeconfig's, default)");
  flags.define("election-lease-seconds", "15", "the Lease's duration");
  flags.define("watch-idle-timeout", "150",
               "seconds without a byte (event or bookmark) before a watch is reconnected");
  flags.define_bool("json-lists",
                    "ask for every list in JSON (by default Ingress, Service and EndpointSlice "
                    "lists are asked for in Kubernetes' protobuf encoding, which the API server "
                    "encodes and sends faster)");
  flags.define("crd-recheck-interval", "30",
               "seconds between lists of SubstitutionRuleSets while the API server does not "
               "serve them (CRD not installed, or not granted to us)");
  flags.define_bool("disable-gateway-api",
                    "do not watch the Gateway API's kinds (GatewayClass, Gateway, HTTPRoute, "
                    "GRPCRoute, ReferenceGrant, BackendTLSPolicy, and the ConfigMaps policies "
                    "name); by default they are watched when their CRDs are installed");
  flags.define("gateway-controller-name", std::string(store::kDefaultGatewayControllerName),
               "GatewayClasses with this spec.controllerName are ours");
  flags.define("gateway-http-port", "80",
               "the port HTTP listeners of Gateways must use: where the data plane's HTTP "
               "listener is exposed (its Service port)");
  flags.define("gateway-https-port", "443",
               "the port HTTPS listeners of Gateways must use: where the data plane's HTTPS "
               "listener is exposed");
  flags.define("gateway-listener-ports", "",
               "FROM-TO: give each Gateway an address of its own (docs/gateway-api.md): each "
               "Gateway port becomes a data plane listener on a port of this range, and a Service "
               "per Gateway (beside --publish-service, with its selector and type) maps the "
               "Gateway's ports there; empty: every Gateway shares --gateway-http-port and "
               "--gateway-https-port");
  flags.define("ingress-class", std::string(store::kDefaultIngressClass),
               "IngressClass name to serve");
  flags.define("controller-name", std::string(store::kDefaultControllerName),
               "spec.controller value of our IngressClass");
  flags.define_bool("nginx-annotations",
                    "also read the nginx.ingress.kubernetes.io/ spellings of the annotations we "
                    "support, and warn about the ones we do not (docs/annotations.md)");
  flags.define_bool("enable-compression",
                    "compress the responses of Ingresses that do not set "
                    "tidegate.io/enable-compression (ingress-nginx's use-gzip)");
  flags.define("default-backend-service", "",
               "namespace/name of a Service for requests no route takes (instead of 404) and for "
               "routes whose backend has no endpoints (ingress-nginx's flag of the same name)");
  flags.define_bool("check-nginx-annotations",
                    "print, per Ingress of --manifests or --kubeconfig, how each "
                    "nginx.ingress.kubernetes.io/ annotation would be taken, and exit");
  if (int exit_code = cli::parse_command_line(flags, argc, argv, "tidegate-controller");
      exit_code >= 0) {
    return exit_code;
  }
  std::string error;
  const std::string dir = flags.get("manifests");
  const std::string kubeconfig = flags.get("kubeconfig");
  if (!dir.empty() && !kubeconfig.empty()) {
    std::cerr << "tidegate-controller: give one source: --manifests or --kubeconfig\n";
    return 2;
  }
  if (const std::string d = flags.get("default-backend-service");
      !d.empty() && (d.find('/') == std::string::npos || d.front() == '/' || d.back() == '/' ||
                     d.find('/') != d.rfind('/'))) {
    std::cerr << "tidegate-controller: --default-backend-service " << d
              << ": expected namespace/name\n";
    return 2;
  }
  if (flags.get_bool("check-nginx-annotations")) return check_nginx(dir, flags);
  if (dir.empty()) {
    store::ClassOptions class_options{flags.get("ingress-class"), flags.get("controller-name"),
                                      flags.get("default-backend-service")};
    class_options.gateway_controller_name = flags.get("gateway-controller-name");
    return run_kube(flags, class_options);
  }
  if (!std::filesystem::is_directory(dir)) {
    std::cerr << "tidegate-controller: --manifests " << dir << ": not a folder\n";
    return 2;
  }

  store::ClassOptions class_options{flags.get("ingress-class"), flags.get("controller-name"),
                                    flags.get("default-backend-service")};
  class_options.gateway_controller_name = flags.get("gateway-controller-name");
  translate::TranslateOptions translate_options{
      class_options.ingress_class, class_options.controller_name,
      flags.get_bool("nginx-annotations"), flags.get_bool("enable-compression"),
      class_options.default_backend_service};
  translate_options.gateway_controller_name = class_options.gateway_controller_name;
  translate_options.gateway_http_port = gateway_port(flags, "gateway-http-port");
  translate_options.gateway_https_port = gateway_port(flags, "gateway-https-port");
  if (translate_options.gateway_http_port == 0 || translate_options.gateway_https_port == 0) {
    std::cerr << "tidegate-controller: --gateway-http-port and --gateway-https-port: 1-65535\n";
    return 2;
  }
  if (!gateway_listener_ports(flags, translate_options)) {
    std::cerr << "tidegate-controller: --gateway-listener-ports: FROM-TO, 1024 <= FROM <= TO <= "
                 "65535\n";
    return 2;
  }
  ProblemLog problems;
  auto build = [&]() {
    auto loaded = source::load_manifest_dir(dir);
    std::set<std::string> lines;
    for (const auto& e : loaded.errors) lines.insert(e.message);
    auto store = store::build_store(loaded, class_options);
    auto result = translate::translate(store, translate_options);
    for (const auto& d : result.diagnostics) lines.insert(translate::to_string(d));
    problems.report(std::move(lines));
    return std::move(result.config);
  };

  push::Pusher pusher(std::make_unique<push::UnixTransport>(flags.get("dataplane-socket")));
  sync::SyncLoop loop(build, pusher);
  source::ManifestWatcher watcher(dir);
  if (!watcher.start([&] { loop.notify(); }, &error)) {
    TG_ERROR("controller", error);
    return 1;
  }
  TG_INFO("controller", "watching " << dir << " for class " << class_options.ingress_class
                                    << "; data plane at " << flags.get("dataplane-socket"));
  g_loop = &loop;
  install_signal_handlers();
  loop.run();
  g_loop = nullptr;
  watcher.stop();
  TG_INFO("controller", "stopped");
  return 0;
}
