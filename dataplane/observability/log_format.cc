#include "observability/log_format.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ctime>
#include <optional>
#include <utility>

namespace tidegate::dataplane::observability {

namespace {

using LF = LogField;

struct Name {
  std::string_view name;
  LogField field;
};

// JSON field names: the record's fields. The first kDefaultJsonFields are today's line.
constexpr Name kJsonFields[] = {
    {"time", LF::kTime},
    {"request_id", LF::kRequestId},
    {"client", LF::kClient},
    {"method", LF::kMethod},
    {"host", LF::kHost},
    {"path", LF::kPath},
    {"status", LF::kStatus},
    {"bytes_in", LF::kBytesIn},
    {"bytes_out", LF::kBytesOut},
    {"duration_ms", LF::kDurationMs},
    {"upstream_duration_ms", LF::kUpstreamDurationMs},
    {"upstream", LF::kUpstream},
    {"ingress", LF::kIngress},
    {"service", LF::kService},
    {"protocol", LF::kProtocol},
    {"user_agent", LF::kUserAgent},
    {"referer", LF::kReferer},
    {"peer", LF::kPeer},
    {"grpc_service", LF::kGrpcService},
    {"grpc_method", LF::kGrpcMethod},
    {"grpc_status", LF::kGrpcStatus},
};
constexpr size_t kDefaultJsonFields = 14;

// Text variables: the JSON field names, and nginx's names for what the record holds.
constexpr Name kNginxVariables[] = {
    {"remote_addr", LF::kClient},
    {"realip_remote_addr", LF::kPeer},
    {"request_method", LF::kMethod},
    {"uri", LF::kPath},
    {"http_host", LF::kHost},
    {"server_protocol", LF::kProtocol},
    {"request_length", LF::kBytesIn},
    {"bytes_sent", LF::kBytesOut},
    {"request_time", LF::kRequestTime},
    {"upstream_header_time", LF::kUpstreamHeaderTime},
    {"upstream_addr", LF::kUpstream},
    {"time_local", LF::kTimeLocal},
    {"time_iso8601", LF::kTimeIso8601},
    {"msec", LF::kMsec},
    {"http_user_agent", LF::kUserAgent},
    {"http_referer", LF::kReferer},
    {"namespace", LF::kNamespace},
    {"ingress_name", LF::kIngressName},
    {"service_name", LF::kServiceName},
    {"service_port", LF::kServicePort},
    {"proxy_upstream_name", LF::kProxyUpstreamName},
};

// nginx variables a pasted log_format may hold that Tidegate does not offer, and why: the error
// then says what to write instead.
struct Refused {
  std::string_view name;
  bool prefix;
  std::string_view why;
};
constexpr Refused kRefused[] = {
    {"request_uri", false, "the query string is never logged: use $uri"},
    {"request", false,
     "it holds the query string, which is never logged: use \"$request_method $uri "
     "$server_protocol\""},
    {"args", false, "the query string is never logged"},
    {"query_string", false, "the query string is never logged"},
    {"is_args", false, "the query string is never logged"},
    {"arg_", true, "the query string is never logged"},
    {"body_bytes_sent", false,
     "the data plane counts a response's header and body bytes together: use $bytes_sent"},
    {"upstream_response_time", false,
     "use $upstream_header_time (first upstream attempt to the response header)"},
    {"upstream_connect_time", false,
     "use $upstream_header_time (first upstream attempt to the response header)"},
    {"remote_user", false, "the data plane authenticates no one: write - instead"},
    {"http_", true,
     "of the request headers only Host, User-Agent and Referer are logged ($http_host, "
     "$http_user_agent, $http_referer): others can carry credentials"},
    {"cookie_", true, "cookies are never logged"},
};

std::optional<LogField> find_name(std::string_view name, bool text) {
  for (const auto& n : kJsonFields) {
    if (n.name == name) return n.field;
  }
  if (text) {
    for (const auto& n : kNginxVariables) {
      if (n.name == name) return n.field;
    }
  }
  return std::nullopt;
}

constexpr size_t kNumberBytes = 24;  // a uint64 or a duration, with room to spare

// Worst-case output bytes of one value.
size_t worst_case(LogField f, bool json) {
  const size_t per_byte = json ? 6 : 4;
  const size_t quotes = json ? 2 : 0;
  switch (f) {
    case LF::kTime:
      return 24 + quotes;  // 2025-11-30T09:39:01.123Z
    case LF::kHost:
      return per_byte * kMaxLoggedHost + quotes;
    case LF::kPath:
      return per_byte * kMaxLoggedPath + quotes;
    case LF::kUserAgent:
      return per_byte * kMaxLoggedUserAgent + quotes;
    case LF::kReferer:
      return per_byte * kMaxLoggedReferer + quotes;
    case LF::kRequestId:
    case LF::kClient:
    case LF::kPeer:
    case LF::kMethod:
    case LF::kUpstream:
    case LF::kIngress:
    case LF::kService:
    case LF::kNamespace:
    case LF::kIngressName:
    case LF::kServiceName:
    case LF::kServicePort:
    case LF::kGrpcService:
    case LF::kGrpcMethod:
      return per_byte * kMaxLoggedShortField + quotes;
    case LF::kProxyUpstreamName:
      return per_byte * kMaxLoggedShortField + 2;  // two '-' between three parts
    case LF::kTimeLocal:
      return 26;  // 30/Nov/2025:09:39:01 +0000
    case LF::kTimeIso8601:
      return 25;  // 2025-11-30T09:39:01+00:00
    case LF::kProtocol:
      return 16 + quotes;
    case LF::kMsec:
    case LF::kStatus:
    case LF::kBytesIn:
    case LF::kBytesOut:
    case LF::kDurationMs:
    case LF::kUpstreamDurationMs:
    case LF::kRequestTime:
    case LF::kUpstreamHeaderTime:
    case LF::kGrpcStatus:
      return kNumberBytes;
    case LF::kNone:
      return 0;
  }
  return 0;
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

constexpr char kHex[] = "0123456789abcdef";
constexpr char kHexUpper[] = "0123456789ABCDEF";

bool plain_ascii(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; }

// The end of the run of plain_ascii bytes that starts at p[i] (p[0..n)). Eight bytes at a time
// while no byte of the word can stop the run (each test may report a byte that would not stop
// it; the byte loop then decides), so the common case — printable ASCII — costs a few
// instructions per eight bytes.
size_t plain_run_end(const unsigned char* p, size_t i, size_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101, kHigh = 0x8080808080808080;
  auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  while (i + 8 <= n) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    const uint64_t stop = (w & kHigh) |                        // >= 0x80
                          ((w - kOnes * 0x20) & ~w & kHigh) |  // < 0x20
                          has_zero(w ^ (kOnes * 0x7f)) | has_zero(w ^ (kOnes * '"')) |
                          has_zero(w ^ (kOnes * '\\'));
    if (stop != 0) break;
    i += 8;
  }
  while (i < n && plain_ascii(p[i])) ++i;
  return i;
}

// The length of the well-formed UTF-8 sequence at p[0..n) (n >= 1, p[0] >= 0x80), or, negated,
// the length of its maximal ill-formed subpart (at least 1) when it is not well formed.
int utf8_sequence(const unsigned char* p, size_t n) {
  const unsigned char c = p[0];
  int need;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range (Unicode Table 3-7)
  if (c >= 0xc2 && c <= 0xdf) {
    need = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 2;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 3;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return -1;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  for (int k = 1; k <= need; ++k) {
    if (static_cast<size_t>(k) >= n) return -k;  // cut short
    const unsigned char b = p[k];
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
    if (b < l || b > h) return -k;
  }
  return need + 1;
}

// The writers below put bytes at `p` and return the new end. The caller has made room for the
// worst case (AccessLogLayout::max_line_bytes counts it), so they never check capacity: a line
// is written with plain stores and memcpy, no std::string bookkeeping per value.

char* put(char* p, const char* s, size_t n) {
  std::memcpy(p, s, n);
  return p + n;
}

char* put_json_escape(char* p, unsigned char c) {
  char short_form = 0;
  switch (c) {
    case '"':
      short_form = '"';
      break;
    case '\\':
      short_form = '\\';
      break;
    case '\b':
      short_form = 'b';
      break;
    case '\f':
      short_form = 'f';
      break;
    case '\n':
      short_form = 'n';
      break;
    case '\r':
      short_form = 'r';
      break;
    case '\t':
      short_form = 't';
      break;
    default:
      break;
  }
  if (short_form != 0) {
    p[0] = '\\';
    p[1] = short_form;
    return p + 2;
  }
  const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
  return put(p, u, sizeof u);
}

char* put_hex_escapes(char* p, const unsigned char* q, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    p[0] = '\\';
    p[1] = 'x';
    p[2] = kHexUpper[q[k] >> 4];
    p[3] = kHexUpper[q[k] & 0xf];
    p += 4;
  }
  return p;
}

// Well-formed characters that a text line must not show as such: the C1 controls (U+0085 is a
// line break to some readers), the line and paragraph separators, and the bidirectional
// overrides and isolates (which make a viewer display bytes in another order than they are).
bool hidden_in_text(const unsigned char* p, int len) {
  if (len == 2) return p[0] == 0xc2 && p[1] <= 0x9f;
  if (len != 3 || p[0] != 0xe2) return false;
  if (p[1] == 0x80) return p[2] >= 0xa8 && p[2] <= 0xae;  // U+2028..U+202E
  if (p[1] == 0x81) return p[2] >= 0xa6 && p[2] <= 0xa9;  // U+2066..U+2069
  return false;
}

// At most 6 bytes per input byte, plus the quotes.
char* put_json_string(char* out, std::string_view s, size_t max_input) {
  const size_t n = std::min(s.size(), max_input);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  *out++ = '"';
  size_t i = 0;
  while (i < n) {
    const size_t run = plain_run_end(p, i, n);
    out = put(out, s.data() + i, run - i);
    i = run;
    if (i == n) break;
    const unsigned char c = p[i];
    if (c < 0x80) {
      out = put_json_escape(out, c);  // control, DEL, quote or backslash
      ++i;
      continue;
    }
    const int len = utf8_sequence(p + i, n - i);
    if (len > 0) {
      out = put(out, s.data() + i, static_cast<size_t>(len));
      i += static_cast<size_t>(len);
    } else {
      out = put(out, "\\ufffd", 6);
      i += static_cast<size_t>(-len);
    }
  }
  *out++ = '"';
  return out;
}

// put_text_value without the '-' for an empty value. At most 4 bytes per input byte.
char* put_text_escaped(char* out, std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const size_t run = plain_run_end(p, i, n);
    out = put(out, s.data() + i, run - i);
    i = run;
    if (i == n) break;
    if (p[i] < 0x80) {
      out = put_hex_escapes(out, p + i, 1);  // control, DEL, quote or backslash
      ++i;
      continue;
    }
    const int len = utf8_sequence(p + i, n - i);
    const size_t k = static_cast<size_t>(len > 0 ? len : -len);
    if (len > 0 && !hidden_in_text(p + i, len)) {
      out = put(out, s.data() + i, k);
    } else {
      out = put_hex_escapes(out, p + i, k);
    }
    i += k;
  }
  return out;
}

char* put_text_value(char* out, std::string_view s, size_t max_input) {
  s = s.substr(0, max_input);
  if (s.empty()) {
    *out = '-';
    return out + 1;
  }
  return put_text_escaped(out, s);
}

template <class T>
char* put_number(char* p, T v) {
  return std::to_chars(p, p + kNumberBytes, v).ptr;
}

// Three digits after a dot: 7 -> ".007".
char* put_millis(char* p, unsigned frac) {
  p[0] = '.';
  p[1] = static_cast<char>('0' + frac / 100);
  p[2] = static_cast<char>('0' + frac / 10 % 10);
  p[3] = static_cast<char>('0' + frac % 10);
  return p + 4;
}

// Milliseconds with microsecond precision: 1234567 ns -> "1.234".
char* put_ms(char* p, std::chrono::nanoseconds d) {
  const uint64_t us = d.count() <= 0 ? 0 : static_cast<uint64_t>(d.count()) / 1000;
  return put_millis(put_number(p, us / 1000), static_cast<unsigned>(us % 1000));
}

// Seconds with millisecond precision, as nginx's $request_time: 12345678 ns -> "0.012".
char* put_seconds(char* p, std::chrono::nanoseconds d) {
  const uint64_t ms = d.count() <= 0 ? 0 : static_cast<uint64_t>(d.count()) / 1'000'000;
  return put_millis(put_number(p, ms / 1000), static_cast<unsigned>(ms % 1000));
}

char* put_json_string_or_null(char* p, std::string_view s, size_t cap) {
  return s.empty() ? put(p, "null", 4) : put_json_string(p, s, cap);
}

// "HTTP/1.1" from Beast's 11 into buf; empty for 0 (unknown) and anything past 99.
std::string_view protocol_name(unsigned version, char (&buf)[16]) {
  if (version == 0 || version > 99) return {};
  if (version == 11) return "HTTP/1.1";
  if (version == 10) return "HTTP/1.0";
  char* p = buf;
  for (char c : std::string_view("HTTP/")) *p++ = c;
  p = std::to_chars(p, buf + 11, version / 10).ptr;
  *p++ = '.';
  *p++ = static_cast<char>('0' + version % 10);
  return std::string_view(buf, static_cast<size_t>(p - buf));
}

// Referer without its query string or fragment (a query often carries a token).
// (A loop: find_first_of would call memchr on "?#" for every byte.)
std::string_view referer_without_query(std::string_view r) {
  size_t i = 0;
  while (i < r.size() && r[i] != '?' && r[i] != '#') ++i;
  return r.substr(0, i);
}

// "namespace/name" -> namespace ("" without a '/'), name.
std::string_view namespace_of(std::string_view s) {
  const size_t slash = s.find('/');
  return slash == std::string_view::npos ? std::string_view() : s.substr(0, slash);
}
std::string_view name_of(std::string_view s) {
  const size_t slash = s.find('/');
  return slash == std::string_view::npos ? s : s.substr(slash + 1);
}
// "namespace/service:port" -> service, port.
std::string_view service_name_of(std::string_view s) {
  const std::string_view rest = name_of(s);
  return rest.substr(0, rest.rfind(':'));
}
std::string_view service_port_of(std::string_view s) {
  const std::string_view rest = name_of(s);
  const size_t colon = rest.rfind(':');
  return colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
}

std::string_view capped(std::string_view s, size_t cap) { return s.substr(0, cap); }

}  // namespace

