#include "server/http1_policy.h"

#include <array>

#include <boost/beast/core/string.hpp>

#include "text/text.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

namespace {

constexpr std::string_view kVersionLength = "HTTP/1.1";

// reg-name characters but '%' (RFC 3986 section 3.2.2): one table lookup per byte. Tokens and
// field values are text/http_syntax.h's, shared with the controller's validation.
constexpr std::array<bool, 256> kRegName = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("-._~!$&'()*+,;=").find(static_cast<char>(c)) != std::string_view::npos;
  }
  return t;
}();

bool is_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// reg-name characters (RFC 3986: unreserved / pct-encoded / sub-delims), '%' checked by caller.
bool is_reg_name_char(unsigned char c) { return kRegName[c]; }

size_t request_line_bytes(const http::request_header<Fields>& req) {
  return req.method_string().size() + 1 + req.target().size() + 1 + kVersionLength.size();
}

RequestVerdict refuse(unsigned status, std::string_view reason) {
  RequestVerdict v;
  v.status = status;
  v.reason = reason;
  return v;
}

// Transfer-Encoding over all its field lines (RFC 9112 section 6.1, 6.3; RFC 9110 section
// 5.6.1 for empty list elements). Returns 0 when the codings are exactly "chunked", else the
// answer: 400 when chunked is not the final coding (the length cannot be determined), is
// applied twice, or an element is not a token; 501 for any coding before a final chunked (we
// implement none but chunked).
struct TransferCodings {
  unsigned status = 0;
  std::string_view reason;
  bool canonical = true;  // a single field whose value is exactly "chunked"
};

