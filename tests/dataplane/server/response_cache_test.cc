// The response cache's rules and store (server/response_cache.h): Cache-Control parsing, which
// requests look up and which responses may be stored (a table each), Age, Vary, LRU eviction
// within the byte budget, and request collapsing's wake-ups.
#include "server/response_cache.h"

#include <gtest/gtest.h>

#include "server/http_date.h"

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

Fields fields(std::initializer_list<std::pair<std::string_view, std::string_view>> items) {
  Fields f;
  for (const auto& [name, value] : items) f.insert(name, value);
  return f;
}

TEST(CacheControl, DirectivesAcrossFieldsAndQuotes) {
  const auto cc =
      parse_cache_control(fields({{"Cache-Control", "Public, MAX-AGE=60"},
                                  {"Cache-Control", "no-cache=\"a, b\", s-maxage=\"5\""}}));
  EXPECT_TRUE(cc.is_public);
  EXPECT_TRUE(cc.no_cache);
  EXPECT_EQ(cc.max_age, 60);
  EXPECT_EQ(cc.s_maxage, 5);
  EXPECT_FALSE(cc.no_store);
  EXPECT_FALSE(parse_cache_control(fields({{"Cache-Control", "max-age=1x"}})).max_age);
  EXPECT_EQ(parse_cache_control(fields({{"Cache-Control", "max-age=99999999999"}})).max_age,
            int64_t{1} << 31);
}

TEST(RequestCacheability, Table) {
  struct Case {
    http::verb method;
    Fields request;
    bool has_body;
    RequestCacheability want;
  };
  const auto use = RequestCacheability::kUse;
  const auto bypass = RequestCacheability::kBypass;
  const Case cases[] = {
      {http::verb::get, fields({}), false, use},
      {http::verb::head, fields({}), false, use},
      {http::verb::get, fields({{"Cache-Control", "max-age=10"}}), false, use},
      {http::verb::post, fields({}), false, bypass},
      {http::verb::get, fields({}), true, bypass},
      {http::verb::get, fields({{"Authorization", "Basic x"}}), false, bypass},
      {http::verb::get, fields({{"Range", "bytes=0-1"}}), false, bypass},
      {http::verb::get, fields({{"Cache-Control", "no-cache"}}), false, bypass},
      {http::verb::get, fields({{"Cache-Control", "no-store"}}), false, bypass},
      {http::verb::get, fields({{"Cache-Control", "max-age=0"}}), false, bypass},
      {http::verb::get, fields({{"Pragma", "no-cache"}}), false, bypass},
      // Pragma is read only without Cache-Control (RFC 9111 section 5.4).
      {http::verb::get, fields({{"Pragma", "no-cache"}, {"Cache-Control", "max-age=5"}}), false,
       use},
  };
  int i = 0;
  for (const auto& c : cases) {
    EXPECT_EQ(request_cacheability(c.method, c.request, c.has_body), c.want) << "case " << i;
    ++i;
  }
}

