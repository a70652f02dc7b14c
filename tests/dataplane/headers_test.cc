// Table tests for the header handling of the HTTP paths: hop-by-hop removal, X-Forwarded-*,
// X-Request-ID, request-target splitting and method idempotency.

#include "server/headers.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/error.hpp>

#include "server/limits.h"
#include "server/worker.h"
#include "tls/tls_context.h"

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

// ---- Builders ----

using FieldList = std::vector<std::pair<std::string, std::string>>;

http::request_header<Fields> request(const FieldList& fields) {
  http::request_header<Fields> req;
  req.method(http::verb::get);
  req.target("/");
  req.version(11);
  for (const auto& [name, value] : fields) req.insert(name, value);
  return req;
}

// "Name: value" for every field line, in order.
std::vector<std::string> lines(const Fields& fields) {
  std::vector<std::string> out;
  for (const auto& f : fields) {
    out.push_back(std::string(f.name_string()) + ": " + std::string(f.value()));
  }
  return out;
}

std::vector<std::string> lines(const FieldList& fields) {
  std::vector<std::string> out;
  for (const auto& [name, value] : fields) out.push_back(name + ": " + value);
  return out;
}

// Every value of the field `name`, in order.
std::vector<std::string> values(const Fields& fields, std::string_view name) {
  std::vector<std::string> out;
  auto [first, last] = fields.equal_range(name);
  for (auto it = first; it != last; ++it) out.emplace_back(it->value());
  return out;
}

using Values = std::vector<std::string>;

// ---- remove_hop_by_hop ----

struct HopCase {
  std::string name;
  FieldList in;
  FieldList want;
};

TEST(RemoveHopByHopTest, Table) {
  const std::vector<HopCase> cases = {
      {"nothing to remove",
       {{"Host", "foo.com"}, {"Accept", "*/*"}, {"Content-Length", "3"}},
       {{"Host", "foo.com"}, {"Accept", "*/*"}, {"Content-Length", "3"}}},
      {"hop-by-hop by definition",
       {{"Host", "foo.com"},
        {"Keep-Alive", "timeout=5"},
        {"Proxy-Connection", "keep-alive"},
        {"TE", "trailers"},
        {"Trailer", "X-Checksum"},
        {"Upgrade", "websocket"},
        {"HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"},
        {"Accept", "*/*"}},
       {{"Host", "foo.com"}, {"Accept", "*/*"}}},
      {"Connection: close", {{"Connection", "close"}, {"Accept", "*/*"}}, {{"Accept", "*/*"}}},
      {"Connection: keep-alive also drops Keep-Alive",
       {{"Connection", "keep-alive"}, {"Keep-Alive", "timeout=5"}, {"Accept", "*/*"}},
       {{"Accept", "*/*"}}},
      {"fields named by Connection, any case",
       {{"Connection", "X-Foo, x-BAR"}, {"x-foo", "1"}, {"X-Bar", "2"}, {"X-Baz", "3"}},
       {{"X-Baz", "3"}}},
      {"every line of a named field",
       {{"Connection", "x-foo"}, {"X-Foo", "1"}, {"X-Keep", "k"}, {"X-Foo", "2"}},
       {{"X-Keep", "k"}}},
      {"empty list elements",
       {{"Connection", " , X-Foo ,, close,"}, {"X-Foo", "1"}, {"Accept", "*/*"}},
       {{"Accept", "*/*"}}},
      {"Connection cannot remove Host or Transfer-Encoding",
       {{"Connection", "host, transfer-encoding"},
        {"Host", "foo.com"},
        {"Transfer-Encoding", "chunked"}},
       {{"Host", "foo.com"}, {"Transfer-Encoding", "chunked"}}},
      {"Transfer-Encoding is left alone",
       {{"Transfer-Encoding", "chunked"}},
       {{"Transfer-Encoding", "chunked"}}},
      // RFC 9110 section 7.6.1: every connection option must go, however many there are.
      {"more than eight fields named by Connection",
       {{"Connection", "x-1, x-2, x-3, x-4, x-5, x-6, x-7, x-8, x-9, x-10"},
        {"X-1", "v"},
        {"X-2", "v"},
        {"X-3", "v"},
        {"X-4", "v"},
        {"X-5", "v"},
        {"X-6", "v"},
        {"X-7", "v"},
        {"X-8", "v"},
        {"X-9", "secret"},
        {"X-10", "secret"},
        {"Accept", "*/*"}},
       {{"Accept", "*/*"}}},
      // Connection is a list; several field lines form one list (RFC 9110 section 5.3).
      {"Connection on several lines",
       {{"Connection", "close"},
        {"Connection", "X-Internal"},
        {"X-Internal", "secret"},
        {"Accept", "*/*"}},
       {{"Accept", "*/*"}}},
      // The tokens view the Connection lines: a token naming Connection must not free them
      // before the tokens after it are read. Fields Beast knows by name are named too.
      {"Connection names itself and a field Beast knows",
       {{"Connection", "connection, Cookie, x-a"},
        {"Cookie", "c=1"},
        {"X-A", "1"},
        {"Accept", "*/*"}},
       {{"Accept", "*/*"}}},
      // More than eight tokens take the other way (a lookup per token): the same rules.
      {"many tokens, naming Connection, Host, framing and known fields",
       {{"Connection",
         "x-1, connection, HOST, cookie, x-2, x-3, x-4, x-5, X-6, content-length, "
         "transfer-encoding"},
        {"Host", "foo.com"},
        {"Cookie", "c=1"},
        {"X-1", "v"},
        {"x-6", "v"},
        {"X-6", "w"},
        {"Content-Length", "0"},
        {"Accept", "*/*"}},
       {{"Host", "foo.com"}, {"Content-Length", "0"}, {"Accept", "*/*"}}},
      // A body's framing must survive: forwarding the body of a request whose Content-Length was
      // dropped would let the upstream read the body as a second request (request smuggling).
      {"Connection cannot remove Content-Length",
       {{"Connection", "content-length"}, {"Content-Length", "5"}},
       {{"Content-Length", "5"}}},
  };
  for (const auto& c : cases) {
    auto req = request(c.in);
    remove_hop_by_hop(static_cast<Fields&>(req));
    EXPECT_EQ(lines(req), lines(c.want)) << c.name;
  }
}

