// Tests for the TLS profiles (--tls-profile): handshakes in memory between the server context
// and OpenSSL clients restricted to one version, cipher or group, so each row says what a real
// client of that kind gets. testssl.sh checks the same from outside (e2e/test_tls_profile.py).

#include <gtest/gtest.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "tls/tls_context.h"

namespace tidegate::dataplane::tls {
namespace {

struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

struct Client {
  int min_version = TLS1_VERSION;
  int max_version = TLS1_3_VERSION;
  const char* tls12_ciphers = "ALL:@SECLEVEL=0";  // empty: leave OpenSSL's default
  const char* groups = "";                        // empty: leave OpenSSL's default
};

struct Outcome {
  bool connected = false;
  std::string version;  // SSL_get_version of the client
  std::string cipher;
};

class TlsProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(generate_self_signed(&cert_, &key_, &error)) << error;
  }

  // One handshake, in memory, between a server context of `profile` and `client`.
  Outcome handshake(TlsProfile profile, const Client& client) {
    std::string error;
    ServerSettings settings{random_ticket_keys(), profile};
    SslCtxPtr server_ctx = make_server_context(cert_, key_, settings, &error);
    EXPECT_TRUE(server_ctx) << error;
    SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_min_proto_version(client_ctx.get(), client.min_version);
    SSL_CTX_set_max_proto_version(client_ctx.get(), client.max_version);
    SSL_CTX_set_security_level(client_ctx.get(), 0);
    if (*client.tls12_ciphers) {
      EXPECT_EQ(SSL_CTX_set_cipher_list(client_ctx.get(), client.tls12_ciphers), 1);
    }
    if (*client.groups) {
      EXPECT_EQ(SSL_CTX_set1_groups_list(client_ctx.get(), client.groups), 1);
    }
    SslPtr server(SSL_new(server_ctx.get()));
    SslPtr c(SSL_new(client_ctx.get()));
    BIO *server_bio = nullptr, *client_bio = nullptr;
    BIO_new_bio_pair(&server_bio, 0, &client_bio, 0);
    SSL_set_bio(server.get(), server_bio, server_bio);
    SSL_set_bio(c.get(), client_bio, client_bio);
    SSL_set_accept_state(server.get());
    SSL_set_connect_state(c.get());
    Outcome out;
    for (int round = 0; round < 20; ++round) {
      int rc = SSL_do_handshake(c.get());
      int rs = SSL_do_handshake(server.get());
      if (rc == 1 && rs == 1) {
        out.connected = true;
        out.version = SSL_get_version(c.get());
        out.cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(c.get()));
        break;
      }
      int ec = SSL_get_error(c.get(), rc), es = SSL_get_error(server.get(), rs);
      bool stuck = (rc != 1 && ec != SSL_ERROR_WANT_READ && ec != SSL_ERROR_WANT_WRITE) ||
                   (rs != 1 && es != SSL_ERROR_WANT_READ && es != SSL_ERROR_WANT_WRITE);
      if (stuck) break;
    }
    ERR_clear_error();
    return out;
  }

  std::string cert_, key_;
};

TEST_F(TlsProfileTest, ParsesTheTwoProfileNames) {
  TlsProfile p = TlsProfile::kModern;
  EXPECT_TRUE(parse_tls_profile("intermediate", &p));
  EXPECT_EQ(p, TlsProfile::kIntermediate);
  EXPECT_TRUE(parse_tls_profile("modern", &p));
  EXPECT_EQ(p, TlsProfile::kModern);
  EXPECT_FALSE(parse_tls_profile("old", &p));
  EXPECT_FALSE(parse_tls_profile("", &p));
  EXPECT_FALSE(parse_tls_profile("Modern", &p));
  EXPECT_EQ(tls_profile_name(TlsProfile::kIntermediate), "intermediate");
  EXPECT_EQ(tls_profile_name(TlsProfile::kModern), "modern");
}

TEST_F(TlsProfileTest, IntermediateOffersTls12And13) {
  Outcome any = handshake(TlsProfile::kIntermediate, {});
  ASSERT_TRUE(any.connected);
  EXPECT_EQ(any.version, "TLSv1.3");
  Outcome tls12 = handshake(TlsProfile::kIntermediate, {TLS1_2_VERSION, TLS1_2_VERSION});
  ASSERT_TRUE(tls12.connected);
  EXPECT_EQ(tls12.version, "TLSv1.2");
  EXPECT_EQ(tls12.cipher.rfind("ECDHE-ECDSA-", 0), 0u) << tls12.cipher;
}