std::optional<AccessLogFormat> parse_access_log_format(std::string_view text) {
  if (text == "json") return AccessLogFormat::kJson;
  if (text == "text") return AccessLogFormat::kText;
  if (text == "off") return AccessLogFormat::kOff;
  return std::nullopt;
}

void append_json_string(std::string& out, std::string_view s, size_t max_input) {
  const size_t old = out.size();
  out.resize(old + 6 * std::min(s.size(), max_input) + 2);
  out.resize(static_cast<size_t>(put_json_string(out.data() + old, s, max_input) - out.data()));
}

void append_text_value(std::string& out, std::string_view s, size_t max_input) {
  const size_t old = out.size();
  out.resize(old + 4 * std::min(s.size(), max_input) + 1);
  out.resize(static_cast<size_t>(put_text_value(out.data() + old, s, max_input) - out.data()));
}

// ---- AccessLogLayout ----

void AccessLogLayout::add(std::string_view literal, LogField field) {
  segments_.push_back(
      {static_cast<uint32_t>(literals_.size()), static_cast<uint32_t>(literal.size()), field});
  literals_.append(literal);
  if (field != LogField::kNone) used_ |= uint64_t{1} << static_cast<unsigned>(field);
  max_line_bytes_ += literal.size() + worst_case(field, format_ == AccessLogFormat::kJson);
}

