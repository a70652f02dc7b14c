// tidegate-dataplane: the reverse proxy. Serves HTTP on --http-listen with N workers, takes
// configuration from the controller over --control-socket, never reloads.

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>

#include "admin/admin_server.h"
#include "cli/flags.h"
#include "control/control_server.h"
#include "log/log.h"
#include "model/sendfile.h"
#include "observability/access_log.h"
#include "observability/metrics.h"
#include "runtime/publisher.h"
#include "server/worker.h"
#include "tls/tls_context.h"

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace tidegate;

namespace {

bool resolve(const std::string& flag, const std::string& text, tcp::endpoint* out) {
  auto hp = cli::parse_host_port(text);
  if (!hp) {
    std::cerr << "tidegate-dataplane: --" << flag << ": expected HOST:PORT, got \"" << text
              << "\"\n";
    return false;
  }
  std::string host = hp->host == "localhost" ? "127.0.0.1" : hp->host;
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) {
    std::cerr << "tidegate-dataplane: --" << flag << ": \"" << hp->host
              << "\" is not an IP address\n";
    return false;
  }
  *out = tcp::endpoint(addr, hp->port);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  cli::Flags flags;
  flags.define("control-socket", "/tmp/tidegate-control.sock",
               "Unix socket the controller connects to (created 0600)");
  flags.define("control-allowed-uids", "",
               "comma-separated UIDs besides our own that may connect to the control socket "
               "(checked with SO_PEERCRED)");
  flags.define("http-listen", "0.0.0.0:8080", "HTTP listener");
  flags.define("https-listen", "0.0.0.0:8443", "HTTPS listener");
  flags.define("default-ssl-certificate", "",
               "PEM certificate chain for names without a certificate (default: self-signed)");
  flags.define("default-ssl-key", "", "PEM private key of --default-ssl-certificate");
  flags.define("drain-timeout", "30", "seconds SIGTERM waits for requests and tunnels to finish");
  flags.define("admin-listen", "127.0.0.1:10254",
               "admin listener: /healthz, /readyz, /version, /metrics");
  flags.define("access-log", "json",
               "access log format: json, text or off (text: --access-log-format, or a default "
               "nginx-like line)");
  flags.define("access-log-format", "",
               "text access log template: literal text and variables ($remote_addr, ${status}, "
               "...; docs/observability.md); alone, it implies --access-log text");
  flags.define("access-log-fields", "",
               "JSON access log fields to write, in this order (comma-separated; default: time "
               "through service)");
  flags.define("metrics", "on",
               "per-request metrics on /metrics: on or off (off: only configuration series)");
  flags.define("access-log-socket", "stdout",
               "where access log lines go: stdout, unix:/path or tcp:HOST:PORT (a collector)");
  flags.define("access-log-queue-bytes", "1048576",
               "per-worker access log queue; lines that find it full are dropped and counted");
  flags.define("trusted-proxies", "",
               "CIDR list (commas or spaces) of proxies in front of Tidegate whose "
               "X-Forwarded-For names the client (ip_hash, $remote_addr, source ranges, rate "
               "limits); default none: the connection's peer is the client");
  flags.define("merge-slashes", "off",
               "on: runs of / in request paths become one before routing and forwarding "
               "(docs/proxy.md, \"Path normalization\")");
  flags.define("path-escaped-slashes", "keep",
               "%2F, %5C and \\ in request paths: keep (as they are, not separators), reject "
               "(400) or decode (to /)");
  flags.define("tls-profile", "intermediate",
               "TLS versions, ciphers and groups: intermediate (TLS 1.2 and 1.3) or modern (TLS "
               "1.3 only), Mozilla's profiles (docs/proxy.md, \"TLS profile\")");
  flags.define("http2", "on",
               "on: HTTPS offers HTTP/2 by ALPN (h2 before http/1.1); off: HTTP/1.1 only "
               "(docs/proxy.md, \"HTTP/2\")");
  flags.define("http2-cleartext", "on",
               "on: the HTTP port also speaks HTTP/2 to clients that start with its preface "
               "(prior knowledge; never Upgrade: h2c); only: the HTTP port speaks HTTP/2 alone "
               "(other bytes: closed); off: HTTP/1.1 alone");
  flags.define("http2-max-concurrent-streams", "128", "streams a client may have open at once");
  flags.define("http2-stream-window", "65536",
               "bytes of request body a stream may send ahead of the backend (its window)");
  flags.define("http2-connection-window", "1048576",
               "bytes of request body all streams of a connection may send ahead");
  flags.define("http2-max-frame-size", "16384", "largest frame payload accepted (16384..16777215)");
  flags.define("http2-max-header-list-size", "65536",
               "largest decoded request header list (HPACK size); larger gets 431");
  flags.define("client-send-timeout", "60",
               "seconds a response may make no progress towards the client (nginx's send_timeout; "
               "on HTTP/2 also a stream held by a window that stays shut)");
  flags.define("client-body-timeout", "60",
               "seconds between two reads of a request body (nginx's client_body_timeout); not "
               "for HTTP/2 streaming calls, whose idle limit is the route's proxy-read-timeout");
  flags.define("client-header-timeout", "10",
               "seconds a request head may take from its first byte (on a new connection: from "
               "the accept); shortened under connection pressure");
  flags.define("keepalive-timeout", "60",
               "seconds an idle keep-alive connection waits for the next request; shortened "
               "under connection pressure");
  flags.define("max-connections", "0",
               "client connections in all, split between the workers (0: three quarters of the "
               "open-files limit, which is raised to its hard limit at start; docs/proxy.md, "
               "\"Overload\")");
  flags.define("cache-size-mb", "64",
               "memory of the response cache (enable-cache routes) in MiB, shared out among the "
               "workers (each keeps its own shard)");
  flags.define("cache-max-item-kb", "1024",
               "largest response body the cache stores, in KiB; larger ones are passed through");
  flags.define("x-sendfile-roots", "",
               "directories (comma-separated) within which routes' x-sendfile-directories may "
               "lie; empty: X-Sendfile is off (docs/annotations.md, \"X-Sendfile\")");
  flags.define("workers", std::to_string(std::max(1u, std::thread::hardware_concurrency())),
               "worker threads");
  if (int exit_code = cli::parse_command_line(flags, argc, argv, "tidegate-dataplane");
      exit_code >= 0) {
    return exit_code;
  }
  std::string error;
  int workers = std::atoi(flags.get("workers").c_str());
  if (workers < 1 || workers > 256) {
    std::cerr << "tidegate-dataplane: --workers must be between 1 and 256\n";
    return 2;
  }
  tcp::endpoint http_at, https_at, admin_at;
  if (!resolve("http-listen", flags.get("http-listen"), &http_at) ||
      !resolve("https-listen", flags.get("https-listen"), &https_at) ||
      !resolve("admin-listen", flags.get("admin-listen"), &admin_at)) {
    return 2;
  }

