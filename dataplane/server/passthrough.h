#pragma once
// ssl-passthrough (docs/tls.md, "Passthrough"): a TLS connection whose ClientHello names a
// passthrough host is not terminated. Its bytes (the ClientHello first, as it arrived) are
// relayed to an endpoint of the host's upstream and the answer back, byte for byte, until either
// side closes or nothing moves for Limits::passthrough_idle_timeout. Like a WebSocket tunnel it
// holds no snapshot: no configuration change closes it.

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "runtime/io_types.h"
#include "runtime/snapshot.h"
#include "server/limits.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

class PassthroughConnection final : public SessionBase,
                                    public std::enable_shared_from_this<PassthroughConnection> {
 public:
  // Takes over a client connection the HTTPS listener accepted (already counted in the worker,
  // which `counted` keeps counting: no double count, no gap). `received`: what the client sent so
  // far (its ClientHello); `endpoints`: the upstream's, tried from a random one on, at most
  // Limits::max_upstream_attempts of them.
  PassthroughConnection(Worker& worker, runtime::Stream client, std::string received,
                        std::vector<runtime::Endpoint> endpoints, std::string peer,
                        std::string upstream);
  ~PassthroughConnection() override;
  void start();
  void drain() override {}  // a relay has no request boundary: it runs until close_now()
  void close_now() override { close(); }

 private:
  using error_code = boost::system::error_code;
  void connect(size_t attempt);
  void on_connect(size_t attempt, error_code ec);
  // Relays one direction (client to upstream, or back) until it ends or fails.
  void relay(bool from_client);
  // One direction's source ended (EOF): the other side's sending half is shut (a half-close goes
  // on as one); the connection closes once both directions ended.
  void direction_ended(bool client_side);
  // Idle: a watchdog, not Beast's per-operation timeouts, which a read pending in a quiet
  // direction would hit while bytes flow the other way.
  void arm_idle_check();
  void close();

  Worker& worker_;
  runtime::Stream client_;
  runtime::Stream upstream_;
  std::string received_;
  std::vector<runtime::Endpoint> endpoints_;
  std::string peer_;
  std::string upstream_name_;
  size_t first_ = 0;
  bool relaying_ = false;
  bool closed_ = false;
  bool client_ended_ = false;    // the client sent EOF
  bool upstream_ended_ = false;  // the upstream sent EOF
  std::chrono::steady_clock::time_point last_active_;
  boost::asio::steady_timer idle_timer_;
  std::array<char, Limits::kRelayBufferBytes> up_buffer_;
  std::array<char, Limits::kRelayBufferBytes> down_buffer_;
};

}  // namespace tidegate::dataplane::server
