#include "kube/client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <cstdlib>

#include <cpprest/containerstream.h>
#include <cpprest/http_client.h>
#include <pplx/threadpool.h>

#include "log/log.h"

namespace tidegate::controller::kube {

namespace http = web::http;
namespace client = web::http::client;

namespace {

// The most room reserved for a list page from the size of the page before it (64 MiB: pages of
// 5,000 large objects; a bigger page still grows as it arrives).
constexpr size_t kMaxReservedBody = size_t{64} << 20;

// cpprestsdk runs its completions on a shared pool of 40 threads unless told otherwise before
// first use; a handful is plenty for seven connections and keeps the controller's footprint small.
void init_thread_pool() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      crossplat::threadpool::initialize_with_threads(4);
    } catch (const std::exception&) {
      // Already initialised by someone else: fine.
    }
  });
}

std::string describe(const std::exception& e) {
  std::string what = e.what();
  return what.empty() ? "request failed" : what;
}

class RestLineStream : public LineStream {
 public:
  RestLineStream(http::http_response response, pplx::cancellation_token_source cts)
      : response_(std::move(response)), body_(response_.body()), cts_(std::move(cts)) {}
  ~RestLineStream() override { cancel(); }

  bool next_line(std::string* line, std::string* error) override {
    error->clear();
    try {
      for (;;) {
        concurrency::streams::container_buffer<std::string> buf;
        size_t n = body_.read_line(buf).get();
        if (n == 0 && body_.is_eof()) return false;
        *line = std::move(buf.collection());
        if (!line->empty()) return true;
        // Blank lines carry nothing; keep reading.
      }
    } catch (const std::exception& e) {
      *error = cts_.get_token().is_canceled() ? "" : describe(e);
      return false;
    }
  }

  void cancel() override { cts_.cancel(); }

 private:
  http::http_response response_;
  concurrency::streams::istream body_;
  pplx::cancellation_token_source cts_;
};

}  // namespace

bool skip_system_ca_bundle(const ClusterConfig& config) {
  if (config.ca_pem.empty() || config.insecure_skip_tls_verify) return false;
  // Also over an SSL_CERT_FILE set by the operator (or the image): with the cluster's CA, the
  // store that file fills is replaced anyway (http_client's context callback), and the
  // controller makes no other TLS connection and starts no other program.
  return ::setenv("SSL_CERT_FILE", "/dev/null", 1) == 0;
}

struct RestClient::Impl {
  Impl(ClusterConfig c, RestClientOptions o) : config(std::move(c)), options(o) {}

  ClusterConfig config;
  RestClientOptions options;
  std::mutex client_mu;
  std::unique_ptr<client::http_client> shared_client;  // see http_client()

