#pragma once
// The I/O half of the API client. ApiClient is the seam (the reflectors only see it); RestClient
// implements it on cpprestsdk. Every call is blocking and meant for a reflector's own thread;
// nothing throws (cpprestsdk does: it is caught here, at the edge).

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "kube/config.h"

namespace tidegate::controller::kube {

struct Response {
  int status = 0;  // 0: no HTTP response (connection refused, TLS failure, timeout, cancelled)
  std::string body;
  std::string error;           // transport error when status == 0
  std::string content_type{};  // the response's Content-Type ("" when none, or not given)
};

// One streaming response (a watch), read a line at a time.
class LineStream {
 public:
  virtual ~LineStream() = default;
  // The next line. false at the end of the stream (the server closed it, or cancel()) or on an
  // error, with *error set in the latter case (empty on a clean end).
  virtual bool next_line(std::string* line, std::string* error) = 0;
  // Any thread: ends a pending next_line().
  virtual void cancel() = 0;
};

class ApiClient {
 public:
  virtual ~ApiClient() = default;
  virtual Response get(const std::string& path_and_query) = 0;
  // A list page, asked for in Kubernetes' protobuf encoding (falling back to JSON) when
  // `protobuf`; the answer's content_type says which it is (kube/proto_reader.h). Clients
  // that speak JSON only (the tests' fakes) answer as get() does. `expected_bytes` is the
  // answer's likely size (the page before's) or 0: room for it is reserved up front, so that a
  // page of megabytes is not grown by copies (each a new range of memory to fault in).
  virtual Response get_list(const std::string& path_and_query, bool protobuf,
                            size_t expected_bytes) {
    (void)protobuf;
    (void)expected_bytes;
    return get(path_and_query);
  }
  // A GET whose body is read as it arrives. Returns nullptr and fills *failed when the response
  // is not a 200 (or there is none).
  virtual std::unique_ptr<LineStream> stream(const std::string& path_and_query,
                                             Response* failed) = 0;
  // A write (PUT, POST, PATCH) with a JSON (or merge-patch) body.
  virtual Response send(const std::string& method, const std::string& path, const std::string& body,
                        const std::string& content_type) = 0;
};

struct RestClientOptions {
  // No byte from the server for this long ends a request: the stalled-watch detector. Watches see
  // a bookmark about once a minute, so this is longer than that.
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(150)};
};

// When `config` names the cluster's CA, the system's CA bundle is never used (RestClient trusts
// that CA alone), yet cpprestsdk loads the bundle into every new TLS context it makes (OpenSSL 3
// decodes its ~140 certificates: about 25 ms of CPU per context, 14 contexts at start). This
// points OpenSSL's default file at /dev/null (SSL_CERT_FILE) so that load costs nothing. It
// changes the process's environment: call it once, before any thread starts. Returns whether it
// did (not without a CA). An SSL_CERT_FILE already set is overridden too: it would only fill the
// store that the cluster's CA replaces.
bool skip_system_ca_bundle(const ClusterConfig& config);

class RestClient : public ApiClient {
 public:
  RestClient(ClusterConfig config, RestClientOptions options = {});
  ~RestClient() override;
  Response get(const std::string& path_and_query) override;
  Response get_list(const std::string& path_and_query, bool protobuf,
                    size_t expected_bytes) override;
  std::unique_ptr<LineStream> stream(const std::string& path_and_query, Response* failed) override;
  Response send(const std::string& method, const std::string& path, const std::string& body,
                const std::string& content_type) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tidegate::controller::kube