AccessLogLayout AccessLogLayout::off() { return AccessLogLayout(); }

AccessLogLayout AccessLogLayout::json() {
  std::string list;
  for (size_t i = 0; i < kDefaultJsonFields; ++i) {
    if (i > 0) list += ',';
    list += kJsonFields[i].name;
  }
  std::string error;
  return *json_fields(list, &error);
}

std::optional<AccessLogLayout> AccessLogLayout::json_fields(std::string_view list,
                                                            std::string* error) {
  AccessLogLayout layout;
  layout.format_ = AccessLogFormat::kJson;
  std::string literal = "{";
  size_t count = 0;
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view name = trim(list.substr(0, comma));
    if (name.empty()) {
      *error = "empty field name in the list";
      return std::nullopt;
    }
    const auto field = find_name(name, /*text=*/false);
    if (!field) {
      *error = "unknown field '" + std::string(name) + "' (fields: ";
      for (const auto& n : kJsonFields) {
        if (&n != kJsonFields) *error += ", ";
        *error += n.name;
      }
      *error += ")";
      return std::nullopt;
    }
    if (layout.uses(*field)) {
      *error = "field '" + std::string(name) + "' is listed twice";
      return std::nullopt;
    }
    if (count++ > 0) literal += ',';
    literal += '"';
    literal += name;
    literal += "\":";
    layout.add(literal, *field);
    literal.clear();
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  layout.add("}\n", LogField::kNone);
  if (layout.max_line_bytes_ > kMaxLineBytes) {  // cannot happen with each field once
    *error = "the fields' longest line exceeds " + std::to_string(kMaxLineBytes) + " bytes";
    return std::nullopt;
  }
  return layout;
}

