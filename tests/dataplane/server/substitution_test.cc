// The HTTP side of body substitutions: which responses go through the engine (a table), the
// header rewrite that goes with it, and the memo's validator.

#include "server/substitution.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

runtime::CompiledSubstitution html_and_css() {
  runtime::CompiledSubstitution sub;
  sub.mime_types = {"text/css", "text/html"};
  return sub;
}

TEST(SubstitutionDecision, Table) {
  struct Case {
    const char* name;
    ResponseFacts facts;
    SubstitutionAction want;
  };
  using A = SubstitutionAction;
  const std::vector<Case> cases = {
      {"html", {true, 200, "text/html", "", std::nullopt}, A::kSubstitute},
      {"html with charset, mixed case",
       {true, 200, "Text/HTML; charset=utf-8", "", 1234},
       A::kSubstitute},
      {"second type", {true, 200, "text/css", "", 10}, A::kSubstitute},
      {"error page", {true, 404, "text/html", "", 10}, A::kSubstitute},
      {"identity encoding", {true, 200, "text/html", " Identity ", 10}, A::kSubstitute},
      {"png", {true, 200, "image/png", "", 10}, A::kPass},
      {"no content type", {true, 200, "", "", 10}, A::kPass},
      {"type prefix is not the type", {true, 200, "text/htmlx", "", 10}, A::kPass},
      {"gzip", {true, 200, "text/html", "gzip", 10}, A::kPassCompressed},
      {"br", {true, 200, "text/html", "br", std::nullopt}, A::kPassCompressed},
      {"gzip png is just a png", {true, 200, "image/png", "gzip", 10}, A::kPass},
      {"HEAD / 204 / 304 (no body)", {false, 200, "text/html", "", 10}, A::kPass},
      {"empty body", {true, 200, "text/html", "", 0}, A::kPass},
      {"partial content", {true, 206, "text/html", "", 10}, A::kPass},
  };
  const auto sub = html_and_css();
  for (const auto& c : cases) {
    EXPECT_EQ(decide_substitution(sub, c.facts), c.want) << c.name;
  }
}

TEST(SubstitutionHeaders, WeakEtag) {
  EXPECT_EQ(weak_etag("\"abc\""), "W/\"abc\"");
  EXPECT_EQ(weak_etag("W/\"abc\""), "W/\"abc\"");
  EXPECT_EQ(weak_etag(" \"abc\" "), "W/\"abc\"");
  EXPECT_EQ(weak_etag(""), "");
}

http::response_header<Fields> upstream_header(bool chunked) {
  http::response_header<Fields> res;
  res.result(200);
  res.version(11);
  res.set(http::field::content_type, "text/html");
  res.set(http::field::etag, "\"v1\"");
  if (chunked) {
    res.set(http::field::transfer_encoding, "chunked");
  } else {
    res.set(http::field::content_length, "1234");
  }
  return res;
}

TEST(SubstitutionHeaders, RewriteTable) {
  struct Case {
    const char* name;
    bool upstream_chunked;
    unsigned client_version;
    bool want_chunked;
  };
  const std::vector<Case> cases = {
      {"length -> chunked for 1.1", false, 11, true},
      {"chunked stays chunked for 1.1", true, 11, true},
      {"length -> close-delimited for 1.0", false, 10, false},
      {"chunked -> close-delimited for 1.0", true, 10, false},
  };
  for (const auto& c : cases) {
    auto res = upstream_header(c.upstream_chunked);
    rewrite_substituted_header(res, c.client_version);
    EXPECT_EQ(res.count(http::field::content_length), 0u) << c.name;
    EXPECT_EQ(res[http::field::transfer_encoding], c.want_chunked ? "chunked" : "") << c.name;
    EXPECT_EQ(res.count(http::field::transfer_encoding), c.want_chunked ? 1u : 0u) << c.name;
    EXPECT_EQ(res[http::field::etag], "W/\"v1\"") << c.name;
    EXPECT_EQ(res[http::field::content_type], "text/html") << c.name;
  }
}

TEST(SubstitutionHeaders, RewriteKeepsWeakEtagAndNoEtag) {
  auto weak = upstream_header(false);
  weak.set(http::field::etag, "W/\"x\"");
  rewrite_substituted_header(weak, 11);
  EXPECT_EQ(weak[http::field::etag], "W/\"x\"");
  auto none = upstream_header(false);
  none.erase(http::field::etag);
  rewrite_substituted_header(none, 11);
  EXPECT_EQ(none.count(http::field::etag), 0u);
}

TEST(SubstitutionHeaders, MemoValidatorPrefersEtag) {
  std::string v;
  auto res = upstream_header(false);
  res.set(http::field::last_modified, "Tue, 01 Oct 2024 10:00:00 GMT");
  memo_validator(res, &v);
  EXPECT_EQ(v, "E:\"v1\"");
  res.erase(http::field::etag);
  memo_validator(res, &v);
  EXPECT_EQ(v, "L:Tue, 01 Oct 2024 10:00:00 GMT");
  res.erase(http::field::last_modified);
  memo_validator(res, &v);
  EXPECT_EQ(v, "");
}

}  // namespace
}  // namespace tidegate::dataplane::server
