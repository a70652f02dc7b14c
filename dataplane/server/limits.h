#pragma once
// Every limit of the HTTP path, named, with its default. Documented in docs/limits.md.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "server/http1_policy.h"

namespace tidegate::dataplane::server {

// A body without a size limit. Boost 1.74's parser compares lengths against an optional limit,
// and boost::none compares as less than every length, so "no limit" must be the largest value.
inline constexpr std::uint64_t kUnlimitedBody = std::numeric_limits<std::uint64_t>::max();

// HTTP/2 on the client side (docs/proxy.md, "HTTP/2"; docs/limits.md). The settings are the
// ones the data plane announces; the flood limits are what a connection may send before it gets
// GOAWAY (ENHANCE_YOUR_CALM) and is closed.
struct Http2Limits {
  bool enabled = true;  // ALPN h2 on the HTTPS port (--http2)
  bool prior_knowledge =
      true;  // cleartext HTTP/2 by its preface on the HTTP port (--http2-cleartext)
  // The HTTP port speaks only HTTP/2 by prior knowledge (--http2-cleartext only, as nginx's
  // `listen ... http2` on a plain port): anything that does not start with the preface is closed
  // without an answer (RFC 9113 section 3.4), no HTTP/1.1.
  bool prior_knowledge_only = false;
  uint32_t max_concurrent_streams = 128;       // --http2-max-concurrent-streams
  uint32_t initial_stream_window = 64 * 1024;  // --http2-stream-window: request body per stream
  uint32_t connection_window = 1024 * 1024;    // --http2-connection-window
  uint32_t max_frame_size = 16 * 1024;         // --http2-max-frame-size
  uint32_t max_header_list_size = 64 * 1024;   // --http2-max-header-list-size (431 past it)
  // Control frames (SETTINGS, PING, WINDOW_UPDATE, PRIORITY, RST_STREAM, and DATA or HEADERS
  // without payload or end of stream) a client may send per window of kFloodWindow: a base
  // allowance plus kControlFramesPerFrameSent for each HEADERS or DATA frame the data plane sent
  // in the window (Envoy's rule of a budget tied to useful work).
  static constexpr uint32_t kControlFrameAllowance = 1000;
  static constexpr uint32_t kControlFramesPerFrameSent = 10;
  static constexpr std::chrono::seconds kFloodWindow{10};
  // RST_STREAM from the client (rapid reset, CVE-2023-44487): a token bucket of this burst,
  // refilled at this rate per second (nghttp2's limiter).
  static constexpr uint64_t kResetBurst = 1000;
  static constexpr uint64_t kResetRate = 33;
  // CONTINUATION frames after one HEADERS (the 2024 CONTINUATION flood).
  static constexpr size_t kMaxContinuations = 8;
  // SETTINGS entries in one frame; outbound ACKs (PING, SETTINGS) queued for a client that does
  // not read.
  static constexpr size_t kMaxSettingsEntries = 32;
  static constexpr size_t kMaxOutboundAcks = 1000;
  // Header lists past max_header_list_size one connection may send (each answered 431): a
  // client repeating an HPACK bomb costs the decoding of every one, so past this many the
  // connection gets GOAWAY(ENHANCE_YOUR_CALM). A browser with an oversized cookie sends a few.
  static constexpr uint32_t kMaxOversizedHeaderLists = 8;
  // Streams one connection may let stall (a response the client's stream window held shut for
  // --client-send-timeout: each is reset with CANCEL) before it gets GOAWAY(ENHANCE_YOUR_CALM).
  // A connection window held shut that long stalls every stream: GOAWAY at once.
  static constexpr uint32_t kMaxStalledStreams = 4;
};

struct Limits {
  // The strict HTTP/1.1 rules and their limits (server/http1_policy.h): request line 8 KiB
  // (414), 100 header fields (431), path normalization options (--merge-slashes,
  // --path-escaped-slashes).
  RequestRules request_rules;
  // Largest request header block (request line + fields) accepted; larger gets 431.
  size_t max_request_header_bytes = 64 * 1024;
  // Largest upstream response header block; larger gets 502.
  size_t max_response_header_bytes = 64 * 1024;
  // enable-cache: each worker's shard of the response cache (--cache-size-mb divided among
  // the workers) and the largest body stored (--cache-max-item-kb). Defaults as Thruster's.
  size_t cache_bytes_per_worker = 64 * 1024 * 1024;
  size_t cache_max_item_bytes = 1024 * 1024;
  // --x-sendfile-roots: the directories X-Sendfile may serve from at all (normal form). A
  // route's x-sendfile-directories take effect only when each lies within one of them; empty
  // (the default): X-Sendfile is off for every route.
  std::vector<std::string> sendfile_roots;
  // Size of the one relay buffer each connection owns; bodies stream through it.
  static constexpr size_t kRelayBufferBytes = 16 * 1024;
  // Initial capacity of the read buffers. Beast reads at most the free capacity (and at least
  // 512 bytes) per call, so an unreserved buffer turns a 1.3 KB response into three reads and
  // three writes to the client; reserving lets one read take a whole small exchange.
  static constexpr size_t kClientReadBufferBytes = 4 * 1024;
  static constexpr size_t kUpstreamReadBufferBytes = 16 * 1024;
  // A request head must be complete this long after its first byte (or, on a new connection,
  // after the accept): slow-header clients cannot hold a connection (--client-header-timeout).
  std::chrono::milliseconds client_header_timeout{10'000};
  // An idle keep-alive connection waits this long for the next request's first byte
  // (--keepalive-timeout).
  std::chrono::milliseconds keepalive_timeout{60'000};
  // Client connections per worker (--max-connections split between the workers). Past
  // kPressureStart of it the two timeouts above shrink linearly, to kPressureMinTimeout at
  // kPressureFull; at the limit a new connection closes the one that has waited longest for a
  // request head (idle keep-alive or slow header), or is closed itself when none is waiting
  // (docs/proxy.md, "Overload").
  size_t max_connections = 15'000;
  static constexpr double kPressureStart = 0.80;
  static constexpr double kPressureFull = 0.95;
  static constexpr std::chrono::milliseconds kPressureMinTimeout{1'000};
  // Time between two reads of a request body from the client / two writes to it.
  std::chrono::milliseconds client_body_timeout{60'000};
  std::chrono::milliseconds client_send_timeout{60'000};
  // Upstream: TCP connect, time between two reads (including the wait for the response header),
  // time between two writes.
  std::chrono::milliseconds upstream_connect_timeout{5'000};
  // Fast failover (docs/proxy.md, "Retries"): while the request could still move to an endpoint
  // it has not tried (proxy-next-upstream timeout, tries left), a connect gets at most this long
  // before the next endpoint is tried; the last possible attempt gets the whole
  // proxy-connect-timeout. A connect on a pod network takes well under a millisecond; one that
  // does not finish in half a second goes to an address nobody holds any more (a pod that
  // exited before its EndpointSlice said so), where no RST ever comes.
  static constexpr std::chrono::milliseconds kFailoverConnectTimeout{500};
  std::chrono::milliseconds upstream_read_timeout{60'000};
  std::chrono::milliseconds upstream_send_timeout{60'000};
  // Attempts per request: connect failures (any method) and failures before any response byte
  // (idempotent bodyless requests) move on to the next endpoint.
  unsigned max_upstream_attempts = 3;
  // TLS handshake of a new client connection.
  std::chrono::milliseconds tls_handshake_timeout{10'000};
  // A tunnel (after 101 Switching Protocols) closes after this long without a byte either way
  // (nginx's proxy_read_timeout default; per-Ingress values arrive with the timeout annotations).
  std::chrono::milliseconds tunnel_idle_timeout{60'000};
  // A passed-through TLS connection (ssl-passthrough) closes after this long without a byte
  // either way (HAProxy's tcp-mode client/server timeouts play this part; nginx's stream proxy
  // says 10 minutes).
  std::chrono::milliseconds passthrough_idle_timeout{600'000};
  // Lingering close after an error answer that leaves a request body unread (nginx's
  // lingering_time and lingering_timeout): unread bytes are read and dropped until the client
  // closes, for at most kLingerTime in all and kLingerTimeout without a byte.
  static constexpr std::chrono::seconds kLingerTime{30};
  static constexpr std::chrono::seconds kLingerTimeout{5};
  // Request mirroring (server/mirror.h): per worker at most this many mirrored requests in
  // flight (past it a request is not mirrored, counted as skipped); a request body is mirrored
  // when it is at most kMaxMirrorBodyBytes (a longer one: the request is not mirrored); of a
  // mirror's answer at most kMaxMirrorResponseBytes of body are read and dropped so that the
  // connection can serve again (a longer one closes it). While a request's body is being kept
  // for its copies, it holds one of kMaxMirrorCaptures per worker (so at most
  // kMaxMirrorCaptures × kMaxMirrorBodyBytes, 4 MiB, of bodies waiting per worker; past it a
  // request is not mirrored). Upgrade requests (WebSockets) are never mirrored.
  static constexpr size_t kMaxMirrorsInFlight = 256;
  static constexpr size_t kMaxMirrorCaptures = 64;
  static constexpr size_t kMaxMirrorBodyBytes = 64 * 1024;
  static constexpr uint64_t kMaxMirrorResponseBytes = 1024 * 1024;
  Http2Limits http2;
};

}  // namespace tidegate::dataplane::server