TEST_F(TlsProfileTest, OldVersionsAreRefusedByBothProfiles) {
  for (TlsProfile p : {TlsProfile::kIntermediate, TlsProfile::kModern}) {
    EXPECT_FALSE(handshake(p, {TLS1_VERSION, TLS1_VERSION}).connected);
    EXPECT_FALSE(handshake(p, {TLS1_1_VERSION, TLS1_1_VERSION}).connected);
  }
}

TEST_F(TlsProfileTest, ModernRefusesTls12) {
  EXPECT_FALSE(handshake(TlsProfile::kModern, {TLS1_2_VERSION, TLS1_2_VERSION}).connected);
  Outcome tls13 = handshake(TlsProfile::kModern, {});
  ASSERT_TRUE(tls13.connected);
  EXPECT_EQ(tls13.version, "TLSv1.3");
}

// Every TLS 1.2 cipher a client may ask for alone: only ECDHE with an AEAD gets in.
TEST_F(TlsProfileTest, Tls12CiphersAreEcdheWithAeadOnly) {
  struct Row {
    const char* cipher;
    bool accepted;
  };
  const Row rows[] = {
      {"ECDHE-ECDSA-AES128-GCM-SHA256", true},
      {"ECDHE-ECDSA-AES256-GCM-SHA384", true},
      {"ECDHE-ECDSA-CHACHA20-POLY1305", true},
      {"ECDHE-ECDSA-AES128-SHA256", false},  // CBC
      {"ECDHE-ECDSA-AES256-SHA", false},     // CBC, SHA-1
      {"ECDHE-ECDSA-AES128-CCM", false},     // not in the profile
      {"ECDHE-ECDSA-ARIA128-GCM-SHA256", false},
      {"ECDHE-ECDSA-CAMELLIA128-SHA256", false},
      {"ECDHE-ECDSA-NULL-SHA", false},
      {"AES128-GCM-SHA256", false},  // static RSA key exchange (and no RSA key here)
      {"DHE-RSA-AES128-GCM-SHA256", false},
  };
  for (const Row& row : rows) {
    Client client{TLS1_2_VERSION, TLS1_2_VERSION, row.cipher};
    Outcome out = handshake(TlsProfile::kIntermediate, client);
    EXPECT_EQ(out.connected, row.accepted) << row.cipher;
    if (row.accepted) {
      EXPECT_EQ(out.cipher, row.cipher);
    }
  }
}

// The server's order wins (AES-128-GCM before AES-256-GCM), except for a client that puts
// ChaCha20 first.
TEST_F(TlsProfileTest, ServerCipherOrderWithChachaForClientsThatPreferIt) {
  Client aes256_first{TLS1_2_VERSION, TLS1_2_VERSION,
                      "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256"};
  EXPECT_EQ(handshake(TlsProfile::kIntermediate, aes256_first).cipher,
            "ECDHE-ECDSA-AES128-GCM-SHA256");
  Client chacha_first{TLS1_2_VERSION, TLS1_2_VERSION,
                      "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256"};
  EXPECT_EQ(handshake(TlsProfile::kIntermediate, chacha_first).cipher,
            "ECDHE-ECDSA-CHACHA20-POLY1305");
  Client chacha_last{TLS1_2_VERSION, TLS1_2_VERSION,
                     "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305"};
  EXPECT_EQ(handshake(TlsProfile::kIntermediate, chacha_last).cipher,
            "ECDHE-ECDSA-AES256-GCM-SHA384");
}

TEST_F(TlsProfileTest, OnlyTheProfilesGroupsAreAccepted) {
  for (const char* group : {"X25519", "P-256", "P-384"}) {
    EXPECT_TRUE(
        handshake(TlsProfile::kIntermediate, {TLS1_3_VERSION, TLS1_3_VERSION, "", group}).connected)
        << group;
  }
  for (const char* group : {"P-521", "X448", "ffdhe2048"}) {
    EXPECT_FALSE(
        handshake(TlsProfile::kIntermediate, {TLS1_3_VERSION, TLS1_3_VERSION, "", group}).connected)
        << group;
  }
}

TEST_F(TlsProfileTest, RenegotiationAndCompressionAreOff) {
  std::string error;
  SslCtxPtr ctx =
      make_server_context(cert_, key_, ServerSettings{random_ticket_keys(), {}}, &error);
  ASSERT_TRUE(ctx) << error;
  uint64_t options = SSL_CTX_get_options(ctx.get());
  EXPECT_TRUE(options & SSL_OP_NO_RENEGOTIATION);
  EXPECT_TRUE(options & SSL_OP_NO_COMPRESSION);
  EXPECT_TRUE(options & SSL_OP_CIPHER_SERVER_PREFERENCE);
}

}  // namespace
}  // namespace tidegate::dataplane::tls
