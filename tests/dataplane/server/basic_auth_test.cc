// auth-type basic in the data plane (server/basic_auth.h): every accepted hash scheme against
// hashes made by other implementations (openssl passwd for MD5-crypt, apr1 and SHA-crypt;
// Python's crypt and hashlib for bcrypt and {SHA}), and the Authorization header checks.
#include "server/basic_auth.h"

#include <gtest/gtest.h>

#include "model/auth.h"

namespace tidegate::dataplane::server {
namespace {

TEST(BasicAuth, EverySchemeVerifiesAgainstAnotherImplementation) {
  struct Case {
    const char* hash;
    const char* made_by;
  };
  const Case cases[] = {
      {"$1$saltsalt$Yo6tRKYGO/jWyb1etwHDS/", "openssl passwd -1"},
      {"$apr1$saltsalt$HIDXe7D36X22w1CH4M1cQ.", "openssl passwd -apr1"},
      {"$5$saltsalt$yrhPKxCqiWcCE9h0g86j6Ugz7SDFdFm.BjU.d8RaQnC", "openssl passwd -5"},
      {"$5$rounds=5000$saltsalt$yrhPKxCqiWcCE9h0g86j6Ugz7SDFdFm.BjU.d8RaQnC", "crypt, rounds="},
      {"$6$saltsalt$e/"
       "5XKibXPLqVcfjpD.ouauaJrAOL5V0uo80Lt7n7EbRdRiCx3HbQ90yjOHr.G0T.mx79PEMRy8nmtr0qSYhQp1",
       "openssl passwd -6"},
      {"$2b$04$abcdefghijklmnopqrstuu/LVz6MZlItEy42I2juLihZ66HnQx/cy", "python crypt, bcrypt"},
      {"$2y$05$abcdefghijklmnopqrstuupx2xBUC4954936wVIjyyPHmUBFu0wCW", "python crypt, $2y$"},
      {"{SHA}W8r/fyL/UzygmbNAjq2HbA67qac=", "base64(sha1)"},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(model::check_password_hash(c.hash)) << c.made_by;
    EXPECT_TRUE(verify_password("open sesame", c.hash)) << c.made_by;
    EXPECT_FALSE(verify_password("open sesamE", c.hash)) << c.made_by;
    EXPECT_FALSE(verify_password("", c.hash)) << c.made_by;
    EXPECT_FALSE(verify_password(std::string("open sesame\0x", 13), c.hash)) << c.made_by;
  }
  // A password with a colon and a space, and a short salt.
  EXPECT_EQ(apr1_md5("p:w d", "ab"), "$apr1$ab$Hgz6JG0UKq5Uz.21NWkS11");
  EXPECT_TRUE(verify_password("p:w d", "$apr1$ab$Hgz6JG0UKq5Uz.21NWkS11"));
}

TEST(BasicAuth, HashesThatAreNotAcceptedAreNamed) {
  for (const char* bad :
       {"open sesame", "{PLAIN}open sesame", "abJnggxhB/yWI",  // DES crypt
        "$2b$10$short", "$2b$99$abcdefghijklmnopqrstuu/LVz6MZlItEy42I2juLihZ66HnQx/cy",
        "{SHA}tooshort=", "$1$$", "$7$x$y", "{SSHA}abc"}) {
    EXPECT_TRUE(model::check_password_hash(bad)) << bad;
  }
}

model::BasicAuth users() {
  model::BasicAuth a;
  a.realm = "Staff only";
  a.users = {{"alice", "$apr1$saltsalt$HIDXe7D36X22w1CH4M1cQ."},
             {"bob", "$2b$04$abcdefghijklmnopqrstuu/LVz6MZlItEy42I2juLihZ66HnQx/cy"}};
  return a;
}

TEST(BasicAuth, TheAuthorizationHeaderIsCheckedAsRfc7617Says) {
  BasicAuthCheck check(users(), 2);
  using V = BasicAuthCheck::Verdict;
  // alice:open sesame, bob:open sesame, alice:wrong, carol:open sesame.
  const std::string alice = "YWxpY2U6b3BlbiBzZXNhbWU=";
  const std::string bob = "Ym9iOm9wZW4gc2VzYW1l";
  struct Case {
    std::string header;
    V want;
  };
  const Case cases[] = {
      {"Basic " + alice, V::kAllowed},
      {"basic " + alice, V::kAllowed},  // the scheme is case-insensitive
      {"BASIC   " + alice + " ", V::kAllowed},
      {"Basic " + bob, V::kAllowed},
      {"Basic YWxpY2U6d3Jvbmc=", V::kDenied},          // alice:wrong
      {"Basic Y2Fyb2w6b3BlbiBzZXNhbWU=", V::kDenied},  // carol: no such user
      {"Basic YWxpY2U=", V::kDenied},                  // "alice", no colon
      {"Basic !!!!", V::kDenied},                      // not base64
      {"Bearer " + alice, V::kDenied},
      {"Basic", V::kDenied},
      {"", V::kDenied},
  };
  for (const auto& c : cases) EXPECT_EQ(check.check(c.header, 0), c.want) << c.header;
  // A remembered success is per worker, and still only for the exact credential.
  EXPECT_EQ(check.check("Basic " + alice, 1), V::kAllowed);
  EXPECT_EQ(check.check("Basic YWxpY2U6d3Jvbmc=", 1), V::kDenied);
  EXPECT_EQ(check.challenge(), "Basic realm=\"Staff only\", charset=\"UTF-8\"");
}

TEST(BasicAuth, NoUsersRefusesEverything) {
  model::BasicAuth none;
  BasicAuthCheck check(none, 1);
  EXPECT_EQ(check.check("Basic YWxpY2U6b3BlbiBzZXNhbWU=", 0),
            BasicAuthCheck::Verdict::kUnconfigured);
  EXPECT_EQ(check.check("", 0), BasicAuthCheck::Verdict::kUnconfigured);
}

}  // namespace
}  // namespace tidegate::dataplane::server