template <class Header>
TransferCodings judge_transfer_encoding(const Header& h) {
  TransferCodings out;
  size_t codings = 0, lines = 0;
  bool chunked_last = false, chunked_seen = false, chunked_twice = false, other = false;
  auto range = h.equal_range(http::field::transfer_encoding);
  for (auto it = range.first; it != range.second; ++it) {
    ++lines;
    if (it->value() != "chunked") out.canonical = false;
    std::string_view list = it->value();
    for (;;) {
      auto comma = list.find(',');
      auto element = text::trim_ows(list.substr(0, comma));
      if (!element.empty()) {
        if (!is_token(element)) {
          out.status = 400;
          out.reason = "bad request: malformed Transfer-Encoding\n";
          return out;
        }
        ++codings;
        const bool chunked = boost::beast::iequals(element, "chunked");
        if (chunked && chunked_seen) chunked_twice = true;
        chunked_seen = chunked_seen || chunked;
        chunked_last = chunked;
        other = other || !chunked;
      }
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  if (lines > 1) out.canonical = false;
  if (codings == 0 || !chunked_last) {
    out.status = 400;
    out.reason = "bad request: Transfer-Encoding does not end in chunked\n";
  } else if (chunked_twice) {
    out.status = 400;
    out.reason = "bad request: chunked applied twice\n";
  } else if (other) {
    out.status = 501;
    out.reason = "transfer coding not implemented\n";
  }
  return out;
}

// The head's fields in one pass: characters, count, the framing fields' counts and the first
// value of each (so that the checks look none of them up again).
struct FieldScan {
  bool bad_character = false;
  size_t fields = 0, hosts = 0, content_lengths = 0, transfer_encodings = 0, upgrades = 0;
  std::string_view host, content_length, transfer_encoding, upgrade;
};

template <class Header>
FieldScan scan_fields(const Header& h) {
  FieldScan s;
  for (const auto& f : h) {
    ++s.fields;
    if (!is_token(f.name_string()) || !is_field_value(f.value())) s.bad_character = true;
    switch (f.name()) {
      case http::field::host:
        if (s.hosts++ == 0) s.host = f.value();
        break;
      case http::field::content_length:
        if (s.content_lengths++ == 0) s.content_length = f.value();
        break;
      case http::field::transfer_encoding:
        if (s.transfer_encodings++ == 0) s.transfer_encoding = f.value();
        break;
      case http::field::upgrade:
        if (s.upgrades++ == 0) s.upgrade = f.value();
        break;
      default:
        break;
    }
  }
  return s;
}

// The request target (RFC 9112 section 3.2), normalized into `v` (or refused).
void judge_target(const http::request_header<Fields>& req, const RequestRules& rules,
                  RequestVerdict& v) {
  const std::string_view target = req.target();
  if (req.method() == http::verb::connect) {
    v = refuse(405, "CONNECT is not supported\n");
    return;
  }
  if (target.find('#') != std::string_view::npos) {
    v = refuse(400, "bad request: fragment in the request target\n");
    return;
  }
  if (target == "*") {
    // asterisk-form: OPTIONS only; forwarded as it is.
    if (req.method() != http::verb::options) v = refuse(400, "bad request: * target\n");
    return;
  }
  std::string_view path_and_query;
  bool absolute = false;
  if (!target.empty() && target.front() == '/') {
    path_and_query = target;
  } else {
    // absolute-form: "http://" or "https://" authority [ path-abempty ] [ "?" query ]
    auto sep = target.find("://");
    auto scheme = sep == std::string_view::npos ? std::string_view() : target.substr(0, sep);
    if (!boost::beast::iequals(scheme, "http") && !boost::beast::iequals(scheme, "https")) {
      v = refuse(400, "bad request: malformed request target\n");
      return;
    }
    auto rest = target.substr(sep + 3);
    auto end = rest.find_first_of("/?");
    auto authority = rest.substr(0, end);
    if (authority.empty() || authority.find('@') != std::string_view::npos ||
        !is_host_value(authority)) {
      v = refuse(400, "bad request: malformed authority in the request target\n");
      return;
    }
    v.replace_host = true;
    v.host.assign(authority.data(), authority.size());
    path_and_query = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    absolute = true;
  }
  auto question = path_and_query.find('?');
  std::string_view path = path_and_query.substr(0, question);
  std::string_view query =
      question == std::string_view::npos ? std::string_view() : path_and_query.substr(question);
  if (path.empty()) path = "/";  // "http://a.example" or "http://a.example?q"
  if (!absolute && router::is_normal_path(path, rules.path)) return;
  std::string normal;
  if (auto e = router::normalize_path(path, rules.path, normal); e != router::PathError::kNone) {
    switch (e) {
      case router::PathError::kBadPercent:
        v = refuse(400, "bad request: malformed percent-encoding in the path\n");
        break;
      case router::PathError::kEscapedSlash:
        v = refuse(400, "bad request: encoded slash or backslash in the path\n");
        break;
      case router::PathError::kAboveRoot:
        v = refuse(400, "bad request: path goes above the root\n");
        break;
      default:
        v = refuse(400, "bad request: malformed path\n");
    }
    return;
  }
  if (!absolute && normal == path) return;
  v.replace_target = true;
  v.target = std::move(normal);
  v.target.append(query.data(), query.size());
}

}  // namespace

bool is_host_value(std::string_view s) {
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    // IP-literal: IPv6address or IPvFuture; checked loosely (hex, ':', '.', and IPvFuture's
    // characters), exactly by the router's lookup.
    auto close = s.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (unsigned char c : s.substr(1, close - 1)) {
      if (!is_reg_name_char(c) && c != ':') return false;
    }
    auto after = s.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port = after.substr(1);
    }
  } else {
    auto colon = s.find(':');
    auto host = s.substr(0, colon);
    for (size_t i = 0; i < host.size(); ++i) {
      const char c = host[i];
      if (c == '%') {
        if (i + 2 >= host.size() || !is_hex(host[i + 1]) || !is_hex(host[i + 2])) return false;
        i += 2;
      } else if (!is_reg_name_char(static_cast<unsigned char>(c))) {
        return false;
      }
    }
    if (colon != std::string_view::npos) port = s.substr(colon + 1);
  }
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