std::optional<AccessLogLayout> AccessLogLayout::text(std::string_view tmpl, std::string* error) {
  AccessLogLayout layout;
  layout.format_ = AccessLogFormat::kText;
  if (tmpl.empty()) {
    *error = "the template is empty";
    return std::nullopt;
  }
  std::string literal;
  size_t i = 0;
  while (i < tmpl.size()) {
    const char c = tmpl[i];
    const auto uc = static_cast<unsigned char>(c);
    if ((uc < 0x20 && c != '\t') || uc == 0x7f) {
      char hex[5] = {'0', 'x', kHex[uc >> 4], kHex[uc & 0xf], 0};
      *error = "control character " + std::string(hex) + " at byte " + std::to_string(i) +
               ": a template is one line (tab is the only control character allowed)";
      return std::nullopt;
    }
    if (c != '$') {
      literal.push_back(c);
      ++i;
      continue;
    }
    const size_t at = i;
    std::string_view name;
    if (i + 1 < tmpl.size() && tmpl[i + 1] == '$') {
      literal.push_back('$');
      i += 2;
      continue;
    }
    if (i + 1 < tmpl.size() && tmpl[i + 1] == '{') {
      const size_t close = tmpl.find('}', i + 2);
      if (close == std::string_view::npos) {
        *error = "'${' at byte " + std::to_string(at) + " has no closing '}'";
        return std::nullopt;
      }
      name = tmpl.substr(i + 2, close - i - 2);
      if (name.empty() || !std::all_of(name.begin(), name.end(), name_char)) {
        *error = "'${" + std::string(name) + "}' at byte " + std::to_string(at) +
                 " is not a variable name (letters, digits and '_')";
        return std::nullopt;
      }
      i = close + 1;
    } else {
      size_t end = i + 1;
      while (end < tmpl.size() && name_char(tmpl[end])) ++end;
      name = tmpl.substr(i + 1, end - i - 1);
      if (name.empty()) {
        *error = "'$' at byte " + std::to_string(at) +
                 " is not followed by a variable name (write $$ for a '$')";
        return std::nullopt;
      }
      i = end;
    }
    const auto field = find_name(name, /*text=*/true);
    if (!field) {
      *error = "unknown variable $" + std::string(name) + " at byte " + std::to_string(at);
      for (const auto& r : kRefused) {
        if (r.prefix ? name.starts_with(r.name) : name == r.name) {
          *error += ": ";
          *error += r.why;
          break;
        }
      }
      return std::nullopt;
    }
    layout.add(literal, *field);
    literal.clear();
  }
  literal.push_back('\n');
  layout.add(literal, LogField::kNone);
  if (layout.max_line_bytes_ > kMaxLineBytes) {
    *error = "the template's longest line would be " + std::to_string(layout.max_line_bytes_) +
             " bytes, above the limit of " + std::to_string(kMaxLineBytes) +
             " (a value counts 4 bytes per input byte up to its cap: see docs/observability.md)";
    return std::nullopt;
  }
  return layout;
}

