#include "upstream/http1_upstream.h"

namespace tidegate::dataplane::upstream {

namespace asio = boost::asio;

void Http1Upstream::connected() {
  error_code opt_ec;
  connection_->stream.socket().set_option(asio::ip::tcp::no_delay(true), opt_ec);
}

void Http1Upstream::prepare_tls(const runtime::UpstreamState& up) {
  auto& c = *connection_;
  c.tls = std::make_unique<TlsStream>(std::move(c.stream), *up.tls_context);
  SSL* ssl = c.tls->native_handle();
  const std::string& name = up.tls_server_name;
  error_code not_ip;
  asio::ip::make_address(name, not_ip);
  // SNI carries host names only (RFC 6066 section 3); an IP address is verified as one.
  if (!name.empty() && not_ip) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (up.tls_verify && !name.empty()) {
    if (not_ip) {
      SSL_set1_host(ssl, name.c_str());
    } else {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
    }
  }
}

void Http1Upstream::release(Pool& pool, const runtime::Snapshot* current) {
  const bool reusable = connection_ && response_ && response_->keep_alive() &&
                        response_->is_done() && out_.done() && connection_->buffer.size() == 0 &&
                        current != nullptr &&
                        current->all_endpoints.contains(connection_->endpoint);
  if (reusable) {
    connection_->reused = false;
    pool.put(std::move(connection_));
  }
  connection_.reset();
}

}  // namespace tidegate::dataplane::upstream