TEST(RemoveHopByHopTest, WorksOnResponsesToo) {
  http::response<http::empty_body, Fields> res{http::status::ok, 11};
  res.insert("Connection", "close, X-Upstream-Private");
  res.insert("X-Upstream-Private", "1");
  res.insert("Keep-Alive", "timeout=5");
  res.insert("Content-Type", "text/plain");
  remove_hop_by_hop(res);
  EXPECT_EQ(lines(res.base()), (Values{"Content-Type: text/plain"}));
}

// ---- add_forwarded_headers ----

struct ForwardedCase {
  std::string name;
  FieldList in;
  std::string peer;
  std::string proto;
  Values want_for;    // every X-Forwarded-For line
  Values want_proto;  // every X-Forwarded-Proto line
  Values want_host;   // every X-Forwarded-Host line
};

TEST(AddForwardedHeadersTest, Table) {
  const std::vector<ForwardedCase> cases = {
      {"first hop", {{"Host", "foo.com"}}, "10.0.0.1", "http", {"10.0.0.1"}, {"http"}, {"foo.com"}},
      {"appends to the client's chain",
       {{"Host", "foo.com"}, {"X-Forwarded-For", "1.1.1.1, 2.2.2.2"}},
       "10.0.0.1",
       "http",
       {"1.1.1.1, 2.2.2.2, 10.0.0.1"},
       {"http"},
       {"foo.com"}},
      {"IPv6 peer", {{"Host", "foo.com"}}, "fd00::1", "https", {"fd00::1"}, {"https"}, {"foo.com"}},
      {"client's X-Forwarded-Proto is replaced",
       {{"Host", "foo.com"}, {"X-Forwarded-Proto", "https"}, {"X-Forwarded-Proto", "ftp"}},
       "10.0.0.1",
       "http",
       {"10.0.0.1"},
       {"http"},
       {"foo.com"}},
      {"client's X-Forwarded-Host is replaced",
       {{"Host", "foo.com:8080"}, {"X-Forwarded-Host", "evil.com"}},
       "10.0.0.1",
       "http",
       {"10.0.0.1"},
       {"http"},
       {"foo.com:8080"}},
      // The header promises that a client cannot choose X-Forwarded-Host; without a Host header
      // (HTTP/1.0) there is no value of this hop to set, so the client's must not get through.
      {"client's X-Forwarded-Host without a Host header",
       {{"X-Forwarded-Host", "evil.com"}},
       "10.0.0.1",
       "http",
       {"10.0.0.1"},
       {"http"},
       {}},
      // Several X-Forwarded-For lines are one list (RFC 9110 section 5.3): none may be lost.
      {"X-Forwarded-For on several lines",
       {{"Host", "foo.com"}, {"X-Forwarded-For", "1.1.1.1"}, {"X-Forwarded-For", "2.2.2.2"}},
       "10.0.0.1",
       "http",
       {"1.1.1.1, 2.2.2.2, 10.0.0.1"},
       {"http"},
       {"foo.com"}},
  };
  for (const auto& c : cases) {
    auto req = request(c.in);
    add_forwarded_headers(req, c.peer, c.proto);
    EXPECT_EQ(values(req, "X-Forwarded-For"), c.want_for) << c.name;
    EXPECT_EQ(values(req, "X-Forwarded-Proto"), c.want_proto) << c.name;
    EXPECT_EQ(values(req, "X-Forwarded-Host"), c.want_host) << c.name;
    EXPECT_EQ(values(req, "Host"), values(request(c.in), "Host")) << c.name;  // untouched
  }
}

