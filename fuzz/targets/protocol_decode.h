#pragma once
// Fuzz target: the control protocol's decoder and frame reader on arbitrary bytes, as the data
// plane sees them on its control socket (and the controller on its end).
//
// Invariants:
//   - decode_json never throws; it yields a message or an error, never both or neither;
//   - a decoded message re-encodes to JSON that decodes again to the same encoding;
//   - FrameReader, fed the bytes in arbitrary pieces, yields exactly the frames (or the error)
//     that a straightforward reference splitter finds in the whole input.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "protocol/protocol.h"

namespace tidegate::fuzz {

namespace detail {

struct Frames {
  std::vector<std::string> payloads;
  bool error = false;
};

// The obvious splitter over the whole input: what FrameReader must agree with.
inline Frames reference_frames(std::string_view bytes) {
  Frames out;
  size_t pos = 0;
  while (bytes.size() - pos >= 4) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + pos);
    uint64_t n = (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    if (n > protocol::kMaxFrameBytes) {
      out.error = true;
      break;
    }
    if (bytes.size() - pos - 4 < n) break;
    out.payloads.emplace_back(bytes.substr(pos + 4, n));
    pos += 4 + n;
  }
  return out;
}

// Checks one JSON text: decoding is total, and decoded messages survive a re-encoding.
inline std::string check_decode(std::string_view text) {
  protocol::DecodeResult first = protocol::decode_json(text);
  TIDEGATE_FUZZ_CHECK(first.message.has_value() != !first.error.empty(),
                      "message and error: \"" << first.error << "\" for " << escape(text));
  if (!first.message) return {};
  const std::string encoded = protocol::encode_json(*first.message);
  protocol::DecodeResult second = protocol::decode_json(encoded);
  TIDEGATE_FUZZ_CHECK(
      second.message.has_value(),
      "re-encoded message does not decode: " << second.error << " for " << escape(encoded));
  TIDEGATE_FUZZ_CHECK(second.message->index() == first.message->index(),
                      "message type changed for " << escape(encoded));
  const std::string again = protocol::encode_json(*second.message);
  TIDEGATE_FUZZ_CHECK(again == encoded,
                      "encoding not stable: " << escape(encoded) << " vs " << escape(again));
  if (const auto* snap = std::get_if<protocol::Snapshot>(&*first.message)) {
    std::string error;
    auto config = protocol::config_from_json(protocol::config_to_json(snap->config), &error);
    TIDEGATE_FUZZ_CHECK(config.has_value(), "config JSON round trip failed: " << error);
    TIDEGATE_FUZZ_CHECK(*config == snap->config, "config JSON round trip changed the config");
  }
  return {};
}

}  // namespace detail

inline std::string run_protocol_decode(const uint8_t* data, size_t size) {
  const std::string_view bytes = as_text(data, size);

  // The whole input as one JSON message.
  if (auto failure = detail::check_decode(bytes); !failure.empty()) return failure;

  // The input as a byte stream, handed over in pieces whose sizes come from the input itself.
  const detail::Frames want = detail::reference_frames(bytes);
  protocol::FrameReader reader;
  std::vector<std::string> got;
  size_t pos = 0;
  uint32_t state = static_cast<uint32_t>(size) * 2654435761u + 1;
  while (pos < size) {
    state = state * 1103515245u + 12345u;
    size_t piece = std::min<size_t>(size - pos, 1 + (state >> 16) % 64);
    reader.append(bytes.data() + pos, piece);
    pos += piece;
    while (auto payload = reader.next()) got.push_back(std::move(*payload));
  }
  TIDEGATE_FUZZ_CHECK(got == want.payloads, "FrameReader found " << got.size()
                                                                 << " frames, reference "
                                                                 << want.payloads.size());
  TIDEGATE_FUZZ_CHECK(
      reader.error().empty() != want.error,
      "FrameReader error \"" << reader.error() << "\", reference error " << want.error);
  TIDEGATE_FUZZ_CHECK(!reader.next().has_value(), "FrameReader yields more after draining");

  // Every frame payload as a message, as the control server would decode it.
  for (const auto& payload : got) {
    if (auto failure = detail::check_decode(payload); !failure.empty()) return failure;
  }
  return {};
}

}  // namespace tidegate::fuzz
