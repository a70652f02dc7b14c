// tidegate-controller: reads Kubernetes objects (a folder of manifests for now), translates them
// into the routing model and keeps the data plane in sync over its control socket.

#include <signal.h>

#include <filesystem>
#include <iostream>
#include <set>
#include <thread>

#include "cli/flags.h"
#include "log/log.h"
#include "push/pusher.h"
#include "source/manifest_loader.h"
#include "source/manifest_watcher.h"
#include "store/store.h"
#include "sync/sync_loop.h"
#include "translate/translate.h"

using namespace tidegate;
using namespace tidegate::controller;

namespace {

sync::SyncLoop* g_loop = nullptr;

void on_signal(int) {
  // Only async-signal-safe work here: a flag the loop sees; see main().
  if (g_loop) g_loop->stop();
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

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  cli::Flags flags;
  flags.define("dataplane-socket", "/tmp/tidegate-control.sock", "the data plane's control socket");
  flags.define("manifests", "", "folder of Kubernetes manifests to read and watch");
  flags.define("kubeconfig", "", "kubeconfig of the cluster to watch (not built yet)");
  flags.define("ingress-class", std::string(store::kDefaultIngressClass), "IngressClass name to serve");
  flags.define("controller-name", std::string(store::kDefaultControllerName),
               "spec.controller value of our IngressClass");
  flags.define("log-level", "info", "debug, info, warn or error");
  flags.define_bool("help", "print this help");
  std::string error;
  if (!flags.parse(argc, argv, &error)) {
    std::cerr << "tidegate-controller: " << error << "\n" << flags.usage("tidegate-controller");
    return 2;
  }
  if (flags.get_bool("help")) {
    std::cout << flags.usage("tidegate-controller");
    return 0;
  }
  const auto& level = flags.get("log-level");
  log::set_level(level == "debug"  ? log::Level::kDebug
                 : level == "warn" ? log::Level::kWarn
                 : level == "error" ? log::Level::kError
                                    : log::Level::kInfo);
  const std::string dir = flags.get("manifests");
  if (dir.empty()) {
    std::cerr << "tidegate-controller: give a source: --manifests DIR (the Kubernetes API source "
                 "is not built yet)\n";
    return 2;
  }
  if (!std::filesystem::is_directory(dir)) {
    std::cerr << "tidegate-controller: --manifests " << dir << ": not a folder\n";
    return 2;
  }

  store::ClassOptions class_options{flags.get("ingress-class"), flags.get("controller-name")};
  translate::TranslateOptions translate_options{class_options.ingress_class,
                                                class_options.controller_name};
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
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  loop.run();
  g_loop = nullptr;
  watcher.stop();
  TG_INFO("controller", "stopped");
  return 0;
}
