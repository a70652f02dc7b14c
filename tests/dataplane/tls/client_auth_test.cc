// Client certificates, the parts without a handshake (e2e/test_client_certs.py makes real ones):
// the SNI read from a raw ClientHello extension, the compiled settings and their identity, the
// verdict's header value.

#include "tls/client_auth.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tls/tls_context.h"

namespace tidegate::dataplane::tls {
namespace {

// A server_name extension body: the list length, then (type, length, name) entries.
std::vector<unsigned char> extension(const std::vector<std::pair<unsigned, std::string>>& names,
                                     int length_delta = 0) {
  std::vector<unsigned char> list;
  for (const auto& [type, name] : names) {
    list.push_back(static_cast<unsigned char>(type));
    list.push_back(static_cast<unsigned char>(name.size() >> 8));
    list.push_back(static_cast<unsigned char>(name.size() & 0xff));
    list.insert(list.end(), name.begin(), name.end());
  }
  const size_t n = list.size() + static_cast<size_t>(length_delta);
  std::vector<unsigned char> out;
  out.reserve(list.size() + 2);
  out.push_back(static_cast<unsigned char>(n >> 8));
  out.push_back(static_cast<unsigned char>(n & 0xff));
  for (unsigned char c : list) out.push_back(c);
  return out;
}

TEST(SniFromExtension, Table) {
  struct Case {
    const char* name;
    std::vector<unsigned char> bytes;
    bool ok;
    std::string host;
  };
  const std::string long_name(254, 'a');
  const std::vector<Case> cases = {
      {"one host name", extension({{0, "mtls.example.com"}}), true, "mtls.example.com"},
      {"lower-cased, one trailing dot dropped", extension({{0, "MTLS.Example.COM."}}), true,
       "mtls.example.com"},
      {"another name type first is skipped", extension({{7, "x"}, {0, "b.com"}}), true, "b.com"},
      {"no host name entry", extension({{7, "x"}}), false, ""},
      {"empty list", extension({}), false, ""},
      {"list length disagrees", extension({{0, "a.com"}}, 1), false, ""},
      {"entry longer than the list", {0, 4, 0, 0, 9, 'a'}, false, ""},
      {"empty name", extension({{0, ""}}), false, ""},
      {"a NUL inside the name", extension({{0, std::string("a\0b.com", 7)}}), false, ""},
      {"longer than a DNS name", extension({{0, long_name}}), false, ""},
      {"one byte", {0}, false, ""},
  };
  for (const auto& c : cases) {
    std::string host = "unchanged";
    EXPECT_EQ(sni_from_extension(c.bytes.data(), c.bytes.size(), &host), c.ok) << c.name;
    if (c.ok) {
      EXPECT_EQ(host, c.host) << c.name;
    }
  }
}

class CompiledClientAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error, key;
    ASSERT_TRUE(generate_self_signed(&ca_a_, &key, &error)) << error;
    ASSERT_TRUE(generate_self_signed(&ca_b_, &key, &error)) << error;
  }
  model::ClientAuth settings(const std::string& ca) {
    model::ClientAuth a;
    a.ca_pem = ca;
    a.secret = "default/client-ca";
    return a;
  }
  std::string ca_a_, ca_b_;
};

TEST_F(CompiledClientAuthTest, IdentityFollowsWhatTheHandshakeChecks) {
  std::string error;
  auto a = CompiledClientAuth::build(settings(ca_a_), &error);
  ASSERT_TRUE(a) << error;
  auto again = CompiledClientAuth::build(settings(ca_a_), &error);
  auto other_ca = CompiledClientAuth::build(settings(ca_a_ + ca_b_), &error);
  auto optional = settings(ca_a_);
  optional.verify = model::ClientVerify::kOptional;
  auto deeper = settings(ca_a_);
  deeper.verify_depth = 2;
  auto page = settings(ca_a_);
  page.error_page = "/cert";  // answered per request: not part of the handshake's identity
  EXPECT_EQ(a->key(), again->key());
  EXPECT_NE(a->key(), other_ca->key());
  EXPECT_NE(a->key(), CompiledClientAuth::build(optional, &error)->key());
  EXPECT_NE(a->key(), CompiledClientAuth::build(deeper, &error)->key());
  EXPECT_EQ(a->key(), CompiledClientAuth::build(page, &error)->key());
  EXPECT_FALSE(a->broken());
  EXPECT_EQ(a->match_cn(), nullptr);
}

TEST_F(CompiledClientAuthTest, BadBundlesAreRefusedAnEmptyOneIsClosed) {
  std::string error;
  EXPECT_FALSE(CompiledClientAuth::build(settings("not a certificate"), &error));
  EXPECT_NE(error.find("holds no PEM certificate"), std::string::npos) << error;
  auto crl = settings(ca_a_);
  crl.crl_pem = "junk";
  EXPECT_FALSE(CompiledClientAuth::build(crl, &error));
  EXPECT_NE(error.find("holds no PEM CRL"), std::string::npos) << error;
  auto cn = settings(ca_a_);
  cn.match_cn = "CN=(";
  EXPECT_FALSE(CompiledClientAuth::build(cn, &error));
  EXPECT_NE(error.find("match_cn"), std::string::npos) << error;
  auto closed = CompiledClientAuth::build(settings(""), &error);
  ASSERT_TRUE(closed);
  EXPECT_TRUE(closed->broken());
}

TEST(VerifyHeaderValue, AsNginxSaysIt) {
  PeerCertificate::Verdict v;
  EXPECT_EQ(verify_header_value(v), "NONE");
  v.presented = true;
  EXPECT_EQ(verify_header_value(v), "SUCCESS");
  v.verify_result = X509_V_ERR_CERT_HAS_EXPIRED;
  EXPECT_EQ(verify_header_value(v), "FAILED:certificate has expired");
  EXPECT_FALSE(verify_error_is_optional(X509_V_ERR_CERT_HAS_EXPIRED));
  EXPECT_TRUE(verify_error_is_optional(X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY));
  EXPECT_TRUE(verify_error_is_optional(X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT));
}

}  // namespace
}  // namespace tidegate::dataplane::tls
