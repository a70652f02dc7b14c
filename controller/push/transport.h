#pragma once
// The seam between the pusher's logic and the socket: one request, one answer.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "protocol/protocol.h"

namespace tidegate::controller::push {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual bool connected() const = 0;
  // Connects; returns false and sets *error when the peer is not there.
  virtual bool connect(std::string* error) = 0;
  virtual void close() = 0;
  // False once the peer has closed the connection (checked without blocking).
  virtual bool alive() = 0;
  // Sends `m` and waits for one answer. On any I/O error or timeout, closes and returns nullopt.
  virtual std::optional<protocol::Message> call(const protocol::Message& m,
                                                std::chrono::milliseconds timeout,
                                                std::string* error) = 0;
  // call(Snapshot{version, config}) without the message's copy of `config` (the real transport
  // encodes straight from it: protocol::encode_snapshot_frame).
  virtual std::optional<protocol::Message> call_snapshot(uint64_t version,
                                                         const model::Config& config,
                                                         std::chrono::milliseconds timeout,
                                                         std::string* error) {
    return call(protocol::Snapshot{version, config}, timeout, error);
  }
};

// The real one: a Unix stream socket to the data plane's control socket.
class UnixTransport : public Transport {
 public:
  explicit UnixTransport(std::string path) : path_(std::move(path)) {}
  ~UnixTransport() override { close(); }
  bool connected() const override { return fd_ >= 0; }
  bool connect(std::string* error) override;
  void close() override;
  bool alive() override;
  std::optional<protocol::Message> call(const protocol::Message& m,
                                        std::chrono::milliseconds timeout,
                                        std::string* error) override;
  std::optional<protocol::Message> call_snapshot(uint64_t version, const model::Config& config,
                                                 std::chrono::milliseconds timeout,
                                                 std::string* error) override;

 private:
  // Sends the frame, waits for one answer.
  std::optional<protocol::Message> exchange(std::string frame, bool snapshot,
                                            std::chrono::steady_clock::time_point started,
                                            std::chrono::milliseconds timeout, std::string* error);
  std::string path_;
  int fd_ = -1;
  protocol::FrameReader reader_;
};

}  // namespace tidegate::controller::push
