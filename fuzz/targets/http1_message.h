#pragma once
// Fuzz targets: an HTTP/1.1 request as a client sends it (http1_request) and a response head as a
// backend sends it (http1_response), through Beast's parser and the strict HTTP/1.1 policy of
// server/http1_policy.h, as the data plane runs them.
//
// http1_request. Input: the bytes a client sends. Invariants, when the head parses:
//   - a refusal is one of the documented answers (400, 405, 414, 431, 501, 505) with a reason;
//   - an accepted request, after the verdict's edits (apply_request_verdict, as the proxy makes
//     them), is unambiguous: one Host with a valid value (HTTP/1.1), at most one Content-Length of
//     digits or exactly "Transfer-Encoding: chunked" (HTTP/1.1) but never both, an origin-form
//     target whose path is normal (no dot segment, normalizing it again changes nothing) and no
//     fragment, or "*" for OPTIONS; websocket_upgrade only for HTTP/1.1 with Upgrade: websocket;
//   - the edited head as it is sent upstream, parsed again, is accepted with no edit left to make
//     and frames the body exactly as the client's head did (chunked, Content-Length, keep-alive,
//     upgrade); followed by its body and a second request, it ends where the body ends and the
//     second request parses on its own: one request upstream per request received.
//
// http1_response. Input: the bytes a backend sends (the head; a body is ignored). Invariants, when
// the head parses and the policy relays it: HTTP/1.0 or 1.1, field values without control
// characters, at most one Content-Length of digits, Transfer-Encoding only as exactly "chunked" in
// HTTP/1.1 and never with Content-Length; Beast's framing (chunked, content length) agrees; the
// head relayed, parsed again, is relayed again with the same framing.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include "common.h"
#include "router/path_normalize.h"
#include "server/headers.h"
#include "server/http1_policy.h"
#include "server/limits.h"

