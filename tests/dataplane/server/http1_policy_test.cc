// Table tests for the strict HTTP/1.1 policy (server/http1_policy.h): every request rule with
// the answer it gives, the edits an accepted request gets, and the response rules.

#include "server/http1_policy.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

using FieldList = std::vector<std::pair<std::string, std::string>>;

struct RequestCase {
  std::string name;
  std::string method;
  std::string target;
  unsigned version;
  FieldList fields;
  unsigned status;               // 0: accepted
  std::string want_target = {};  // accepted: the target after the edits
  std::string want_host = {};    // accepted: the Host after the edits ("" when absent)
  bool websocket = false;        // accepted: may go up as an upgrade
  bool canonical = false;        // accepted: Transfer-Encoding rewritten to "chunked"
};

http::request_header<Fields> make_request(const RequestCase& c) {
  http::request_header<Fields> req;
  req.method_string(c.method);
  req.target(c.target);
  req.version(c.version);
  for (const auto& [name, value] : c.fields) req.insert(name, value);
  return req;
}

const FieldList kHost = {{"Host", "a.example"}};

FieldList host_and(FieldList more) {
  FieldList f = kHost;
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

void run_table(const std::vector<RequestCase>& cases, const RequestRules& rules = {}) {
  for (const auto& c : cases) {
    auto req = make_request(c);
    RequestVerdict v = check_request(req, rules);
    EXPECT_EQ(v.status, c.status) << c.name << ": " << v.reason;
    if (v.status != 0 || c.status != 0) {
      EXPECT_FALSE(v.reason.empty()) << c.name;
      continue;
    }
    if (v.replace_host) req.set(http::field::host, v.host);
    if (v.replace_target) req.target(v.target);
    EXPECT_EQ(req.target(), c.want_target) << c.name;
    EXPECT_EQ(req[http::field::host], c.want_host) << c.name;
    EXPECT_EQ(v.websocket_upgrade, c.websocket) << c.name;
    EXPECT_EQ(v.canonical_chunked, c.canonical) << c.name;
  }
}

TEST(Http1PolicyTest, TransferEncoding) {
  run_table({
      {"chunked", "POST", "/", 11, host_and({{"Transfer-Encoding", "chunked"}}), 0, "/",
       "a.example"},
      {"Chunked is canonicalised", "POST", "/", 11, host_and({{"Transfer-Encoding", "Chunked"}}), 0,
       "/", "a.example", false, true},
      {"empty list elements", "POST", "/", 11, host_and({{"Transfer-Encoding", ", chunked,"}}), 0,
       "/", "a.example", false, true},
      {"xchunked", "POST", "/", 11, host_and({{"Transfer-Encoding", "xchunked"}}), 400},
      {"chunked, identity", "POST", "/", 11, host_and({{"Transfer-Encoding", "chunked, identity"}}),
       400},
      {"identity", "POST", "/", 11, host_and({{"Transfer-Encoding", "identity"}}), 400},
      {"gzip alone", "POST", "/", 11, host_and({{"Transfer-Encoding", "gzip"}}), 400},
      {"chunked, gzip", "POST", "/", 11, host_and({{"Transfer-Encoding", "chunked, gzip"}}), 400},
      {"gzip, chunked", "POST", "/", 11, host_and({{"Transfer-Encoding", "gzip, chunked"}}), 501},
      {"unknown, chunked", "POST", "/", 11, host_and({{"Transfer-Encoding", "x, chunked"}}), 501},
      {"two lines x then chunked", "POST", "/", 11,
       host_and({{"Transfer-Encoding", "x"}, {"Transfer-Encoding", "chunked"}}), 501},
      {"two lines chunked then x", "POST", "/", 11,
       host_and({{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "x"}}), 400},
      {"chunked twice", "POST", "/", 11, host_and({{"Transfer-Encoding", "chunked, chunked"}}),
       400},
      {"chunked on two lines", "POST", "/", 11,
       host_and({{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}}), 400},
      {"empty", "POST", "/", 11, host_and({{"Transfer-Encoding", ""}}), 400},
      {"only commas", "POST", "/", 11, host_and({{"Transfer-Encoding", " , ,"}}), 400},
      {"chunked with a parameter", "POST", "/", 11,
       host_and({{"Transfer-Encoding", "chunked;q=1"}}), 400},
      {"quoted", "POST", "/", 11, host_and({{"Transfer-Encoding", "\"chunked\""}}), 400},
      {"with Content-Length", "POST", "/", 11,
       host_and({{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}}), 400},
      {"xchunked with Content-Length", "POST", "/", 11,
       host_and({{"Transfer-Encoding", "xchunked"}, {"Content-Length", "5"}}), 400},
      {"HTTP/1.0 with Transfer-Encoding", "POST", "/", 10,
       host_and({{"Transfer-Encoding", "chunked"}}), 400},
  });
}

TEST(Http1PolicyTest, ContentLength) {
  run_table({
      {"one", "POST", "/", 11, host_and({{"Content-Length", "5"}}), 0, "/", "a.example"},
      {"zero", "POST", "/", 11, host_and({{"Content-Length", "0"}}), 0, "/", "a.example"},
      {"two equal lines", "POST", "/", 11,
       host_and({{"Content-Length", "5"}, {"Content-Length", "5"}}), 400},
      {"a list", "POST", "/", 11, host_and({{"Content-Length", "5, 5"}}), 400},
      {"signed", "POST", "/", 11, host_and({{"Content-Length", "+5"}}), 400},
      {"hex", "POST", "/", 11, host_and({{"Content-Length", "0x5"}}), 400},
      {"empty", "POST", "/", 11, host_and({{"Content-Length", ""}}), 400},
  });
}

TEST(Http1PolicyTest, HostAndVersion) {
  run_table({
      {"HTTP/1.1 without Host", "GET", "/", 11, {}, 400},
      {"HTTP/1.0 without Host", "GET", "/", 10, {}, 0, "/", ""},
      {"two Hosts", "GET", "/", 11, {{"Host", "a.example"}, {"Host", "b.example"}}, 400},
      {"Host with port", "GET", "/", 11, {{"Host", "a.example:8080"}}, 0, "/", "a.example:8080"},
      {"IPv6 Host", "GET", "/", 11, {{"Host", "[::1]:80"}}, 0, "/", "[::1]:80"},
      {"empty Host", "GET", "/", 11, {{"Host", ""}}, 0, "/", ""},
      {"Host with a slash", "GET", "/", 11, {{"Host", "a.example/x"}}, 400},
      {"Host with userinfo", "GET", "/", 11, {{"Host", "u@a.example"}}, 400},
      {"Host with a space", "GET", "/", 11, {{"Host", "a.example b"}}, 400},
      {"Host with a bad port", "GET", "/", 11, {{"Host", "a.example:8x"}}, 400},
      {"unclosed IPv6 Host", "GET", "/", 11, {{"Host", "[::1"}}, 400},
      {"HTTP/2.0", "PRI", "*", 20, kHost, 505},
      {"HTTP/0.9", "GET", "/", 9, kHost, 505},
      {"HTTP/1.2", "GET", "/", 12, kHost, 505},
  });
}

TEST(Http1PolicyTest, FieldCharactersAndLimits) {
  FieldList many = kHost;
  for (int i = 0; i < 99; ++i) many.push_back({"X-F" + std::to_string(i), "v"});
  FieldList too_many = many;
  too_many.push_back({"X-Last", "v"});
  run_table({
      {"100 fields", "GET", "/", 11, many, 0, "/", "a.example"},
      {"101 fields", "GET", "/", 11, too_many, 431},
      {"NUL in a value", "GET", "/", 11, host_and({{"X", std::string("a\0b", 3)}}), 400},
      {"CR in a value", "GET", "/", 11, host_and({{"X", "a\rb"}}), 400},
      {"LF in a value", "GET", "/", 11, host_and({{"X", "a\nb"}}), 400},
      {"DEL in a value", "GET", "/", 11, host_and({{"X", "a\x7f"}}), 400},
      {"tab and obs-text in a value", "GET", "/", 11, host_and({{"X", "a\tb\xe9"}}), 0, "/",
       "a.example"},
      {"space in a name", "GET", "/", 11, host_and({{"X Y", "v"}}), 400},
      {"colon in a name", "GET", "/", 11, host_and({{"X:Y", "v"}}), 400},
  });
  const std::string long_target = "/" + std::string(8 * 1024, 'a');
  run_table({{"request line over 8 KiB", "GET", long_target, 11, kHost, 414}});
  const std::string fits = "/" + std::string(8 * 1024 - 15, 'a');  // "GET " + " HTTP/1.1"
  run_table({{"request line of 8 KiB", "GET", fits, 11, kHost, 0, fits, "a.example"}});
  RequestRules small;
  small.max_header_fields = 2;
  run_table({{"a smaller field limit", "GET", "/", 11, host_and({{"A", "1"}, {"B", "2"}}), 431}},
            small);
}

TEST(Http1PolicyTest, HeaderOverflowStatus) {
  RequestRules rules;
  http::request_header<Fields> partial;  // the parser stopped inside the request line
  EXPECT_EQ(header_overflow_status(partial, rules), 414u);
  partial.method(http::verb::get);
  partial.target("/" + std::string(9000, 'a'));
  EXPECT_EQ(header_overflow_status(partial, rules), 414u);  // complete but over 8 KiB
  partial.target("/");
  EXPECT_EQ(header_overflow_status(partial, rules), 431u);  // the fields are too large
}

TEST(Http1PolicyTest, TargetForms) {
  run_table({
      {"origin-form", "GET", "/a?b=c", 11, kHost, 0, "/a?b=c", "a.example"},
      {"absolute-form takes its authority", "GET", "http://b.example/x?q", 11, kHost, 0, "/x?q",
       "b.example"},
      {"absolute-form https, port, case", "GET", "HTTPS://B.example:8443/x", 11, kHost, 0, "/x",
       "B.example:8443"},
      {"absolute-form without a path", "GET", "http://b.example", 11, kHost, 0, "/", "b.example"},
      {"absolute-form with only a query", "GET", "http://b.example?q=1", 11, kHost, 0, "/?q=1",
       "b.example"},
      {"absolute-form path normalized", "GET", "http://b.example/a/../b", 11, kHost, 0, "/b",
       "b.example"},
      {"absolute-form HTTP/1.0 without Host",
       "GET",
       "http://b.example/",
       10,
       {},
       0,
       "/",
       "b.example"},
      {"absolute-form with userinfo", "GET", "http://u:p@b.example/", 11, kHost, 400},
      {"absolute-form empty authority", "GET", "http:///x", 11, kHost, 400},
      {"absolute-form other scheme", "GET", "ftp://b.example/", 11, kHost, 400},
      {"absolute-form bad authority", "GET", "http://b example/", 11, kHost, 400},
      {"asterisk-form OPTIONS", "OPTIONS", "*", 11, kHost, 0, "*", "a.example"},
      {"asterisk-form GET", "GET", "*", 11, kHost, 400},
      {"authority-form GET", "GET", "b.example:443", 11, kHost, 400},
      {"CONNECT", "CONNECT", "b.example:443", 11, kHost, 405},
      {"relative", "GET", "a/b", 11, kHost, 400},
      {"fragment", "GET", "/a#b", 11, kHost, 400},
      {"fragment in the query", "GET", "/a?x#b", 11, kHost, 400},
      {"absolute-form fragment", "GET", "http://b.example/#x", 11, kHost, 400},
  });
}

TEST(Http1PolicyTest, PathNormalization) {
  run_table({
      {"dot segments", "GET", "/public/../admin", 11, kHost, 0, "/admin", "a.example"},
      {"encoded dot segments", "GET", "/public/%2e%2e/admin", 11, kHost, 0, "/admin", "a.example"},
      {"query untouched", "GET", "/a/./b?x=/../%2e&y=%41", 11, kHost, 0, "/a/b?x=/../%2e&y=%41",
       "a.example"},
      {"unreserved decoded", "GET", "/%61dmin", 11, kHost, 0, "/admin", "a.example"},
      {"above the root", "GET", "/../etc/passwd", 11, kHost, 400},
      {"bad percent", "GET", "/a%zz", 11, kHost, 400},
      {"encoded slash kept", "GET", "/a%2fb", 11, kHost, 0, "/a%2Fb", "a.example"},
      {"double slash kept", "GET", "//a", 11, kHost, 0, "//a", "a.example"},
  });
  RequestRules strict;
  strict.path.merge_slashes = true;
  strict.path.escaped_slashes = router::EscapedSlashes::kReject;
  run_table(
      {
          {"double slash merged", "GET", "//a//b", 11, kHost, 0, "/a/b", "a.example"},
          {"encoded slash refused", "GET", "/a%2fb", 11, kHost, 400},
          {"backslash refused", "GET", "/a\\b", 11, kHost, 400},
      },
      strict);
}

TEST(Http1PolicyTest, Upgrades) {
  run_table({
      {"websocket", "GET", "/", 11, host_and({{"Connection", "Upgrade"}, {"Upgrade", "websocket"}}),
       0, "/", "a.example", true},
      {"WebSocket, keep-alive", "GET", "/", 11,
       host_and({{"Connection", "keep-alive, upgrade"}, {"Upgrade", "WebSocket"}}), 0, "/",
       "a.example", true},
      {"h2c", "GET", "/", 11,
       host_and({{"Connection", "Upgrade, HTTP2-Settings"},
                 {"Upgrade", "h2c"},
                 {"HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"}}),
       0, "/", "a.example", false},
      {"websocket and h2c", "GET", "/", 11,
       host_and({{"Connection", "Upgrade"}, {"Upgrade", "websocket, h2c"}}), 0, "/", "a.example",
       false},
      {"two Upgrade lines", "GET", "/", 11,
       host_and({{"Connection", "Upgrade"}, {"Upgrade", "websocket"}, {"Upgrade", "h2c"}}), 0, "/",
       "a.example", false},
      {"websocket without Connection: upgrade", "GET", "/", 11,
       host_and({{"Upgrade", "websocket"}}), 0, "/", "a.example", false},
      {"websocket over HTTP/1.0", "GET", "/", 10,
       host_and({{"Connection", "Upgrade"}, {"Upgrade", "websocket"}}), 0, "/", "a.example", false},
      {"TLS upgrade", "GET", "/", 11, host_and({{"Connection", "Upgrade"}, {"Upgrade", "TLS/1.2"}}),
       0, "/", "a.example", false},
  });
}

// Upgrades other than WebSocket: offered to the exchange (which forwards them only where the
// route's allow-upgrade names them), lower-cased; h2c and lists never.
TEST(Http1PolicyTest, OtherUpgradesAreOfferedButNeverH2c) {
  struct Row {
    FieldList fields;
    unsigned version;
    std::string want;
  };
  const Row rows[] = {
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "TLS/1.2"}}), 11, "tls/1.2"},
      {host_and({{"Connection", "upgrade"}, {"Upgrade", " Foo "}}), 11, "foo"},
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "h2c"}}), 11, ""},
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "H2C"}}), 11, ""},
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "h2c/1"}}), 11, ""},
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "foo, bar"}}), 11, ""},
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "foo/"}}), 11, ""},
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "foo"}, {"Upgrade", "bar"}}), 11, ""},
      {host_and({{"Upgrade", "foo"}}), 11, ""},
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "foo"}}), 10, ""},
      {host_and({{"Connection", "Upgrade"}, {"Upgrade", "websocket"}}), 11, ""},
  };
  for (const Row& row : rows) {
    RequestCase c{"upgrade", "GET", "/", row.version, row.fields, 0};
    auto req = make_request(c);
    RequestVerdict v = check_request(req, {});
    ASSERT_EQ(v.status, 0u);
    EXPECT_EQ(v.other_upgrade, row.want) << row.fields.back().second;
  }
}