RequestVerdict check_request(const http::request_header<Fields>& req, const RequestRules& rules) {
  const unsigned version = req.version();
  if (version != 10 && version != 11) return refuse(505, "HTTP version not supported\n");
  if (request_line_bytes(req) > rules.max_request_line_bytes) {
    return refuse(414, "request target too long\n");
  }

  const FieldScan s = scan_fields(req);
  if (s.fields > rules.max_header_fields) return refuse(431, "too many header fields\n");
  if (s.bad_character) return refuse(400, "bad request: invalid character in a header field\n");

  // Host (RFC 9112 section 3.2): exactly one in HTTP/1.1, at most one in HTTP/1.0, and a valid
  // value; two Hosts would let the proxy and the backend route on different ones.
  if (s.hosts > 1) return refuse(400, "more than one Host field\n");
  if (s.hosts == 0 && version >= 11) return refuse(400, "missing Host field\n");
  if (s.hosts == 1 && !is_host_value(s.host)) {
    return refuse(400, "bad request: malformed Host field\n");
  }

  // Framing (RFC 9112 section 6).
  if (s.content_lengths > 1) return refuse(400, "bad request: more than one Content-Length\n");
  if (s.content_lengths == 1 && !is_digits(s.content_length)) {
    return refuse(400, "bad request: malformed Content-Length\n");
  }
  RequestVerdict v;
  if (s.transfer_encodings > 0) {
    if (version < 11) return refuse(400, "bad request: Transfer-Encoding in HTTP/1.0\n");
    if (s.content_lengths > 0) {
      return refuse(400, "bad request: Content-Length with Transfer-Encoding\n");
    }
    const TransferCodings te = judge_transfer_encoding(req);
    if (te.status != 0) return refuse(te.status, te.reason);
    v.canonical_chunked = !te.canonical;
  }

  judge_target(req, rules, v);
  if (v.status != 0) return v;

  // Upgrades: a WebSocket upgrade of an HTTP/1.1 request is forwarded as one; another single
  // protocol (not h2c) only where the route allows it (the exchange decides).
  if (version == 11 && s.upgrades == 1) {
    bool connection_upgrade = false;
    auto range = req.equal_range(http::field::connection);
    for (auto it = range.first; it != range.second; ++it) {
      if (text::has_token(it->value(), "upgrade")) connection_upgrade = true;
    }
    const std::string_view protocol = text::trim_ows(s.upgrade);
    if (connection_upgrade && boost::beast::iequals(protocol, "websocket")) {
      v.websocket_upgrade = true;
    } else if (connection_upgrade && !protocol.empty() &&
               protocol.find_first_of(", \t") == std::string_view::npos) {
      const auto slash = protocol.find('/');
      const auto name = protocol.substr(0, slash);
      if (is_token(name) && !boost::beast::iequals(name, "h2c") &&
          (slash == std::string_view::npos || is_token(protocol.substr(slash + 1)))) {
        v.other_upgrade.assign(protocol.data(), protocol.size());
        for (auto& c : v.other_upgrade) {
          if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        }
      }
    }
  }
  return v;
}

void apply_request_verdict(const RequestVerdict& verdict, http::request_header<Fields>& req) {
  if (verdict.replace_host) req.set(http::field::host, verdict.host);
  if (verdict.replace_target) req.target(verdict.target);
  if (verdict.canonical_chunked) req.set(http::field::transfer_encoding, "chunked");
}

unsigned header_overflow_status(const http::request_header<Fields>& partial,
                                const RequestRules& rules) {
  if (partial.target().empty()) return 414;
  return request_line_bytes(partial) > rules.max_request_line_bytes ? 414 : 431;
}

ResponseVerdict check_response(const http::response_header<Fields>& res) {
  auto bad = [](std::string_view reason) { return ResponseVerdict{502, reason}; };
  const unsigned version = res.version();
  if (version != 10 && version != 11) return bad("upstream sent an unsupported HTTP version");
  const FieldScan s = scan_fields(res);
  if (s.bad_character) return bad("upstream sent an invalid character in a header field");
  if (s.content_lengths > 1) return bad("upstream sent more than one Content-Length");
  if (s.content_lengths == 1 && !is_digits(s.content_length)) {
    return bad("upstream sent a malformed Content-Length");
  }
  if (s.transfer_encodings > 0) {
    if (s.content_lengths > 0) return bad("upstream sent Content-Length and Transfer-Encoding");
    if (version < 11) return bad("upstream sent Transfer-Encoding in HTTP/1.0");
    if (s.transfer_encodings > 1 ||
        !boost::beast::iequals(text::trim_ows(s.transfer_encoding), "chunked")) {
      return bad("upstream sent a Transfer-Encoding other than chunked");
    }
  }
  return {};
}

}  // namespace tidegate::dataplane::server
