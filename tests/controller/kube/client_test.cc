#include "kube/client.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace tidegate::controller::kube {
namespace {

// Restores SSL_CERT_FILE as it was: these tests change the process's environment.
class CertFileEnv {
 public:
  CertFileEnv() {
    if (const char* v = std::getenv("SSL_CERT_FILE")) saved_ = v;
    ::unsetenv("SSL_CERT_FILE");
  }
  ~CertFileEnv() {
    if (saved_) {
      ::setenv("SSL_CERT_FILE", saved_->c_str(), 1);
    } else {
      ::unsetenv("SSL_CERT_FILE");
    }
  }

 private:
  std::optional<std::string> saved_;
};

// What cpprestsdk does to every new context: the default verify paths, loaded into its store.
int certificates_loaded_by_default_paths() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  EXPECT_NE(ctx, nullptr);
  SSL_CTX_set_default_verify_paths(ctx);
  const int n = sk_X509_OBJECT_num(X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx)));
  SSL_CTX_free(ctx);
  return n;
}

ClusterConfig with_ca() {
  ClusterConfig c;
  c.server = "https://127.0.0.1:6443";
  c.ca_pem = "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n";
  return c;
}

TEST(SkipSystemCaBundle, WithTheClustersCaTheDefaultPathsLoadNothing) {
  CertFileEnv env;
  // The system's bundle, where it is installed (ca-certificates), is what the call saves.
  if (::access(X509_get_default_cert_file(), R_OK) == 0) {
    EXPECT_GT(certificates_loaded_by_default_paths(), 10);
  }
  ASSERT_TRUE(skip_system_ca_bundle(with_ca()));
  EXPECT_STREQ(std::getenv("SSL_CERT_FILE"), "/dev/null");
  EXPECT_EQ(certificates_loaded_by_default_paths(), 0);
}

TEST(SkipSystemCaBundle, WithoutACaTheSystemBundleStays) {
  CertFileEnv env;
  ClusterConfig c = with_ca();
  c.ca_pem.clear();  // the system's trust store is the one that verifies the API server
  EXPECT_FALSE(skip_system_ca_bundle(c));
  EXPECT_EQ(std::getenv("SSL_CERT_FILE"), nullptr);
  c = with_ca();
  c.insecure_skip_tls_verify = true;
  EXPECT_FALSE(skip_system_ca_bundle(c));
  EXPECT_EQ(std::getenv("SSL_CERT_FILE"), nullptr);
}

// The file an environment names (these machines set SSL_CERT_FILE to the system bundle) would
// only fill the store that the cluster's CA replaces: it is skipped as well.
TEST(SkipSystemCaBundle, AnSslCertFileAlreadySetIsSkippedToo) {
  CertFileEnv env;
  ::setenv("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt", 1);
  ASSERT_TRUE(skip_system_ca_bundle(with_ca()));
  EXPECT_STREQ(std::getenv("SSL_CERT_FILE"), "/dev/null");
  EXPECT_EQ(certificates_loaded_by_default_paths(), 0);
}

}  // namespace
}  // namespace tidegate::controller::kube