  dataplane::observability::AccessLogOptions log_options;
  {
    auto given = [&flags](const char* name) -> std::optional<std::string_view> {
      if (!flags.is_set(name)) return std::nullopt;
      return flags.get(name);
    };
    auto layout = dataplane::observability::access_log_layout_from_flags(
        given("access-log"), given("access-log-format"), given("access-log-fields"), &error);
    if (!layout) {
      std::cerr << "tidegate-dataplane: " << error << "\n";
      return 2;
    }
    log_options.layout = std::move(*layout);
    auto destination =
        dataplane::observability::parse_log_destination(flags.get("access-log-socket"), &error);
    if (!destination) {
      std::cerr << "tidegate-dataplane: --access-log-socket: " << error << "\n";
      return 2;
    }
    log_options.destination = *destination;
    long long queue = std::atoll(flags.get("access-log-queue-bytes").c_str());
    if (queue < 1 || queue > (1LL << 30)) {
      std::cerr << "tidegate-dataplane: --access-log-queue-bytes must be between 1 and 2^30\n";
      return 2;
    }
    log_options.queue_bytes = static_cast<size_t>(queue);
  }

  if (flags.get("metrics") != "on" && flags.get("metrics") != "off") {
    std::cerr << "tidegate-dataplane: --metrics must be on or off\n";
    return 2;
  }
  const bool request_metrics = flags.get("metrics") == "on";