std::vector<std::string_view> AccessLogLayout::variable_names() {
  std::vector<std::string_view> out;
  for (const auto& n : kJsonFields) out.push_back(n.name);
  for (const auto& n : kNginxVariables) out.push_back(n.name);
  return out;
}

std::vector<std::string_view> AccessLogLayout::json_field_names() {
  std::vector<std::string_view> out;
  for (const auto& n : kJsonFields) out.push_back(n.name);
  return out;
}

std::optional<AccessLogLayout> access_log_layout_from_flags(std::optional<std::string_view> mode,
                                                            std::optional<std::string_view> tmpl,
                                                            std::optional<std::string_view> fields,
                                                            std::string* error) {
  AccessLogFormat format = tmpl ? AccessLogFormat::kText : AccessLogFormat::kJson;
  if (mode) {
    const auto parsed = parse_access_log_format(*mode);
    if (!parsed) {
      *error = "--access-log must be json, text or off";
      return std::nullopt;
    }
    format = *parsed;
  }
  if (tmpl && format == AccessLogFormat::kJson) {
    *error = "--access-log-format is a text template: give it with --access-log text (or alone)";
    return std::nullopt;
  }
  if (fields && format == AccessLogFormat::kText) {
    *error = "--access-log-fields selects JSON fields; with --access-log text the template does";
    return std::nullopt;
  }
  // What is given is checked even with --access-log off, so that a bad value is found before
  // the log is switched on.
  std::string e;
  std::optional<AccessLogLayout> layout;
  if (format == AccessLogFormat::kText || tmpl) {
    layout = AccessLogLayout::text(tmpl ? *tmpl : kDefaultTextTemplate, &e);
    if (!layout) {
      *error = "--access-log-format: " + e;
      return std::nullopt;
    }
  }
  if (fields) {
    layout = AccessLogLayout::json_fields(*fields, &e);
    if (!layout) {
      *error = "--access-log-fields: " + e;
      return std::nullopt;
    }
  }
  if (format == AccessLogFormat::kOff) return AccessLogLayout::off();
  if (!layout) return AccessLogLayout::json();
  return layout;
}

