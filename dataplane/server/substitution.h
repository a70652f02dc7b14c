#pragma once
// What the HTTP session needs to apply body substitutions (issue #5; docs/substitutions.md,
// "In the proxy"): the decision whether a response is processed, the header rewrite that goes
// with it, and the per-worker state (the memo and the counters).
//
// The decision and the rewrite are pure functions of the response header so that a table test
// can pin them down (tests/dataplane/server/substitution_test.cc).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>

#include "filters/substitution/memo.h"
#include "filters/substitution/stream.h"
#include "filters/substitution/subset_cache.h"
#include "observability/metrics.h"
#include "runtime/snapshot.h"
#include "server/headers.h"

namespace tidegate::dataplane::server {

// The most body bytes one turn of a worker feeds the engine before it yields to the io_context
// (fairness: one large response never holds the worker for long).
inline constexpr size_t kSubstitutionSliceBytes = 64 * 1024;
// Substituted output is gathered into client writes of up to this much while more input is at
// hand (Exchange::pump_filters): a write wakes the client's reader, and a reader faster than the
// engine is asleep at every write, so 16 KiB writes cost a wake-up each (6 us on this machine's
// loopback, a seventh of a dense page's CPU: docs/benchmarks.md, "Pages dense with matches").
inline constexpr size_t kSubstitutionWriteBytes = 64 * 1024;
// And read from the upstream in pieces of up to this much (Http1Upstream::widen_reads), each
// straight into the stream's window (Exchange::read_response_body): a read is a system call, and
// one that frees the receive window sends the upstream a window update.
inline constexpr size_t kSubstitutionReadBytes = 64 * 1024;
// The smallest slice.
inline constexpr size_t kSubstitutionMinSliceBytes = 1024;
// What one slice should cost. The engine's speed per byte varies thirtyfold with the body (a scan
// runs at ~1.5 GB/s, a replacement every 20 bytes at ~50 MB/s: 64 KiB then take over a
// millisecond), so the slice is sized by the speed the previous one ran at
// (next_substitution_slice).
inline constexpr std::chrono::microseconds kSubstitutionSliceTime{50};

// The input for the next slice of a response, given the last one: it processed `consumed` bytes
// of queued input in `spent` and left `output` bytes to write. Sized so that a slice at that speed
// takes about kSubstitutionSliceTime; a slice with too little input to measure keeps the size
// unless it was slow anyway (held bytes rescanned); an output above two slices (replacements that
// expand) halves it. Always within [kSubstitutionMinSliceBytes, kSubstitutionSliceBytes].
size_t next_substitution_slice(size_t slice, size_t consumed, std::chrono::nanoseconds spent,
                               size_t output);

// Per worker, worker thread only: plain integers, logged at debug level after each processed
// response (docs/substitutions.md, "Counters"). The same events go to /metrics per route
// (completed_observation and the others below, WorkerMetrics::record_substitution).
struct SubstitutionCounters {
  uint64_t responses = 0;               // responses streamed through the engine
  uint64_t completed = 0;               // ... of which reached their end
  uint64_t bytes_in = 0;                // body bytes fed to the engine
  uint64_t bytes_out = 0;               // body bytes it produced
  uint64_t replacements = 0;            // matches replaced
  uint64_t forced_releases = 0;         // held bytes released unmodified at max_buffer
  uint64_t abandoned = 0;               // bodies whose processing exceeded its CPU budget
  uint64_t compressed_passthrough = 0;  // bodies with a Content-Encoding, relayed untouched
  uint64_t memo_skips = 0;              // bodies relayed unscanned: the memo says no rule matches
  uint64_t memo_subsets = 0;            // bodies scanned with only the rules the memo names
  uint64_t rules_skipped = 0;           // rules not run thanks to the memo (both cases above)
  uint64_t memo_stores = 0;             // complete scans remembered (which rules matched)
  uint64_t subset_compiles = 0;         // rule subsets compiled (RuleSubsetCache misses)
  uint64_t yields = 0;                  // slices after which the session yielded (asio::post)
};

// What the memo makes of one response about to be processed (SubstitutionWorkerState::plan).
struct SubstitutionPlan {
  // The memo says no rule matched this representation: relay it untouched and unscanned.
  bool pass = false;
  // Otherwise the rules to run: the route's, or the subset of them the memo names.
  std::shared_ptr<const filters::RuleSet> rules;
  // Rules of the route's set not run (all of them when `pass`).
  size_t rules_skipped = 0;
};

struct SubstitutionWorkerState {
  filters::SubstitutionMemo memo;
  filters::RuleSubsetCache subsets;
  SubstitutionCounters counters;

  // Looks the response up in the memo (only a 200 with a validator can hit: nothing else is
  // remembered) and counts the outcome. `validator` comes from memo_validator().
  SubstitutionPlan plan(const runtime::CompiledSubstitution& sub, std::string_view resource,
                        std::string_view validator, unsigned status);
  // After a response streamed through the engine to its end: remembers which rules matched when
  // the scan was complete (a 200, nothing released at the buffer limit), forgets the key when
  // every rule matched (nothing to skip), and adds the stream's figures to the counters.
  // Returns whether the memo now holds the key.
  bool learn(const runtime::CompiledSubstitution& sub, std::string_view resource,
             std::string_view validator, unsigned status,
             const filters::SubstitutionStreamStats& stats);
};

// The metrics of one response that went through the engine to its end (`rules_skipped`: from
// its SubstitutionPlan), of one relayed unscanned by the memo, and of one compressed body
// relayed untouched.
observability::SubstitutionObservation completed_observation(
    observability::LabelSetId labels, const filters::SubstitutionStreamStats& stats,
    size_t rules_skipped);
observability::SubstitutionObservation memo_skip_observation(observability::LabelSetId labels,
                                                             size_t rules_skipped);
observability::SubstitutionObservation compressed_observation(observability::LabelSetId labels);

enum class SubstitutionAction {
  kPass,            // not for the engine: relayed as it is
  kPassCompressed,  // would apply, but the body is compressed: relayed as it is, counted
  kSubstitute,      // streamed through the engine (unless the memo says no rule matches)
};

struct ResponseFacts {
  bool body_expected = true;  // false for HEAD, 204, 304
  unsigned status = 200;
  std::string_view content_type;
  std::string_view content_encoding;
  std::optional<uint64_t> content_length;  // when the upstream framed the body by length
};

SubstitutionAction decide_substitution(const runtime::CompiledSubstitution& sub,
                                       const ResponseFacts& facts);

// "", "identity" (any case, spaces around): the body is not encoded.
bool is_identity_encoding(std::string_view content_encoding);

// `W/"x"` for `"x"`; a weak tag is kept; an empty value stays empty.
std::string weak_etag(std::string_view etag);

// The header of a response that goes through the engine: no Content-Length (the length
// changes), the ETag weak (the bytes differ from the upstream's but mean the same), chunked to
// HTTP/1.1 clients, close-delimited to HTTP/1.0 ones (the caller must then close the connection).
void rewrite_substituted_header(boost::beast::http::response_header<Fields>& res,
                                unsigned client_version);

// The memo's validator: the ETag when there is one, else the Last-Modified date (prefixed so
// that the two never compare equal), else empty (no memo).
void memo_validator(const boost::beast::http::response_header<Fields>& res, std::string* out);

}  // namespace tidegate::dataplane::server