  dataplane::ratelimit::CidrSet trusted_proxies;
  if (!flags.get("trusted-proxies").empty()) {
    auto parsed = dataplane::ratelimit::CidrSet::parse(flags.get("trusted-proxies"), &error);
    if (!parsed) {
      std::cerr << "tidegate-dataplane: --trusted-proxies: " << error << "\n";
      return 2;
    }
    trusted_proxies = std::move(*parsed);
  }

  int drain_seconds = std::atoi(flags.get("drain-timeout").c_str());
  if (drain_seconds < 0) {
    std::cerr << "tidegate-dataplane: --drain-timeout must be >= 0\n";
    return 2;
  }

  // The default certificate, and the context every TLS connection starts with; SNI may switch a
  // connection to a certificate of its own (Worker::on_server_name).
  std::string default_cert, default_key;
  if (flags.is_set("default-ssl-certificate") != flags.is_set("default-ssl-key")) {
    std::cerr << "tidegate-dataplane: give both --default-ssl-certificate and --default-ssl-key\n";
    return 2;
  }
  if (flags.is_set("default-ssl-certificate")) {
    std::ifstream c(flags.get("default-ssl-certificate")), k(flags.get("default-ssl-key"));
    std::stringstream cs, ks;
    cs << c.rdbuf();
    ks << k.rdbuf();
    default_cert = cs.str();
    default_key = ks.str();
  } else if (!dataplane::tls::generate_self_signed(&default_cert, &default_key, &error)) {
    TG_ERROR("dataplane", error);
    return 1;
  }
  dataplane::tls::ServerSettings tls_settings;
  tls_settings.http2 = flags.get("http2") == "on";  // checked with the other HTTP/2 flags below
  if (!dataplane::tls::parse_tls_profile(flags.get("tls-profile"), &tls_settings.profile)) {
    std::cerr << "tidegate-dataplane: --tls-profile must be intermediate or modern\n";
    return 2;
  }
  tls_settings.ticket_keys = dataplane::tls::random_ticket_keys();
  auto default_ctx =
      dataplane::tls::make_server_context(default_cert, default_key, tls_settings, &error);
  if (!default_ctx) {
    TG_ERROR("dataplane", "default certificate: " << error);
    return 1;
  }
  SSL_CTX_set_tlsext_servername_callback(default_ctx.get(),
                                         dataplane::server::Worker::on_server_name);
  SSL_CTX_set_client_hello_cb(default_ctx.get(), dataplane::server::Worker::on_client_hello,
                              nullptr);
  asio::ssl::context tls_context(default_ctx.release());  // takes ownership