// ---- LineFormatter ----

LineFormatter::LineFormatter(AccessLogLayout layout) : layout_(std::move(layout)) {}

void LineFormatter::set_second(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  int64_t second = ms.count() / 1000;
  int64_t milli = ms.count() % 1000;
  if (milli < 0) {  // before 1970: floor, not truncation
    milli += 1000;
    second -= 1;
  }
  milli_ = static_cast<int>(milli);
  if (second == cached_second_) return;
  cached_second_ = second;
  std::time_t tt = static_cast<std::time_t>(second);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  // Digit by digit (years past 9999 wrap; not our problem).
  auto put = [](char* at, int value, int digits) {
    for (int i = digits - 1; i >= 0; --i) {
      at[i] = static_cast<char>('0' + value % 10);
      value /= 10;
    }
  };
  const int year = (tm.tm_year + 1900) % 10000;
  // "YYYY-MM-DDTHH:MM:SS"
  put(iso_, year, 4);
  iso_[4] = '-';
  put(iso_ + 5, tm.tm_mon + 1, 2);
  iso_[7] = '-';
  put(iso_ + 8, tm.tm_mday, 2);
  iso_[10] = 'T';
  put(iso_ + 11, tm.tm_hour, 2);
  iso_[13] = ':';
  put(iso_ + 14, tm.tm_min, 2);
  iso_[16] = ':';
  put(iso_ + 17, tm.tm_sec, 2);
  // "DD/Mon/YYYY:HH:MM:SS", nginx's $time_local (always UTC here).
  static constexpr char kMonths[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  put(local_, tm.tm_mday, 2);
  local_[2] = '/';
  std::copy_n(kMonths + 3 * std::clamp(tm.tm_mon, 0, 11), 3, local_ + 3);
  local_[6] = '/';
  put(local_ + 7, year, 4);
  local_[11] = ':';
  std::copy_n(iso_ + 11, 8, local_ + 12);  // HH:MM:SS
  auto r = std::to_chars(epoch_, epoch_ + sizeof epoch_, second);
  epoch_size_ = static_cast<size_t>(r.ptr - epoch_);
}

namespace {

// The record's string-valued fields with their input caps, shared by both renderings. `nullable`:
// JSON writes null for an empty value (text writes "-" for any empty value).
struct StringField {
  std::string_view value;
  size_t cap = 0;
  bool nullable = false;
};

// A gRPC path "/pkg.Service/Method": the service ("pkg.Service") or the method ("Method"); empty
// when the request is not gRPC or the path has not that shape.
std::string_view grpc_part(const AccessLogRecord& r, bool method) {
  if (!r.grpc || r.path.empty() || r.path.front() != '/') return {};
  const size_t slash = r.path.rfind('/');
  if (slash <= 1 || slash + 1 == r.path.size()) return {};  // no service, or no method
  return method ? r.path.substr(slash + 1) : r.path.substr(1, slash - 1);
}

std::optional<StringField> string_field(LogField f, const AccessLogRecord& r) {
  switch (f) {
    case LF::kGrpcService:
      return StringField{grpc_part(r, false), kMaxLoggedShortField, true};
    case LF::kGrpcMethod:
      return StringField{grpc_part(r, true), kMaxLoggedShortField, true};
    case LF::kRequestId:
      return StringField{r.request_id, kMaxLoggedShortField};
    case LF::kClient:
      return StringField{r.client, kMaxLoggedShortField};
    case LF::kPeer:
      return StringField{r.peer, kMaxLoggedShortField};
    case LF::kMethod:
      return StringField{r.method, kMaxLoggedShortField};
    case LF::kHost:
      return StringField{r.host, kMaxLoggedHost};
    case LF::kPath:
      return StringField{r.path, kMaxLoggedPath};
    case LF::kUpstream:
      return StringField{r.upstream, kMaxLoggedShortField, true};
    case LF::kIngress:
      return StringField{r.ingress, kMaxLoggedShortField, true};
    case LF::kService:
      return StringField{r.service, kMaxLoggedShortField, true};
    case LF::kUserAgent:
      return StringField{r.user_agent, kMaxLoggedUserAgent, true};
    case LF::kReferer:
      return StringField{referer_without_query(r.referer), kMaxLoggedReferer, true};
    default:
      return std::nullopt;
  }
}

}  // namespace

char* LineFormatter::put_json(LogField f, const AccessLogRecord& r, char* p) const {
  switch (f) {
    case LF::kTime:
      *p++ = '"';
      p = put(p, iso_, 19);
      p = put_millis(p, static_cast<unsigned>(milli_));
      return put(p, "Z\"", 2);
    case LF::kStatus:
      return put_number(p, r.status);
    case LF::kBytesIn:
      return put_number(p, r.bytes_in);
    case LF::kBytesOut:
      return put_number(p, r.bytes_out);
    case LF::kDurationMs:
      return put_ms(p, r.duration);
    case LF::kUpstreamDurationMs:
      return r.upstream_duration.count() < 0 ? put(p, "null", 4) : put_ms(p, r.upstream_duration);
    case LF::kGrpcStatus:
      return r.grpc_status < 0 ? put(p, "null", 4)
                               : put_number(p, static_cast<uint64_t>(r.grpc_status));
    case LF::kProtocol: {
      char buf[16];
      return put_json_string_or_null(p, protocol_name(r.http_version, buf), sizeof buf);
    }
    default:
      if (auto sf = string_field(f, r)) {
        return sf->nullable ? put_json_string_or_null(p, sf->value, sf->cap)
                            : put_json_string(p, sf->value, sf->cap);
      }
      return put(p, "null", 4);  // text-only renderings: json_fields() never selects them
  }
}

char* LineFormatter::put_text(LogField f, const AccessLogRecord& r, char* p) const {
  switch (f) {
    case LF::kTime:
      p = put_millis(put(p, iso_, 19), static_cast<unsigned>(milli_));
      *p++ = 'Z';
      return p;
    case LF::kTimeLocal:
      return put(put(p, local_, 20), " +0000", 6);
    case LF::kTimeIso8601:
      return put(put(p, iso_, 19), "+00:00", 6);
    case LF::kMsec:
      return put_millis(put(p, epoch_, epoch_size_), static_cast<unsigned>(milli_));
    case LF::kStatus:
      return put_number(p, r.status);
    case LF::kBytesIn:
      return put_number(p, r.bytes_in);
    case LF::kBytesOut:
      return put_number(p, r.bytes_out);
    case LF::kDurationMs:
      return put_ms(p, r.duration);
    case LF::kRequestTime:
      return put_seconds(p, r.duration);
    case LF::kUpstreamDurationMs:
      return r.upstream_duration.count() < 0 ? put(p, "-", 1) : put_ms(p, r.upstream_duration);
    case LF::kUpstreamHeaderTime:
      return r.upstream_duration.count() < 0 ? put(p, "-", 1) : put_seconds(p, r.upstream_duration);
    case LF::kGrpcStatus:
      return r.grpc_status < 0 ? put(p, "-", 1)
                               : put_number(p, static_cast<uint64_t>(r.grpc_status));
    case LF::kProtocol: {
      char buf[16];
      return put_text_value(p, protocol_name(r.http_version, buf), sizeof buf);
    }
    case LF::kNamespace: {
      const std::string_view from = r.ingress.empty() ? r.service : r.ingress;
      return put_text_value(p, namespace_of(capped(from, kMaxLoggedShortField)),
                            kMaxLoggedShortField);
    }
    case LF::kIngressName:
      return put_text_value(p, name_of(capped(r.ingress, kMaxLoggedShortField)),
                            kMaxLoggedShortField);
    case LF::kServiceName:
      return put_text_value(p, service_name_of(capped(r.service, kMaxLoggedShortField)),
                            kMaxLoggedShortField);
    case LF::kServicePort:
      return put_text_value(p, service_port_of(capped(r.service, kMaxLoggedShortField)),
                            kMaxLoggedShortField);
    case LF::kProxyUpstreamName: {
      // ingress-nginx's "namespace-service-port".
      const std::string_view s = capped(r.service, kMaxLoggedShortField);
      if (s.empty()) return put(p, "-", 1);
      p = put_text_escaped(p, namespace_of(s));
      *p++ = '-';
      p = put_text_escaped(p, service_name_of(s));
      *p++ = '-';
      return put_text_escaped(p, service_port_of(s));
    }
    case LF::kNone:
      return p;
    default:
      if (auto sf = string_field(f, r)) return put_text_value(p, sf->value, sf->cap);
      return p;
  }
}

size_t LineFormatter::format(const AccessLogRecord& r, char* out) {
  const auto format = layout_.format_;
  if (format == AccessLogFormat::kOff) return 0;
  set_second(r.time);
  const char* literals = layout_.literals_.data();
  char* p = out;
  if (format == AccessLogFormat::kJson) {
    for (const auto& s : layout_.segments_) {
      p = put(p, literals + s.literal_begin, s.literal_size);
      if (s.field != LF::kNone) p = put_json(s.field, r, p);
    }
  } else {
    for (const auto& s : layout_.segments_) {
      p = put(p, literals + s.literal_begin, s.literal_size);
      p = put_text(s.field, r, p);
    }
  }
  return static_cast<size_t>(p - out);
}

void LineFormatter::format(const AccessLogRecord& r, std::string& out) {
  const size_t old = out.size();
  out.resize(old + layout_.max_line_bytes());
  out.resize(old + format(r, out.data() + old));
}

}  // namespace tidegate::dataplane::observability