// ---- ensure_request_id ----

bool is_generated_id(const std::string& id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

struct RequestIdCase {
  std::string name;
  std::optional<std::string> in;  // nullopt: no X-Request-ID
  bool kept;
};

TEST(EnsureRequestIdTest, Table) {
  const tls::ServerSettings tls_settings{};
  Worker worker(0, Limits{}, nullptr,
                tls_settings);  // never started: only its random numbers are used
  const std::vector<RequestIdCase> cases = {
      {"missing", std::nullopt, false},
      {"empty", "", false},
      {"uuid", "2f1e6c2a-5d7b-4c1e-9a57-0c3b3f1d9e21", true},
      {"one character", "x", true},
      {"all visible ASCII", "!~{}[]<>\"'", true},
      {"128 characters", std::string(128, 'a'), true},
      {"129 characters", std::string(129, 'a'), false},
      {"space", "a b", false},
      {"tab", "a\tb", false},
      {"DEL", "a\x7f", false},
      {"non-ASCII", "caf\xc3\xa9", false},
  };
  std::set<std::string> generated;
  for (const auto& c : cases) {
    auto req = request({});
    if (c.in) req.set("X-Request-ID", *c.in);
    ensure_request_id(req, worker);
    auto ids = values(req, "X-Request-ID");
    ASSERT_EQ(ids.size(), 1u) << c.name;
    if (c.kept) {
      EXPECT_EQ(ids[0], *c.in) << c.name;
    } else {
      EXPECT_TRUE(is_generated_id(ids[0])) << c.name << ": " << ids[0];
      EXPECT_TRUE(generated.insert(ids[0]).second) << c.name << ": id repeated " << ids[0];
    }
  }
}

// ---- split_target ----

struct TargetCase {
  std::string target;
  std::string host_header;
  std::string want_host;
  std::string want_path;
};

TEST(SplitTargetTest, Table) {
  const std::vector<TargetCase> cases = {
      {"/", "foo.com", "foo.com", "/"},
      {"/a/b", "foo.com", "foo.com", "/a/b"},
      {"/a?b=1", "foo.com:8080", "foo.com:8080", "/a"},
      {"/a?b=1?c", "foo.com", "foo.com", "/a"},
      {"/?x", "foo.com", "foo.com", "/"},
      {"//a//b", "foo.com", "foo.com", "//a//b"},
      {"", "foo.com", "foo.com", "/"},
      {"/a", "", "", "/a"},
      // absolute-form: the target's authority wins over the Host header (RFC 9112 section 3.2.2)
      {"http://bar.com/x?y", "foo.com", "bar.com", "/x"},
      {"http://bar.com", "foo.com", "bar.com", "/"},
      {"http://bar.com?q", "foo.com", "bar.com", "/"},
      {"http://bar.com/", "", "bar.com", "/"},
      {"https://bar.com:8443/p/q", "foo.com", "bar.com:8443", "/p/q"},
      {"http://[::1]:80/p", "foo.com", "[::1]:80", "/p"},
      {"HTTP://BAR.COM/P", "foo.com", "BAR.COM", "/P"},
      {"http:///p", "foo.com", "", "/p"},
      // neither origin- nor absolute-form: left as the path, for the router not to match
      {"*", "foo.com", "foo.com", "*"},
      {"foo.com:443", "foo.com", "foo.com", "foo.com:443"},
  };
  for (const auto& c : cases) {
    RequestTarget t = split_target(c.target, c.host_header);
    EXPECT_EQ(t.host, c.want_host)
        << "\"" << c.target << "\" with Host \"" << c.host_header << "\"";
    EXPECT_EQ(t.path, c.want_path)
        << "\"" << c.target << "\" with Host \"" << c.host_header << "\"";
  }
}

// ---- is_idempotent, is_http_parse_error ----

TEST(IsIdempotentTest, Table) {
  const std::vector<std::pair<http::verb, bool>> cases = {
      {http::verb::get, true},   {http::verb::head, true},    {http::verb::options, true},
      {http::verb::trace, true}, {http::verb::put, true},     {http::verb::delete_, true},
      {http::verb::post, false}, {http::verb::patch, false},  {http::verb::connect, false},
      {http::verb::lock, false}, {http::verb::unknown, false}};
  for (const auto& [verb, want] : cases) {
    EXPECT_EQ(is_idempotent(verb), want) << http::to_string(verb);
  }
}

TEST(IsHttpParseErrorTest, Table) {
  EXPECT_TRUE(is_http_parse_error(http::make_error_code(http::error::bad_method)));
  EXPECT_TRUE(is_http_parse_error(http::make_error_code(http::error::header_limit)));
  EXPECT_FALSE(is_http_parse_error(boost::asio::error::make_error_code(boost::asio::error::eof)));
  EXPECT_FALSE(is_http_parse_error(
      boost::asio::error::make_error_code(boost::asio::error::connection_reset)));
}

}  // namespace
}  // namespace tidegate::dataplane::server
