#include "upstream/http1_upstream.h"

#include "tls/upstream_context.h"

namespace tidegate::dataplane::upstream {

namespace asio = boost::asio;

void Http1Upstream::connected() {
  error_code opt_ec;
  connection_->stream.socket().set_option(asio::ip::tcp::no_delay(true), opt_ec);
}

void Http1Upstream::prepare_tls(const runtime::UpstreamState& up) {
  auto& c = *connection_;
  c.tls = std::make_unique<TlsStream>(std::move(c.stream), *up.tls_context);
  tls::set_upstream_identity(c.tls->native_handle(), up.tls_server_name, up.tls_verify);
}

void Http1Upstream::release(Pool& pool, const runtime::Snapshot* current) {
  const bool reusable = connection_ && response_ && response_->keep_alive() &&
                        response_->is_done() && out_.done() && connection_->buffer.size() == 0 &&
                        current != nullptr &&
                        current->all_endpoints.contains(connection_->endpoint);
  if (reusable) {
    connection_->reused = false;
    // A connection whose reads were widened (widen_reads) goes back to the usual buffer.
    if (connection_->buffer.capacity() > server::Limits::kUpstreamReadBufferBytes) {
      connection_->buffer.shrink_to_fit();
      connection_->buffer.reserve(server::Limits::kUpstreamReadBufferBytes);
    }
    pool.put(std::move(connection_));
  }
  connection_.reset();
}

}  // namespace tidegate::dataplane::upstream