  asio::io_context control_io{1};
  dataplane::runtime::Publisher publisher(static_cast<size_t>(workers));
  // Per-worker shards and queues; the request path reaches them through the worker's id
  // (metrics.worker(id), access_log.producer(id)). Scrapes run on the control thread.
  dataplane::observability::Metrics metrics(static_cast<size_t>(workers));
  dataplane::observability::AccessLog access_log(static_cast<size_t>(workers), log_options);
  metrics.add_source([&access_log](auto& out) { access_log.append_metrics(out); });
  metrics.add_source([&publisher](auto& out) {
    dataplane::observability::append_snapshot_metrics(publisher.current().get(), out);
  });
  dataplane::server::Limits limits;
  if (flags.get("merge-slashes") != "on" && flags.get("merge-slashes") != "off") {
    std::cerr << "tidegate-dataplane: --merge-slashes must be on or off\n";
    return 2;
  }
  limits.request_rules.path.merge_slashes = flags.get("merge-slashes") == "on";
  if (flags.get("http2") != "on" && flags.get("http2") != "off") {
    std::cerr << "tidegate-dataplane: --http2 must be on or off\n";
    return 2;
  }
  limits.http2.enabled = flags.get("http2") == "on";
  const std::string cleartext = flags.get("http2-cleartext");
  if (cleartext != "on" && cleartext != "off" && cleartext != "only") {
    std::cerr << "tidegate-dataplane: --http2-cleartext must be on, off or only\n";
    return 2;
  }
  if (cleartext == "only" && !limits.http2.enabled) {
    std::cerr << "tidegate-dataplane: --http2-cleartext only needs --http2 on\n";
    return 2;
  }
  limits.http2.prior_knowledge = cleartext != "off" && limits.http2.enabled;
  limits.http2.prior_knowledge_only = cleartext == "only";
  struct Http2Setting {
    const char* name;
    uint32_t* out;
    long min, max;
  };
  for (const Http2Setting& setting :
       {Http2Setting{"http2-max-concurrent-streams", &limits.http2.max_concurrent_streams, 1,
                     10000},
        Http2Setting{"http2-stream-window", &limits.http2.initial_stream_window, 1024, 2147483647},
        Http2Setting{"http2-connection-window", &limits.http2.connection_window, 65535, 2147483647},
        Http2Setting{"http2-max-frame-size", &limits.http2.max_frame_size, 16384, 16777215},
        Http2Setting{"http2-max-header-list-size", &limits.http2.max_header_list_size, 1024,
                     16 * 1024 * 1024}}) {
    const std::string& text = flags.get(setting.name);
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < setting.min || value > setting.max) {
      std::cerr << "tidegate-dataplane: --" << setting.name << " must be between " << setting.min
                << " and " << setting.max << "\n";
      return 2;
    }
    *setting.out = static_cast<uint32_t>(value);
  }
  for (auto [name, out] : {std::pair{"client-header-timeout", &limits.client_header_timeout},
                           std::pair{"client-body-timeout", &limits.client_body_timeout},
                           std::pair{"keepalive-timeout", &limits.keepalive_timeout},
                           std::pair{"client-send-timeout", &limits.client_send_timeout}}) {
    const long seconds = std::atol(flags.get(name).c_str());
    if (seconds < 1 || seconds > 24 * 3600) {
      std::cerr << "tidegate-dataplane: --" << name << " must be between 1 and 86400 seconds\n";
      return 2;
    }
    *out = std::chrono::seconds(seconds);
  }
  {
    // Every connection costs a file descriptor (two while it is proxied): take the hard limit.
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      setrlimit(RLIMIT_NOFILE, &files);
      getrlimit(RLIMIT_NOFILE, &files);
    }
    const long long given = std::atoll(flags.get("max-connections").c_str());
    if (given < 0) {
      std::cerr << "tidegate-dataplane: --max-connections must be 0 (automatic) or more\n";
      return 2;
    }
    const unsigned long long open_files =
        files.rlim_cur == RLIM_INFINITY ? 1'000'000 : files.rlim_cur;
    const unsigned long long total =
        given > 0 ? static_cast<unsigned long long>(given) : open_files * 3 / 4;
    limits.max_connections =
        std::max<size_t>(1, static_cast<size_t>(total) / static_cast<size_t>(workers));
    TG_INFO("dataplane", "connection limit "
                             << limits.max_connections * static_cast<size_t>(workers) << " ("
                             << limits.max_connections << " per worker; open-files limit "
                             << open_files << ")");
  }
  {
    const long long cache_mb = std::atoll(flags.get("cache-size-mb").c_str());
    const long long item_kb = std::atoll(flags.get("cache-max-item-kb").c_str());
    if (cache_mb < 1 || cache_mb > 1'048'576 || item_kb < 1 || item_kb > 1'048'576) {
      std::cerr << "tidegate-dataplane: --cache-size-mb and --cache-max-item-kb must be 1 to "
                   "1048576\n";
      return 2;
    }
    limits.cache_bytes_per_worker =
        static_cast<size_t>(cache_mb) * 1024 * 1024 / static_cast<size_t>(workers);
    limits.cache_max_item_bytes = static_cast<size_t>(item_kb) * 1024;
  }
  for (std::string_view rest = flags.get("x-sendfile-roots"); !rest.empty();) {
    const size_t comma = rest.find(',');
    std::string root(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    root.erase(0, root.find_first_not_of(' '));
    root.erase(root.find_last_not_of(' ') + 1);
    if (root.empty()) continue;
    if (auto why = tidegate::model::check_sendfile_directory(root)) {
      std::cerr << "tidegate-dataplane: --x-sendfile-roots: \"" << root << "\" " << *why << "\n";
      return 2;
    }
    limits.sendfile_roots.push_back(std::move(root));
  }
  if (!dataplane::router::parse_escaped_slashes(flags.get("path-escaped-slashes"),
                                                &limits.request_rules.path.escaped_slashes)) {
    std::cerr << "tidegate-dataplane: --path-escaped-slashes must be keep, reject or decode\n";
    return 2;
  }
  std::vector<uid_t> control_uids;
  if (!dataplane::control::parse_uid_list(flags.get("control-allowed-uids"), &control_uids,
                                          &error)) {
    std::cerr << "tidegate-dataplane: --control-allowed-uids: " << error << "\n";
    return 2;
  }
  std::vector<std::unique_ptr<dataplane::server::Worker>> pool;
  // Per-route data of the served routing table (metric label ids, compiled policy parts),
  // computed once per routing table on the control thread and handed to every worker with the
  // snapshot. The snapshot it came from is kept, so that its router's address cannot be reused
  // by a new router while the table is cached.
  struct RouteTableCache {
    std::shared_ptr<const dataplane::runtime::Snapshot> from;
    std::shared_ptr<const dataplane::server::RouteTable> table;
  };
  auto route_tables = std::make_shared<RouteTableCache>();
  publisher.add_sink([route_tables, &metrics, request_metrics, workers](const auto& snap) {
    if (!snap) return;
    if (route_tables->from && route_tables->from->router.get() == snap->router.get()) return;
    std::vector<const dataplane::router::Router*> routers{snap->router.get()};
    for (const auto& [name, router] : snap->routing->listener_routers) {
      routers.push_back(router.get());
    }
    route_tables->table = std::make_shared<dataplane::server::RouteTable>(
        routers, request_metrics ? &metrics : nullptr, static_cast<size_t>(workers));
    route_tables->from = snap;
  });
  tcp::endpoint bound = http_at, bound_tls = https_at;
  for (int i = 0; i < workers; ++i) {
    auto w = std::make_unique<dataplane::server::Worker>(static_cast<size_t>(i), limits,
                                                         &tls_context, tls_settings);
    boost::system::error_code ec;
    bound = w->listen(bound, ec);  // later workers bind the port the first one got
    if (ec) {
      TG_ERROR("dataplane", "cannot listen on " << http_at << ": " << ec.message());
      return 1;
    }
    bound_tls = w->listen_tls(bound_tls, ec);
    if (ec) {
      TG_ERROR("dataplane", "cannot listen on " << https_at << ": " << ec.message());
      return 1;
    }
    w->trust_proxies(trusted_proxies);
    w->observe(request_metrics ? &metrics.worker(static_cast<size_t>(i)) : nullptr,
               access_log.enabled() ? &access_log.producer(static_cast<size_t>(i)) : nullptr);
    publisher.add_sink([wp = w.get(), route_tables](auto snap) {
      wp->publish(std::move(snap), route_tables->table);
    });
    pool.push_back(std::move(w));
  }
  TG_INFO("dataplane", "http listening on " << bound << ", https on " << bound_tls << " with "
                                            << workers << " workers");

  dataplane::admin::AdminServer admin(control_io, publisher, &metrics);
  {
    boost::system::error_code ec;
    auto at = admin.listen(admin_at, ec);
    if (ec) {
      TG_ERROR("dataplane", "cannot listen on admin " << admin_at << ": " << ec.message());
      return 1;
    }
    TG_INFO("dataplane", "admin listening on " << at);
  }
  dataplane::control::ControlServer control(control_io, flags.get("control-socket"), publisher,
                                            &metrics.config(), control_uids);
  if (!control.listen(&error)) {
    TG_ERROR("dataplane", error);
    return 1;
  }
  TG_INFO("dataplane", "control socket " << flags.get("control-socket"));

  access_log.start();
  for (auto& w : pool) w->start();

  asio::signal_set signals(control_io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code, int sig) {
    // Graceful drain: stop accepting, let requests in flight finish, close idle connections,
    // give tunnels until the deadline. The controller connection closes at once; the admin port
    // stays until the end.
    TG_INFO("dataplane", "signal " << sig << ": draining (up to " << drain_seconds << " s)");
    control.stop();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(drain_seconds);
    for (auto& w : pool) w->drain(deadline);
    std::thread([&] {
      for (auto& w : pool) w->join();
      asio::post(control_io, [&] {
        admin.stop();
        control_io.stop();
      });
    }).detach();
  });
  control_io.run();
  for (auto& w : pool) w->join();
  access_log.stop();  // after the workers: flushes their last lines
  TG_INFO("dataplane", "stopped");
  return 0;
}