  client::http_client_config client_config() const {
    client::http_client_config cfg;
    // An idle timeout in cpprestsdk's ASIO client: restarted by every read, so it ends a silent
    // watch, not a long one.
    cfg.set_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options.idle_timeout));
    cfg.set_validate_certificates(!config.insecure_skip_tls_verify);
    cfg.set_ssl_context_callback([ca = config.ca_pem, cert = config.client_cert_pem,
                                  key = config.client_key_pem](boost::asio::ssl::context& ctx) {
      // Throws on bad PEM; cpprestsdk turns that into a failed request, which we report.
      if (!ca.empty()) {
        // The cluster's CA alone, as client-go trusts a kubeconfig's or the service account's
        // CA: cpprestsdk has already loaded the system's bundle into this context, and with it
        // any public CA could vouch for the API server. An empty store replaces that one.
        if (X509_STORE* only_ours = X509_STORE_new()) {
          SSL_CTX_set_cert_store(ctx.native_handle(), only_ours);
        }
        ctx.add_certificate_authority(boost::asio::buffer(ca.data(), ca.size()));
      }
      if (!cert.empty()) {
        ctx.use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()));
        ctx.use_private_key(boost::asio::buffer(key.data(), key.size()),
                            boost::asio::ssl::context::pem);
      }
    });
    return cfg;
  }

  http::http_request make_request(const std::string& method, const std::string& path,
                                  const char* accept = "application/json") const {
    http::http_request req(method);
    req.set_request_uri(path);
    req.headers().add("Accept", accept);
    req.headers().add("User-Agent", "tidegate-controller");
    std::string error;
    std::string token = current_token(config, &error);
    if (!error.empty()) TG_WARN("kube", error);
    if (!token.empty()) req.headers().add("Authorization", "Bearer " + token);
    return req;
  }

  // One http_client for every request, so that its pool of keep-alive connections is reused: a
  // new TLS connection costs cpprestsdk a new SSL context loaded with the system's CA bundle (and
  // ours with our CA and client certificate), 10-20 ms of CPU with OpenSSL 3; at 10,000 objects
  // per kind a start lists 60 pages, and that was about half of the controller's CPU
  // (docs/benchmarks.md, "Start-up at scale"). A pooled connection that the server closed meanwhile
  // (an API server restart) is retried by cpprestsdk on a new one; idle ones are dropped after 30
  // to 60 s. http_client is safe to share between threads.
  client::http_client& http_client() {
    std::lock_guard lock(client_mu);
    if (!shared_client) {
      shared_client = std::make_unique<client::http_client>(config.server, client_config());
    }
    return *shared_client;
  }

  Response run(http::http_request req, size_t expected_bytes = 0) {
    Response out;
    try {
      // The bytes as they come (JSON or protobuf), written by the client straight into the
      // string: read from the response's own stream instead, they were buffered in blocks of
      // cpprestsdk's, then copied out and freed (about 30 ms of the controller's CPU in a start
      // with 10,000 objects of each kind: docs/benchmarks.md, "Start-up at scale").
      concurrency::streams::container_buffer<std::string> body;
      // Capped: a hint, not a promise (a page is bounded by its item count, not its bytes).
      body.collection().reserve(std::min<size_t>(expected_bytes, kMaxReservedBody));
      req.set_response_stream(
          concurrency::streams::ostream(concurrency::streams::streambuf<uint8_t>(body)));
      http::http_response resp = http_client().request(std::move(req)).get();
      out.status = resp.status_code();
      out.content_type = resp.headers().content_type();
      resp.content_ready().get();
      out.body = std::move(body.collection());
    } catch (const std::exception& e) {
      out.status = 0;
      out.error = describe(e);
    }
    return out;
  }
};

RestClient::RestClient(ClusterConfig config, RestClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(config), options)) {
  init_thread_pool();
}

RestClient::~RestClient() = default;

Response RestClient::get(const std::string& path_and_query) {
  return impl_->run(impl_->make_request(http::methods::GET, path_and_query));
}

Response RestClient::get_list(const std::string& path_and_query, bool protobuf,
                              size_t expected_bytes) {
  // Protobuf first, JSON if the server cannot (an aggregated API, a custom resource).
  static constexpr const char* kProtobufOrJson =
      "application/vnd.kubernetes.protobuf, application/json;q=0.9";
  return impl_->run(impl_->make_request(http::methods::GET, path_and_query,
                                        protobuf ? kProtobufOrJson : "application/json"),
                    expected_bytes);
}

Response RestClient::send(const std::string& method, const std::string& path,
                          const std::string& body, const std::string& content_type) {
  auto req = impl_->make_request(method, path);
  req.set_body(body, content_type);
  return impl_->run(std::move(req));
}

std::unique_ptr<LineStream> RestClient::stream(const std::string& path_and_query,
                                               Response* failed) {
  try {
    pplx::cancellation_token_source cts;
    http::http_response resp =
        impl_->http_client()
            .request(impl_->make_request(http::methods::GET, path_and_query), cts.get_token())
            .get();
    if (resp.status_code() != http::status_codes::OK) {
      failed->status = resp.status_code();
      failed->body = resp.extract_utf8string(true).get();
      return nullptr;
    }
    // The response keeps the connection (and the client's internals) alive while we read; the
    // connection goes back to the pool when the watch ends, unless it was cancelled.
    return std::make_unique<RestLineStream>(std::move(resp), std::move(cts));
  } catch (const std::exception& e) {
    failed->status = 0;
    failed->error = describe(e);
    return nullptr;
  }
}

}  // namespace tidegate::controller::kube
