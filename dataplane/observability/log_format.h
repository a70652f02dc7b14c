#pragma once
// Access log lines (issue #6): the record of one request and the shapes its line can take —
// JSON (the default; which fields and in what order is configurable) or a text template with
// nginx-style variables. A layout is compiled once at start into segments (literal text, then a
// field id); a template is never evaluated, only cut into literals and known variable names.
// Each worker's LineFormatter then formats records into a reused buffer: no allocation once the
// buffer has grown, no lock, no shared mutable state. Fields, variables, escaping and caps:
// docs/observability.md ("Access logs").

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidegate::dataplane::observability {

enum class AccessLogFormat { kOff, kJson, kText };
// "json" | "text" | "off".
std::optional<AccessLogFormat> parse_access_log_format(std::string_view text);

// One request. Views must stay valid for the duration of AccessLogProducer::log() only.
struct AccessLogRecord {
  std::chrono::system_clock::time_point time;  // when the request started
  std::string_view request_id;
  // The client, without port: the connection's peer, or, when the peer is one of
  // --trusted-proxies, the address X-Forwarded-For names (nginx's realip: $remote_addr).
  std::string_view client;
  std::string_view method;
  std::string_view host;  // Host header as sent
  std::string_view path;  // without the query string (queries often carry secrets)
  unsigned status = 0;    // 0: no response was sent
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  std::chrono::nanoseconds duration{0};
  std::chrono::nanoseconds upstream_duration{-1};  // negative: no upstream response -> null
  std::string_view upstream;                       // "10.0.0.1:8080"; empty -> null
  std::string_view ingress;                        // "namespace/name"; empty -> null
  std::string_view service;                        // "namespace/service:port"; empty -> null
  unsigned http_version = 0;                       // 11 for HTTP/1.1 (Beast's encoding); 0: unknown
  // Filled only when the layout uses them (AccessLogLayout::uses): each costs a header lookup.
  std::string_view user_agent;  // User-Agent as sent
  std::string_view referer;     // Referer as sent; its query string is never logged
  std::string_view peer;        // the connection's peer address, without port
  // gRPC requests (server/grpc.h): the service and method come from the path
  // ("/pkg.Service/Method"); grpc_status is the code the client was given in the response head
  // (the proxy's own trailers-only answers, or a backend's trailers-only response), -1 when
  // none was (a response whose status comes in trailers) or the request is not gRPC.
  bool grpc = false;
  int grpc_status = -1;
};

// Per-field caps on input bytes, so that any line fits one frame even when every byte needs a
// six-byte \u escape (JSON) or a four-byte \xHH escape (text): see kMaxLineBytes.
inline constexpr size_t kMaxLoggedPath = 4096;
inline constexpr size_t kMaxLoggedHost = 512;
inline constexpr size_t kMaxLoggedUserAgent = 512;
inline constexpr size_t kMaxLoggedReferer = 1024;
inline constexpr size_t kMaxLoggedShortField = 256;  // request id, client, method, upstream...
// The longest line any layout may produce. A JSON line holds each field at most once and fits
// by construction; a text template whose worst case is longer is refused at start.
inline constexpr size_t kMaxLineBytes =
    6 * (kMaxLoggedPath + kMaxLoggedHost + kMaxLoggedUserAgent + kMaxLoggedReferer) +
    6 * 9 * kMaxLoggedShortField + 512;  // 51,200 bytes
inline constexpr size_t kMaxFrameBytes = 64 * 1024;
static_assert(kMaxLineBytes <= kMaxFrameBytes);

// Every value a line can show. The JSON fields come first; the rest are text renderings of the
// same record after nginx's variables ($time_local, $request_time, $service_name...).
enum class LogField : uint8_t {
  kTime,
  kRequestId,
  kClient,
  kMethod,
  kHost,
  kPath,
  kStatus,
  kBytesIn,
  kBytesOut,
  kDurationMs,
  kUpstreamDurationMs,
  kUpstream,
  kIngress,
  kService,
  kProtocol,
  kUserAgent,
  kReferer,
  kPeer,
  kGrpcService,
  kGrpcMethod,
  kGrpcStatus,
  // Text only.
  kTimeLocal,
  kTimeIso8601,
  kMsec,
  kRequestTime,
  kUpstreamHeaderTime,
  kNamespace,
  kIngressName,
  kServiceName,
  kServicePort,
  kProxyUpstreamName,
  kNone,  // a segment with literal text only
};

// The default text template (`--access-log text` without `--access-log-format`): nginx's
// "combined" line with the query string left out of the request line, followed by what
// ingress-nginx's "upstreaminfo" adds.
inline constexpr std::string_view kDefaultTextTemplate =
    R"($remote_addr - - [$time_local] "$request_method $uri $server_protocol" $status )"
    R"($bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time )"
    R"([$proxy_upstream_name] $upstream_addr $upstream_header_time $request_id)";

// A compiled line layout; immutable once built, copied into each worker's formatter.
class AccessLogLayout {
 public:
  static AccessLogLayout off();
  // Today's JSON line: time … service (the first 14 fields), in that order.
  static AccessLogLayout json();
  // JSON with the fields of a comma-separated list of field names, in its order. nullopt and
  // *error on an empty list, an empty, unknown or repeated name.
  static std::optional<AccessLogLayout> json_fields(std::string_view list, std::string* error);
  // A text template: literal text, `$name` or `${name}` variables, `$$` for a '$'. nullopt and
  // *error (naming the variable, with its byte offset) on an unknown variable, a '$' without a
  // name, an unterminated `${`, a control character other than tab, an empty template, or a
  // worst-case line longer than kMaxLineBytes.
  static std::optional<AccessLogLayout> text(std::string_view tmpl, std::string* error);

  AccessLogFormat format() const { return format_; }
  bool uses(LogField f) const { return (used_ >> static_cast<unsigned>(f)) & 1; }
  // The longest line this layout can produce, '\n' included.
  size_t max_line_bytes() const { return max_line_bytes_; }

  // Names a text template may use, and the JSON field names, for documentation and errors.
  static std::vector<std::string_view> variable_names();
  static std::vector<std::string_view> json_field_names();

 private:
  friend class LineFormatter;
  struct Segment {
    uint32_t literal_begin = 0;  // in literals_
    uint32_t literal_size = 0;
    LogField field = LogField::kNone;  // written after the literal
  };
  void add(std::string_view literal, LogField field);

  AccessLogFormat format_ = AccessLogFormat::kOff;
  std::string literals_;
  std::vector<Segment> segments_;
  uint64_t used_ = 0;
  size_t max_line_bytes_ = 0;
};

// The layout given by the flags: --access-log (json | text | off), --access-log-format
// (a text template; alone, it means text) and --access-log-fields (JSON only). nullopt means
// the flag was not on the command line. nullopt and *error (naming the flag) on a conflict or
// anything the layout builders refuse.
std::optional<AccessLogLayout> access_log_layout_from_flags(std::optional<std::string_view> mode,
                                                            std::optional<std::string_view> tmpl,
                                                            std::optional<std::string_view> fields,
                                                            std::string* error);

// Formats records with one layout. Keeps the formatted date and time of the current second, so
// one thread's formatter is cheap to call per request. One thread only.
class LineFormatter {
 public:
  explicit LineFormatter(AccessLogLayout layout = AccessLogLayout::json());
  const AccessLogLayout& layout() const { return layout_; }
  // Writes one line, '\n' included, at `out`, which has room for layout().max_line_bytes();
  // returns its size (0 when the layout is off). The request path's call: plain stores, no
  // capacity checks, no allocation.
  size_t format(const AccessLogRecord& r, char* out);
  // Appends one line to `out` (for tests and tools: it first grows `out` by the worst case).
  void format(const AccessLogRecord& r, std::string& out);

 private:
  void set_second(std::chrono::system_clock::time_point t);
  char* put_json(LogField f, const AccessLogRecord& r, char* p) const;
  char* put_text(LogField f, const AccessLogRecord& r, char* p) const;

  AccessLogLayout layout_;
  int64_t cached_second_ = INT64_MIN;
  int milli_ = 0;        // of the record being formatted
  char iso_[20] = {};    // "YYYY-MM-DDTHH:MM:SS"
  char local_[21] = {};  // "DD/Mon/YYYY:HH:MM:SS"
  char epoch_[24] = {};  // seconds since 1970
  size_t epoch_size_ = 0;
};

// Appends `s` as a JSON string (with its quotes): '"' and '\' escaped, control characters as
// \b \f \n \r \t or \u00XX, DEL as \u007f, valid UTF-8 copied, each maximal ill-formed
// subsequence (Unicode 15 §3.9, "U+FFFD substitution of maximal subparts") replaced by \ufffd.
// Only the first `max_input` bytes of `s` are used.
void append_json_string(std::string& out, std::string_view s,
                        size_t max_input = std::string_view::npos);

// Appends `s` as a text-format value: '-' when empty; '"', '\', control characters, DEL, the
// C1 controls (U+0080..U+009F), U+2028 and U+2029 as \xHH per byte (uppercase hex, as nginx's
// escape=default writes them); every byte of an ill-formed UTF-8 subsequence as \xHH; other
// valid UTF-8 and printable ASCII copied. So a value never ends a line, never closes a quoted
// field and never forges an escape. Only the first `max_input` bytes of `s` are used.
void append_text_value(std::string& out, std::string_view s,
                       size_t max_input = std::string_view::npos);

}  // namespace tidegate::dataplane::observability
