// Client certificates (auth-tls-*; docs/tls.md, "Client certificates"): the request's host asks
// for them, the connection's handshake did (tls/client_auth.h); here each request is answered
// from the handshake's verdict as nginx answers it, and the backend hears the verdict in the
// ssl-client-* fields ingress-nginx sets.

#include <array>

#include <re2/re2.h>

#include "log/log.h"
#include "server/exchange.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

namespace {

// The fields the backend reads the verdict from; a client's own are removed.
constexpr std::string_view kVerifyField = "ssl-client-verify";
constexpr std::string_view kSubjectField = "ssl-client-subject-dn";
constexpr std::string_view kIssuerField = "ssl-client-issuer-dn";
constexpr std::string_view kCertificateField = "ssl-client-cert";

// A plain-HTTP request (no handshake, so no certificate) to a host where one is optional.
const tls::PeerCertificate::Verdict kNoCertificate{};

}  // namespace

bool Exchange::check_client_certificate(const RequestTarget& target) {
  // The host lower-cased without a trailing dot, on the stack (every request to a server with
  // client certificates or passthrough hosts looks it up).
  const std::string_view named = host_without_port(target.host);
  std::array<char, 256> buffer;
  if (named.size() > buffer.size()) return true;  // longer than any host name: no TLS entry
  size_t n = 0;
  for (char c : named) buffer[n++] = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n > 0 && buffer[n - 1] == '.') --n;
  const std::string_view host(buffer.data(), n);
  const runtime::TlsEntry* entry = snapshot_->find_tls(host);
  if (entry == nullptr) return true;
  // HTTP/1.x clients are closed after a 421 so that their next request opens a new connection
  // (HTTP/2 clients do that for the stream alone).
  const bool close_misdirected = downstream_.http_version() < 20 || !downstream_.request_complete();
  if (entry->passthrough_upstream != nullptr) {
    // A passed-through host's TLS connections never end here: one that did was made for another
    // name (or without SNI), and must not reach the host's routes around the backend's TLS.
    if (!downstream_.is_tls()) return true;
    respond(421, "misdirected request: this host's TLS connections are passed through\n",
            close_misdirected);
    return false;
  }
  if (!entry->client_auth) return true;
  const tls::CompiledClientAuth& auth = *entry->client_auth;
  if (auth.broken()) {
    // The translator could not use the settings (its Event says why): closed, not open.
    respond(503, "client certificate settings of this host are broken\n",
            !downstream_.request_complete());
    return false;
  }
  const model::ClientAuth& settings = auth.model();
  const bool required = settings.verify == model::ClientVerify::kOn;
  const bool close = !downstream_.request_complete();
  // 400s as nginx words them (its 495 and 496), or the error page.
  auto refuse = [&](std::string_view text) {
    TG_DEBUG("tls", "client certificate refused for "
                        << host << " from " << downstream_.peer_address() << ": " << text);
    if (!settings.error_page.empty()) {
      respond(302, "client certificate error\n", close, settings.error_page);
      return false;
    }
    grpc_code_ = GrpcStatus::kUnauthenticated;
    respond(400, text, close);
    return false;
  };

  const tls::PeerCertificate::Verdict* verdict = &kNoCertificate;
  if (!downstream_.is_tls()) {
    // No handshake: no certificate (ssl-redirect sends TLS hosts to HTTPS before this).
    if (required) return refuse("a client certificate is required: use HTTPS\n");
  } else {
    tls::PeerCertificate* peer = downstream_.peer_certificate();
    const tls::CompiledClientAuth* asked = peer != nullptr ? peer->asked_under() : nullptr;
    if (asked == nullptr || asked->key() != auth.key()) {
      // This connection's handshake did not ask for this host's certificate: it was made for
      // another name (SNI), without SNI, or before the host's settings changed. A client
      // retries on a new connection (RFC 9110 15.5.20), as nginx answers such requests.
      respond(421, "misdirected request: this connection was not made for this host\n",
              close_misdirected);
      return false;
    }
    verdict = &peer->verdict();
    if (!verdict->presented) {
      if (required) return refuse("No required SSL certificate was sent\n");
    } else if (verdict->verify_result != X509_V_OK &&
               !(settings.verify == model::ClientVerify::kOptionalNoCa &&
                 tls::verify_error_is_optional(verdict->verify_result))) {
      return refuse("The SSL certificate error\n");
    }
  }
  if (const re2::RE2* pattern = auth.match_cn();
      pattern != nullptr && !re2::RE2::PartialMatch(verdict->subject_dn, *pattern)) {
    grpc_code_ = GrpcStatus::kPermissionDenied;
    respond(403, "client certificate unauthorized\n", close);
    return false;
  }
  client_auth_ = &auth;
  client_verdict_ = verdict;
  client_peer_ = downstream_.is_tls() ? downstream_.peer_certificate() : nullptr;
  return true;
}

void Exchange::add_client_certificate_fields(RequestMessage& req) const {
  for (std::string_view name : {kVerifyField, kSubjectField, kIssuerField, kCertificateField}) {
    req.erase(name);
  }
  const tls::PeerCertificate::Verdict& v = *client_verdict_;
  req.set(kVerifyField, tls::verify_header_value(v));
  if (!v.subject_dn.empty()) req.set(kSubjectField, v.subject_dn);
  if (!v.issuer_dn.empty()) req.set(kIssuerField, v.issuer_dn);
  // The request's host decides (not the settings the handshake ran under, which another host
  // with the same CA bundle may have set).
  if (client_auth_->model().pass_certificate && client_peer_ != nullptr) {
    if (const std::string& pem = client_peer_->escaped_pem(); !pem.empty()) {
      req.set(kCertificateField, pem);
    }
  }
}

}  // namespace tidegate::dataplane::server
