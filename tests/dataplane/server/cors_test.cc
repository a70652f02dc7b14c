#include "server/cors.h"

#include <gtest/gtest.h>

namespace tidegate::dataplane::server {
namespace {

model::Cors with_origins(std::vector<std::string> origins) {
  model::Cors c;
  c.allow_origins = std::move(origins);
  return c;
}

struct OriginCase {
  const char* origin;
  bool allowed;
};

TEST(CompiledCorsTest, ExactAndWildcardOrigins) {
  CompiledCors cors(
      with_origins({"https://a.example.com", "https://*.example.org", "http://localhost:8080"}));
  const OriginCase cases[] = {
      {"https://a.example.com", true},
      {"HTTPS://A.Example.COM", true},       // scheme and host without case
      {"http://a.example.com", false},       // another scheme
      {"https://a.example.com:443", false},  // a port the pattern does not have
      {"https://b.example.com", false},
      {"https://x.example.org", true},
      {"https://y.x.example.org", true},   // more than one label
      {"https://example.org", false},      // the wildcard needs a label
      {"https://.example.org", false},     // an empty label
      {"https://evilexample.org", false},  // a suffix without the dot
      {"https://x.example.org.evil.com", false},
      {"http://localhost:8080", true},
      {"http://localhost", false},
      {"http://localhost:8081", false},
      {"", false},
      {"null", false},
      {"https://a.example.com/path", false},
  };
  for (const auto& c : cases) EXPECT_EQ(cors.allows(c.origin), c.allowed) << c.origin;
  EXPECT_TRUE(cors.varies_by_origin());
  EXPECT_TRUE(cors.credentials());  // the default, with listed origins
  EXPECT_EQ(cors.allow_origin_value("https://x.example.org"), "https://x.example.org");
}

TEST(CompiledCorsTest, AnyOriginAnswersStarAndNeverCredentials) {
  model::Cors c;  // defaults: "*", credentials true
  ASSERT_TRUE(c.allow_credentials);
  CompiledCors cors(c);
  EXPECT_TRUE(cors.allows("https://anything.example"));
  EXPECT_FALSE(cors.allows(""));  // no Origin: not a CORS request
  EXPECT_EQ(cors.allow_origin_value("https://anything.example"), "*");
  EXPECT_FALSE(cors.credentials());
  EXPECT_FALSE(cors.varies_by_origin());
}

TEST(CompiledCorsTest, FieldValues) {
  model::Cors c = with_origins({"https://a.example.com"});
  c.allow_methods = {"GET", "POST"};
  c.allow_headers = {"X-Api-Key", "Content-Type"};
  c.expose_headers = {"X-Total-Count"};
  c.allow_credentials = false;
  c.max_age_seconds = 600;
  CompiledCors cors(c);
  EXPECT_EQ(cors.allow_methods("PUT"), "GET, POST");
  EXPECT_EQ(cors.allow_headers("x-other"), "X-Api-Key, Content-Type");
  EXPECT_EQ(cors.expose_headers(), "X-Total-Count");
  EXPECT_EQ(cors.max_age(), "600");
  EXPECT_FALSE(cors.credentials());
  c.allow_headers.clear();
  EXPECT_EQ(CompiledCors(c).allow_headers("x-other"), "");
}

// The Gateway API's filter with allowCredentials: "*" is answered with the request's own values.
TEST(CompiledCorsTest, EchoedWildcards) {
  model::Cors c;
  c.allow_methods = {"*"};
  c.allow_headers = {"*"};
  c.gateway_api = true;
  EXPECT_FALSE(CompiledCors(model::Cors{}).answers_every_preflight());
  CompiledCors cors(c);
  EXPECT_TRUE(cors.allows("https://other.foo.com:8443"));
  EXPECT_EQ(cors.allow_origin_value("https://other.foo.com:8443"), "https://other.foo.com:8443");
  EXPECT_TRUE(cors.credentials());
  EXPECT_TRUE(cors.varies_by_origin());
  EXPECT_EQ(cors.allow_methods("PUT"), "PUT");
  EXPECT_EQ(cors.allow_headers("x-header-1, x-header-2"), "x-header-1, x-header-2");
  EXPECT_EQ(cors.allow_headers(""), "");  // none requested: none sent
  EXPECT_TRUE(cors.answers_every_preflight());
  // Without credentials "*" stays literal.
  c.allow_credentials = false;
  CompiledCors plain(c);
  EXPECT_FALSE(plain.credentials());
  EXPECT_EQ(plain.allow_origin_value("https://other.foo.com"), "*");
  EXPECT_EQ(plain.allow_methods("PUT"), "*");
  c.allow_credentials = true;
  // Listed methods are never echoed.
  c.allow_methods = {"GET", "PUT"};
  EXPECT_EQ(CompiledCors(c).allow_methods("DELETE"), "GET, PUT");
}

}  // namespace
}  // namespace tidegate::dataplane::server