TEST(StorableLifetime, Table) {
  const int64_t now = 1'800'000'000;
  struct Case {
    unsigned status;
    Fields response;
    std::optional<int64_t> want;
    std::string_view why;
  };
  const Case cases[] = {
      {200, fields({{"Cache-Control", "max-age=60"}}), 60, ""},
      {200, fields({{"Cache-Control", "max-age=60, s-maxage=5"}}), 5, ""},
      {404, fields({{"Cache-Control", "max-age=60"}}), 60, ""},
      {200,
       fields({{"Expires", "Fri, 15 Jan 2027 08:00:00 GMT"},
               {"Date", "Fri, 15 Jan 2027 07:00:00 GMT"}}),
       3600, ""},
      {200, fields({{"Expires", "0"}}), std::nullopt, "already stale"},
      {200, fields({}), std::nullopt, "no explicit freshness"},
      {500, fields({{"Cache-Control", "max-age=60"}}), std::nullopt, "status"},
      {206, fields({{"Cache-Control", "max-age=60"}}), std::nullopt, "status"},
      {200, fields({{"Cache-Control", "max-age=60, private"}}), std::nullopt, "Cache-Control"},
      {200, fields({{"Cache-Control", "no-store, max-age=60"}}), std::nullopt, "Cache-Control"},
      {200, fields({{"Cache-Control", "no-cache, max-age=60"}}), std::nullopt, "Cache-Control"},
      {200, fields({{"Cache-Control", "max-age=60"}, {"Set-Cookie", "a=1"}}), std::nullopt,
       "Set-Cookie"},
      {200, fields({{"Cache-Control", "max-age=60"}, {"Vary", "Accept-Encoding, *"}}), std::nullopt,
       "Vary: *"},
      {200, fields({{"Cache-Control", "max-age=0"}}), std::nullopt, "already stale"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const char* why = "";
    EXPECT_EQ(storable_lifetime(c.status, c.response, now, false, &why), c.want) << "case " << i;
    if (!c.want) {
      EXPECT_EQ(std::string_view(why), c.why) << "case " << i;
    }
    ++i;
  }
}

TEST(StorableLifetime, AuthenticatedRequestsShareOnlyPublicAnswers) {
  const int64_t now = 1'800'000'000;
  const char* why = "";
  EXPECT_FALSE(storable_lifetime(200, fields({{"Cache-Control", "max-age=60"}}), now, true, &why));
  EXPECT_EQ(std::string_view(why), "authenticated request");
  EXPECT_EQ(
      storable_lifetime(200, fields({{"Cache-Control", "public, max-age=60"}}), now, true, &why),
      60);
  EXPECT_EQ(storable_lifetime(200, fields({{"Cache-Control", "s-maxage=30"}}), now, true, &why),
            30);
}

TEST(StorableLifetime, VaryOnFieldsTheProxySets) {
  EXPECT_TRUE(varies_on_proxy_fields(fields({{"Vary", "Accept, X-Forwarded-For"}})));
  EXPECT_TRUE(varies_on_proxy_fields(fields({{"Vary", "ssl-client-subject-dn"}})));
  EXPECT_TRUE(varies_on_proxy_fields(fields({{"Vary", "X-Request-ID"}})));
  EXPECT_FALSE(varies_on_proxy_fields(fields({{"Vary", "Accept-Encoding, Accept-Language"}})));
}

TEST(CachedResponse, AgeAndFreshness) {
  const int64_t now = 1'800'000'000;
  EXPECT_EQ(initial_age(fields({{"Age", "30"}}), now), 30);
  const std::string past = format_http_date(now - 50);
  const std::string future = format_http_date(now + 50);
  EXPECT_EQ(initial_age(fields({{"Date", past}}), now), 50);  // a lag behind the origin
  EXPECT_EQ(initial_age(fields({{"Date", future}}), now), 0);
  EXPECT_EQ(initial_age(fields({{"Date", past}, {"Age", "70"}}), now), 70);
  CachedResponse e;
  const auto t0 = std::chrono::steady_clock::now();
  e.stored = t0;
  e.initial_age = 10;
  e.lifetime = 15;
  EXPECT_EQ(e.age(t0 + std::chrono::seconds(3)), 13);
  EXPECT_TRUE(e.fresh(t0 + std::chrono::seconds(4)));
  EXPECT_FALSE(e.fresh(t0 + std::chrono::seconds(5)));
}

TEST(CachedResponse, VaryValuesAreTheRequestsAsReceived) {
  const FieldList request = {{"accept-language", "de"}, {"accept", "a"}, {"accept", "b"}};
  const auto vary =
      vary_values(fields({{"Vary", "Accept-Language, accept"}, {"Vary", "X-None"}}), request);
  ASSERT_EQ(vary.size(), 3u);
  EXPECT_EQ(vary[0], (std::pair<std::string, std::string>{"accept-language", "de"}));
  EXPECT_EQ(vary[1], (std::pair<std::string, std::string>{"accept", "a, b"}));
  EXPECT_EQ(vary[2], (std::pair<std::string, std::string>{"x-none", ""}));
  CachedResponse e;
  e.vary = vary;
  EXPECT_TRUE(
      vary_matches(e, fields({{"Accept", "a"}, {"Accept", "b"}, {"Accept-Language", "de"}})));
  EXPECT_FALSE(vary_matches(e, fields({{"Accept", "a, b"}, {"Accept-Language", "en"}})));
  EXPECT_FALSE(
      vary_matches(e, fields({{"Accept", "a, b"}, {"Accept-Language", "de"}, {"X-None", "1"}})));
}

std::shared_ptr<CachedResponse> entry(size_t body_bytes, int64_t lifetime = 60) {
  auto e = std::make_shared<CachedResponse>();
  e->body.assign(body_bytes, 'x');
  e->stored = std::chrono::steady_clock::now();
  e->lifetime = lifetime;
  return e;
}

TEST(ResponseCache, LeastRecentlyUsedGoesFirstWithinTheBudget) {
  const size_t one = entry(10000)->cost() + 2;  // key "k1".."k9"
  ResponseCache cache(3 * one, 12000);
  const Fields none;
  const auto now = std::chrono::steady_clock::now();
  cache.insert("k1", entry(10000));
  cache.insert("k2", entry(10000));
  cache.insert("k3", entry(10000));
  EXPECT_EQ(cache.entries(), 3u);
  EXPECT_LE(cache.bytes(), 3 * one);
  ASSERT_TRUE(cache.find("k1", none, now));  // k1 is now the most recent
  cache.insert("k4", entry(10000));
  EXPECT_FALSE(cache.find("k2", none, now));  // the least recent went
  EXPECT_TRUE(cache.find("k1", none, now));
  EXPECT_TRUE(cache.find("k3", none, now));
  EXPECT_TRUE(cache.find("k4", none, now));
  // Too large for an item: not stored, and an older entry under the key is dropped.
  cache.insert("k1", entry(13000));
  EXPECT_FALSE(cache.find("k1", none, now));
  EXPECT_EQ(cache.entries(), 2u);
  // A stale entry is dropped when found.
  cache.insert("k5", entry(10, 1));
  EXPECT_FALSE(cache.find("k5", none, now + std::chrono::seconds(2)));
  EXPECT_EQ(cache.entries(), 2u);
  cache.insert("k6", entry(10));
  EXPECT_LE(cache.bytes(), 3 * one);
}

TEST(ResponseCache, OneFillPerKeyAndEveryWaiterWoken) {
  ResponseCache cache(1 << 20, 1 << 16);
  EXPECT_TRUE(cache.begin_fill("a"));
  EXPECT_FALSE(cache.begin_fill("a"));
  EXPECT_TRUE(cache.begin_fill("b"));
  int woken = 0;
  cache.wait("a", [&] { ++woken; });
  cache.wait("a", [&] { ++woken; });
  cache.end_fill("b");
  EXPECT_EQ(woken, 0);
  cache.end_fill("a");
  EXPECT_EQ(woken, 2);
  // A bounded number of waiters per key.
  EXPECT_TRUE(cache.begin_fill("c"));
  for (size_t i = 0; i < ResponseCache::kMaxWaiters; ++i) EXPECT_TRUE(cache.wait("c", [] {}));
  EXPECT_FALSE(cache.wait("c", [] {}));
  cache.end_fill("c");
  cache.end_fill("a");  // twice: nothing more
  EXPECT_EQ(woken, 2);
  EXPECT_TRUE(cache.begin_fill("a"));  // free again
}

}  // namespace
}  // namespace tidegate::dataplane::server
