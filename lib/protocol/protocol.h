#pragma once
// The control protocol between the controller (client) and the data plane (server) over a Unix
// stream socket. See docs/control-protocol.md. Framing: a 4-byte big-endian payload length, then
// a JSON object. Every message carries "type".

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "model/model.h"

namespace tidegate::protocol {

inline constexpr int kProtocolVersion = 1;
// Largest frame either side accepts; a full snapshot of 10,000 hosts is a few MB.
inline constexpr uint32_t kMaxFrameBytes = 256u * 1024 * 1024;

// controller -> data plane, first message on a connection.
struct Hello {
  int protocol = kProtocolVersion;
  std::string node;  // free text, for logs
};
// data plane -> controller, answer to Hello.
struct HelloReply {
  int protocol = kProtocolVersion;
  uint64_t version = 0;  // version of the configuration the data plane is serving (0 = none)
};
// Replace everything.
struct Snapshot {
  uint64_t version = 0;
  model::Config config;
};
// Change the configuration at `base` into `version`. All or nothing.
struct DeltaMsg {
  uint64_t version = 0;
  uint64_t base = 0;
  model::Delta delta;
};
struct Ack {
  uint64_t version = 0;
};
struct Nack {
  uint64_t version = 0;
  std::string reason;
};

using Message = std::variant<Hello, HelloReply, Snapshot, DeltaMsg, Ack, Nack>;

// JSON text of a message (no frame header).
std::string encode_json(const Message& m);
// A frame: length header + JSON.
std::string encode_frame(const Message& m);
// The frame of Snapshot{version, config}, the same bytes as encode_frame's, written piece by
// piece: neither a copy of the Config nor a JSON document of it all is made, only one of each
// host, upstream, ... at a time (at 100,000 hosts the whole document took hundreds of MB at the
// controller's start).
std::string encode_snapshot_frame(uint64_t version, const model::Config& config);

struct DecodeResult {
  std::optional<Message> message;
  std::string error;  // set when message is empty
};
DecodeResult decode_json(std::string_view json);

// Incremental frame splitter for a byte stream.
class FrameReader {
 public:
  // Appends bytes read from the socket. Once a frame's length is known, room for the whole
  // frame is reserved (up to kMaxReservedFrame): a full configuration of megabytes is then not
  // grown by doubling, each step a copy into memory touched for the first time.
  void append(const char* data, size_t n);
  // Returns the next complete payload, or nullopt if more bytes are needed. Sets error() on an
  // oversized frame; the connection should then be closed.
  std::optional<std::string> next();
  const std::string& error() const { return error_; }

 private:
  static constexpr size_t kMaxReservedFrame = size_t{64} << 20;

  std::string buffer_;
  size_t consumed_ = 0;
  std::string error_;
};

// JSON conversion of the model, exposed for tests and for debugging dumps.
std::string config_to_json(const model::Config& c);
std::optional<model::Config> config_from_json(std::string_view json, std::string* error);

}  // namespace tidegate::protocol