namespace tidegate::fuzz {

namespace detail {

namespace http = boost::beast::http;
using dataplane::server::Fields;
using dataplane::server::FieldsAllocator;

template <bool isRequest>
using HeadParser = http::parser<isRequest, http::empty_body, FieldsAllocator>;

// Feeds `bytes` to `parser` until its header is complete; false when it is not (an error, or
// more bytes needed). *used: the bytes the header took.
template <bool isRequest>
bool parse_head(HeadParser<isRequest>& parser, std::string_view bytes, size_t* used) {
  parser.header_limit(64 * 1024);
  parser.eager(false);
  size_t consumed = 0;
  boost::beast::error_code ec;
  while (!parser.is_header_done() && consumed < bytes.size()) {
    size_t n =
        parser.put(boost::asio::buffer(bytes.data() + consumed, bytes.size() - consumed), ec);
    if (ec == http::error::need_more) return false;
    if (ec) return false;
    consumed += n;
    if (n == 0) return false;
  }
  *used = consumed;
  return parser.is_header_done();
}

template <class Header>
size_t count(const Header& h, http::field f) {
  auto range = h.equal_range(f);
  return static_cast<size_t>(std::distance(range.first, range.second));
}

// The start line and fields as they go on the wire (Beast's operator<< would add a body, and
// for chunked framing its last chunk).
inline void start_line(const http::request_header<Fields>& h, std::string& out) {
  out.append(h.method_string()).append(" ").append(h.target()).append(" HTTP/");
  out.append(std::to_string(h.version() / 10)).append(".").append(std::to_string(h.version() % 10));
}
inline void start_line(const http::response_header<Fields>& h, std::string& out) {
  out.append("HTTP/").append(std::to_string(h.version() / 10)).append(".");
  out.append(std::to_string(h.version() % 10)).append(" ");
  out.append(std::to_string(h.result_int())).append(" ").append(h.reason());
}
template <class Header>
std::string serialize_head(const Header& h) {
  std::string out;
  start_line(h, out);
  out.append("\r\n");
  for (const auto& f : h) out.append(f.name_string()).append(": ").append(f.value()).append("\r\n");
  out.append("\r\n");
  return out;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

inline bool is_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

template <class Header>
std::string check_framing_fields(const Header& h) {
  const size_t lengths = count(h, http::field::content_length);
  const size_t codings = count(h, http::field::transfer_encoding);
  TIDEGATE_FUZZ_CHECK(lengths <= 1, lengths << " Content-Length fields");
  if (lengths == 1) {
    TIDEGATE_FUZZ_CHECK(is_digits(h[http::field::content_length]),
                        "Content-Length " << escape(h[http::field::content_length]));
  }
  if (codings > 0) {
    TIDEGATE_FUZZ_CHECK(codings == 1 && lengths == 0, "Transfer-Encoding with others");
    TIDEGATE_FUZZ_CHECK(h.version() == 11, "Transfer-Encoding in HTTP/1.0");
  }
  for (const auto& f : h) {
    TIDEGATE_FUZZ_CHECK(dataplane::server::is_token(f.name_string()),
                        "field name " << escape(f.name_string()));
    TIDEGATE_FUZZ_CHECK(dataplane::server::is_field_value(f.value()),
                        "field value " << escape(f.value()));
  }
  return {};
}

}  // namespace detail

inline std::string run_http1_request(const uint8_t* data, size_t size) {
  namespace http = boost::beast::http;
  using detail::HeadParser;
  const std::string_view bytes = as_text(data, size);
  const dataplane::server::Limits limits;
  const auto& rules = limits.request_rules;

  HeadParser<true> parser;
  size_t head_bytes = 0;
  if (!detail::parse_head(parser, bytes, &head_bytes)) return {};
  auto& req = parser.get();
  const dataplane::server::RequestVerdict verdict = dataplane::server::check_request(req, rules);
  if (verdict.status != 0) {
    const unsigned s = verdict.status;
    TIDEGATE_FUZZ_CHECK(s == 400 || s == 405 || s == 414 || s == 431 || s == 501 || s == 505,
                        "refused with " << s);
    TIDEGATE_FUZZ_CHECK(!verdict.reason.empty(), "refusal without a reason");
    return {};
  }
  const bool chunked = parser.chunked();
  const auto length = parser.content_length();
  const bool keep_alive = parser.keep_alive();
  dataplane::server::apply_request_verdict(verdict, req);

  // The edited head.
  if (auto failure = detail::check_framing_fields(req); !failure.empty()) return failure;
  TIDEGATE_FUZZ_CHECK(!chunked || req[http::field::transfer_encoding] == "chunked",
                      "chunked framing sent as " << escape(req[http::field::transfer_encoding]));
  const size_t hosts = detail::count(req, http::field::host);
  TIDEGATE_FUZZ_CHECK(hosts == 1 || (hosts == 0 && req.version() == 10), hosts << " Host fields");
  if (hosts == 1) {
    TIDEGATE_FUZZ_CHECK(dataplane::server::is_host_value(req[http::field::host]),
                        "Host " << escape(req[http::field::host]));
  }
  const std::string_view target = req.target();
  TIDEGATE_FUZZ_CHECK(target.find('#') == std::string_view::npos, "fragment in " << escape(target));
  if (target == "*") {
    TIDEGATE_FUZZ_CHECK(req.method() == http::verb::options, "* target for " << req.method());
  } else {
    TIDEGATE_FUZZ_CHECK(!target.empty() && target.front() == '/',
                        "not origin-form: " << escape(target));
    const std::string_view path = target.substr(0, target.find('?'));
    TIDEGATE_FUZZ_CHECK(
        dataplane::router::is_normal_path(path, rules.path) ||
            [&] {
              std::string again;
              return dataplane::router::normalize_path(path, rules.path, again) ==
                         dataplane::router::PathError::kNone &&
                     again == path;
            }(),
        "path sent upstream is not normal: " << escape(path));
  }
  if (verdict.websocket_upgrade) {
    TIDEGATE_FUZZ_CHECK(req.version() == 11, "upgrade in HTTP/1.0");
    TIDEGATE_FUZZ_CHECK(
        detail::count(req, http::field::upgrade) == 1 &&
            boost::beast::iequals(detail::trim(req[http::field::upgrade]), "websocket"),
        "upgrade to " << escape(req[http::field::upgrade]));
  }

  if (!verdict.other_upgrade.empty()) {
    const std::string& other = verdict.other_upgrade;
    TIDEGATE_FUZZ_CHECK(!verdict.websocket_upgrade, "two upgrades at once");
    TIDEGATE_FUZZ_CHECK(req.version() == 11, "other upgrade in HTTP/1.0");
    TIDEGATE_FUZZ_CHECK(other.substr(0, other.find('/')) != "h2c", "h2c offered as an upgrade");
    TIDEGATE_FUZZ_CHECK(
        other.find_first_of(", \t") == std::string::npos &&
            std::none_of(other.begin(), other.end(), [](char c) { return c >= 'A' && c <= 'Z'; }),
        "other upgrade " << escape(other));
  }

  // The head as sent upstream, parsed again: accepted as it is, the same framing.
  const std::string head = detail::serialize_head(req);
  HeadParser<true> again;
  size_t again_bytes = 0;
  TIDEGATE_FUZZ_CHECK(detail::parse_head(again, head, &again_bytes),
                      "the head sent upstream does not parse: " << escape(head));
  TIDEGATE_FUZZ_CHECK(again_bytes == head.size(), "the head sent upstream has bytes after it");
  const auto second = dataplane::server::check_request(again.get(), rules);
  TIDEGATE_FUZZ_CHECK(second.status == 0, "the head sent upstream is refused: " << second.reason);
  TIDEGATE_FUZZ_CHECK(!second.replace_target && !second.replace_host && !second.canonical_chunked,
                      "the head sent upstream still needs edits: " << escape(head));
  TIDEGATE_FUZZ_CHECK(again.chunked() == chunked, "chunked differs upstream");
  TIDEGATE_FUZZ_CHECK(again.content_length() == length, "Content-Length differs upstream");
  TIDEGATE_FUZZ_CHECK(again.keep_alive() == keep_alive, "keep-alive differs upstream");
  TIDEGATE_FUZZ_CHECK(second.websocket_upgrade == verdict.websocket_upgrade,
                      "upgrade differs upstream");

  // One request per request: head + body + a second request ends exactly at the body's end.
  if (!chunked && length.value_or(0) <= 4096) {
    const std::string body(length.value_or(0), 'b');
    const std::string next = "GET /next HTTP/1.1\r\nHost: next.example\r\n\r\n";
    const std::string stream = head + body + next;
    http::request_parser<http::string_body, detail::FieldsAllocator> whole;
    whole.header_limit(64 * 1024);
    boost::beast::error_code ec;
    size_t used = 0;
    while (!whole.is_done() && used < stream.size()) {
      size_t n = whole.put(boost::asio::buffer(stream.data() + used, stream.size() - used), ec);
      used += n;
      if (ec || n == 0) break;
    }
    TIDEGATE_FUZZ_CHECK(!ec && whole.is_done(), "upstream request does not end: " << ec.message());
    TIDEGATE_FUZZ_CHECK(used == head.size() + body.size(), "upstream request ends at "
                                                               << used << ", not "
                                                               << head.size() + body.size());
    HeadParser<true> follower;
    size_t follower_bytes = 0;
    TIDEGATE_FUZZ_CHECK(detail::parse_head(follower, stream.substr(used), &follower_bytes) &&
                            follower.get().target() == "/next",
                        "the next request is not parsed on its own");
  }
  return {};
}

inline std::string run_http1_response(const uint8_t* data, size_t size) {
  namespace http = boost::beast::http;
  using detail::HeadParser;
  HeadParser<false> parser;
  size_t head_bytes = 0;
  if (!detail::parse_head(parser, as_text(data, size), &head_bytes)) return {};
  const auto& res = parser.get();
  const dataplane::server::ResponseVerdict verdict = dataplane::server::check_response(res);
  if (verdict.status != 0) {
    TIDEGATE_FUZZ_CHECK(verdict.status == 502, "refused with " << verdict.status);
    TIDEGATE_FUZZ_CHECK(!verdict.reason.empty(), "refusal without a reason");
    return {};
  }
  TIDEGATE_FUZZ_CHECK(res.version() == 10 || res.version() == 11, "version " << res.version());
  if (auto failure = detail::check_framing_fields(res); !failure.empty()) return failure;
  const bool has_te = detail::count(res, http::field::transfer_encoding) == 1;
  if (has_te) {
    const std::string_view te = detail::trim(res[http::field::transfer_encoding]);
    TIDEGATE_FUZZ_CHECK(boost::beast::iequals(te, "chunked"), "relayed TE " << escape(te));
  }
  TIDEGATE_FUZZ_CHECK(parser.chunked() == has_te, "Beast's chunked differs from the field");
  if (detail::count(res, http::field::content_length) == 1 && !has_te) {
    TIDEGATE_FUZZ_CHECK(parser.content_length().has_value(), "Content-Length not framing");
  }

  const std::string head = detail::serialize_head(res);
  HeadParser<false> again;
  size_t again_bytes = 0;
  TIDEGATE_FUZZ_CHECK(detail::parse_head(again, head, &again_bytes),
                      "the relayed head does not parse: " << escape(head));
  TIDEGATE_FUZZ_CHECK(dataplane::server::check_response(again.get()).status == 0,
                      "the relayed head is refused");
  TIDEGATE_FUZZ_CHECK(again.chunked() == parser.chunked(), "chunked differs relayed");
  TIDEGATE_FUZZ_CHECK(again.content_length() == parser.content_length(),
                      "Content-Length differs relayed");
  return {};
}

}  // namespace tidegate::fuzz