TEST(Http1PolicyTest, Characters) {
  EXPECT_TRUE(is_token("Transfer-Encoding"));
  EXPECT_FALSE(is_token("Transfer-Encoding "));
  EXPECT_FALSE(is_token(""));
  EXPECT_TRUE(is_field_value(""));
  EXPECT_TRUE(is_field_value("a b\tc"));
  EXPECT_FALSE(is_field_value(std::string("\0", 1)));
  EXPECT_TRUE(is_host_value("a-b.example"));
  EXPECT_TRUE(is_host_value("10.0.0.1:80"));
  EXPECT_TRUE(is_host_value("a%41.example"));
  EXPECT_FALSE(is_host_value("a%4.example"));
  EXPECT_FALSE(is_host_value("[]"));
  EXPECT_FALSE(is_host_value("[::1]x"));
}

// Every byte against the grammars as the RFCs write them: tchar (RFC 9110 section 5.6.2),
// field-vchar / SP / HTAB / obs-text (section 5.5), reg-name (RFC 3986 section 3.2.2).
TEST(Http1PolicyTest, EveryByteClassifiedAsTheGrammarsSay) {
  auto alpha = [](int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto digit = [](int c) { return c >= '0' && c <= '9'; };
  auto one_of = [](int c, std::string_view set) {
    return c != 0 && set.find(static_cast<char>(c)) != std::string_view::npos;
  };
  for (int c = 0; c < 256; ++c) {
    const std::string one(1, static_cast<char>(c));
    const bool tchar = alpha(c) || digit(c) || one_of(c, "!#$%&'*+-.^_`|~");
    EXPECT_EQ(is_token(one), tchar) << c;
    EXPECT_EQ(is_token("a" + one + "b"), tchar) << c;
    const bool field_byte = (c >= 0x21 && c <= 0x7e) || c == ' ' || c == '\t' || c >= 0x80;
    EXPECT_EQ(is_field_value(one), field_byte) << c;
    EXPECT_EQ(is_field_value("a " + one + " b"), field_byte) << c;
    // Long values are checked eight bytes at a time: the byte at each place of a word, and in
    // the tail.
    for (size_t at : {0, 1, 7, 8, 13, 15, 16, 31, 39, 40, 42}) {
      std::string value(43, c == 'a' ? 'b' : 'a');  // five words and a tail of three
      value[at] = static_cast<char>(c);
      EXPECT_EQ(is_field_value(value), field_byte) << c << " at " << at;
      value[at] = static_cast<char>(0x80 | c);  // obs-text around it changes nothing
      EXPECT_TRUE(is_field_value(value)) << (0x80 | c) << " at " << at;
    }
    const bool reg_name = alpha(c) || digit(c) || one_of(c, "-._~!$&'()*+,;=");
    if (c != '%' && c != ':' && c != '[') {
      EXPECT_EQ(is_host_value("a" + one + "b.example"), reg_name) << c;
    }
  }
}

struct ResponseCase {
  std::string name;
  unsigned version;
  FieldList fields;
  unsigned status;
};

TEST(Http1PolicyTest, Responses) {
  const std::vector<ResponseCase> cases = {
      {"Content-Length", 11, {{"Content-Length", "2"}}, 0},
      {"chunked", 11, {{"Transfer-Encoding", "chunked"}}, 0},
      {"Chunked", 11, {{"Transfer-Encoding", "Chunked"}}, 0},
      {"close-delimited", 11, {}, 0},
      {"HTTP/1.0 with Content-Length", 10, {{"Content-Length", "2"}}, 0},
      {"Content-Length and chunked",
       11,
       {{"Content-Length", "2"}, {"Transfer-Encoding", "chunked"}},
       502},
      {"two equal Content-Lengths", 11, {{"Content-Length", "2"}, {"Content-Length", "2"}}, 502},
      {"two differing Content-Lengths",
       11,
       {{"Content-Length", "2"}, {"Content-Length", "3"}},
       502},
      {"Content-Length list", 11, {{"Content-Length", "2, 2"}}, 502},
      {"xchunked", 11, {{"Transfer-Encoding", "xchunked"}}, 502},
      {"gzip, chunked", 11, {{"Transfer-Encoding", "gzip, chunked"}}, 502},
      {"chunked, identity", 11, {{"Transfer-Encoding", "chunked, identity"}}, 502},
      {"chunked twice",
       11,
       {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}},
       502},
      {"HTTP/1.0 chunked", 10, {{"Transfer-Encoding", "chunked"}}, 502},
      {"NUL in a value", 11, {{"X", std::string("a\0", 2)}, {"Content-Length", "0"}}, 502},
      {"HTTP/2.0", 20, {{"Content-Length", "0"}}, 502},
  };
  for (const auto& c : cases) {
    http::response_header<Fields> res;
    res.result(200);
    res.version(c.version);
    for (const auto& [name, value] : c.fields) res.insert(name, value);
    ResponseVerdict v = check_response(res);
    EXPECT_EQ(v.status, c.status) << c.name << ": " << v.reason;
  }
}

}  // namespace
}  // namespace tidegate::dataplane::server
