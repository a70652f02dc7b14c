#include "server/headers.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "server/worker.h"

namespace tidegate::dataplane::server {

namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// Up to this many Connection tokens, the fields are walked once and each compared with every
// token; beyond it, each token is looked up in the field set.
constexpr size_t kFewConnectionTokens = 8;

// Fields a Connection token does not remove: Connection itself goes last (the tokens view its
// lines), and framing and Host are not the sender's to drop (the proxy rewrites framing itself).
bool kept_whatever_named(http::field f) {
  switch (f) {
    case http::field::connection:
    case http::field::content_length:
    case http::field::transfer_encoding:
    case http::field::host:
      return true;
    default:
      return false;
  }
}

}  // namespace

void remove_hop_by_hop(Fields& fields) {
  // One walk over the fields: those hop-by-hop by definition go at once. HTTP2-Settings is
  // connection-specific by definition (RFC 9113 section 8.2.2), even when Connection does not
  // name it: an h2c upgrade is never forwarded.
  bool connection = false;
  for (auto it = fields.begin(); it != fields.end();) {
    switch (it->name()) {
      case http::field::keep_alive:
      case http::field::proxy_connection:
      case http::field::te:
      case http::field::trailer:
      case http::field::upgrade:
      case http::field::http2_settings:
        it = fields.erase(it);
        break;
      case http::field::connection:
        connection = true;
        ++it;
        break;
      default:
        ++it;
    }
  }
  if (!connection) return;
  // Every Connection line counts, and each of its tokens names a field to drop (but those
  // kept_whatever_named).
  boost::container::small_vector<std::string_view, kFewConnectionTokens> named;
  for (const auto& f : fields) {
    if (f.name() != http::field::connection) continue;
    for (auto token : http::token_list(f.value())) named.emplace_back(token.data(), token.size());
  }
  if (named.size() > kFewConnectionTokens) {
    // Many tokens: one lookup in the field set per token. Comparing each field with each token
    // would let a head of many fields and many tokens cost a worker seconds.
    for (std::string_view token : named) {
      if (!kept_whatever_named(http::string_to_field(token))) fields.erase(token);
    }
  } else {
    for (auto it = fields.begin(); it != fields.end();) {
      const bool drop = !kept_whatever_named(it->name()) &&
                        std::any_of(named.begin(), named.end(), [&](std::string_view token) {
                          return beast::iequals(token, it->name_string());
                        });
      it = drop ? fields.erase(it) : std::next(it);
    }
  }
  fields.erase(http::field::connection);
}

void add_forwarded_headers(http::request_header<Fields>& req, std::string_view peer,
                           std::string_view proto) {
  auto range = req.equal_range("X-Forwarded-For");
  if (range.first == range.second) {
    req.set("X-Forwarded-For", peer);
  } else {
    // Several lines are one list (RFC 9110 section 5.3): join them, then add this hop.
    std::string value;
    for (auto it = range.first; it != range.second; ++it) {
      value.append(it->value().data(), it->value().size());
      value += ", ";
    }
    value.append(peer.data(), peer.size());
    req.set("X-Forwarded-For", value);
  }
  req.set("X-Forwarded-Proto", proto);
  auto host = req[http::field::host];
  if (host.empty()) {
    req.erase("X-Forwarded-Host");  // never pass on a client's claim
  } else {
    req.set("X-Forwarded-Host", host);
  }
}

namespace {

bool valid_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

void ensure_request_id(http::request_header<Fields>& req, Worker& worker) {
  if (valid_request_id(req["X-Request-ID"])) return;
  static constexpr char kHex[] = "0123456789abcdef";
  char id[32];
  uint64_t a = worker.next_random(), b = worker.next_random();
  for (int i = 0; i < 16; ++i) {
    id[i] = kHex[(a >> (i * 4)) & 0xf];
    id[16 + i] = kHex[(b >> (i * 4)) & 0xf];
  }
  req.set("X-Request-ID", std::string_view(id, sizeof id));
}

bool is_idempotent(http::verb method) {
  switch (method) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::options:
    case http::verb::trace:
    case http::verb::put:
    case http::verb::delete_:
      return true;
    default:
      return false;
  }
}

bool is_http_parse_error(const boost::system::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

std::string_view host_without_port(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  auto colon = host.find(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

RequestTarget split_target(std::string_view target, std::string_view host_header) {
  RequestTarget t{host_header, target, target};
  if (!target.empty() && target.front() != '/') {
    // absolute-form: scheme "://" authority path
    auto scheme_end = target.find("://");
    if (scheme_end != std::string_view::npos) {
      auto rest = target.substr(scheme_end + 3);
      auto slash = rest.find_first_of("/?");
      t.host = rest.substr(0, slash);
      t.path = slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
    }
  }
  t.path_and_query = t.path;
  auto q = t.path.find('?');
  if (q != std::string_view::npos) t.path = t.path.substr(0, q);
  if (t.path.empty()) t.path = "/";
  return t;
}

bool is_connection_specific(std::string_view n) {
  return n == "connection" || n == "keep-alive" || n == "proxy-connection" ||
         n == "transfer-encoding" || n == "upgrade" || n == "te" || n == "http2-settings";
}

}  // namespace tidegate::dataplane::server
