#include "kube/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tidegate::controller::kube {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tg-kubeconfig-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
  }

 private:
  fs::path path_;
};

constexpr const char* kKubeconfig = R"(
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: Q0EtUEVN
- name: prod-cluster
  cluster:
    server: https://prod:443
    certificate-authority: ca.crt
contexts:
- name: dev
  context: {cluster: dev-cluster, user: dev-user, namespace: team}
- name: prod
  context: {cluster: prod-cluster, user: prod-user}
users:
- name: dev-user
  user: {token: s3cret}
- name: prod-user
  user:
    client-certificate: client.crt
    client-key-data: S0VZ
)";

TEST(KubeConfig, CurrentContextWithTokenAndInlineCa) {
  std::string error;
  auto c = parse_kubeconfig(kKubeconfig, "/nowhere", "", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c->ca_pem, "CA-PEM");
  EXPECT_EQ(c->token, "s3cret");
  EXPECT_EQ(c->namespace_, "team");
  EXPECT_EQ(current_token(*c, &error), "s3cret");
  EXPECT_EQ(c->describe().find("s3cret"), std::string::npos);  // never printed
}

TEST(KubeConfig, NamedContextWithFilesRelativeToTheKubeconfig) {
  TempDir dir;
  dir.write("ca.crt", "FILE-CA");
  dir.write("client.crt", "FILE-CERT");
  std::string error;
  auto c = parse_kubeconfig(kKubeconfig, dir.path(), "prod", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->server, "https://prod:443");
  EXPECT_EQ(c->ca_pem, "FILE-CA");
  EXPECT_EQ(c->client_cert_pem, "FILE-CERT");
  EXPECT_EQ(c->client_key_pem, "KEY");
  EXPECT_TRUE(c->token.empty());
}

TEST(KubeConfig, Errors) {
  std::string error;
  EXPECT_FALSE(parse_kubeconfig(kKubeconfig, "/nowhere", "missing", &error));
  EXPECT_NE(error.find("context missing not found"), std::string::npos) << error;
  EXPECT_FALSE(parse_kubeconfig(kKubeconfig, "/nowhere", "prod", &error));  // ca.crt unreadable
  EXPECT_NE(error.find("certificate-authority"), std::string::npos) << error;
  EXPECT_FALSE(parse_kubeconfig("[1, 2]", "/", "", &error));
  EXPECT_FALSE(parse_kubeconfig("apiVersion: v1\n", "/", "", &error));
  EXPECT_NE(error.find("current-context"), std::string::npos) << error;
  EXPECT_FALSE(load_kubeconfig("/nonexistent/kubeconfig", "", &error));
}

TEST(KubeConfig, TokenFileIsReadOnEveryCall) {
  TempDir dir;
  dir.write("token", "first\n");
  std::string text = std::string(kKubeconfig);
  text.replace(text.find("{token: s3cret}"), 15, "{tokenFile: token}");
  std::string error;
  auto c = parse_kubeconfig(text, dir.path(), "", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(current_token(*c, &error), "first");
  dir.write("token", "rotated");
  EXPECT_EQ(current_token(*c, &error), "rotated");
}

TEST(KubeConfig, InCluster) {
  TempDir dir;
  dir.write("token", "sa-token\n");
  dir.write("ca.crt", "SA-CA");
  dir.write("namespace", "ingress\n");
  ::setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  std::string error;
  auto c = load_in_cluster_config(&error, dir.path());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->server, "https://10.0.0.1:443");
  EXPECT_EQ(c->ca_pem, "SA-CA");
  EXPECT_EQ(c->namespace_, "ingress");
  EXPECT_EQ(current_token(*c, &error), "sa-token");
  EXPECT_FALSE(load_in_cluster_config(&error, dir.path()));  // env unset now
}

}  // namespace
}  // namespace tidegate::controller::kube
