#pragma once
// Where the API server is and how to authenticate to it: from a kubeconfig file (the current
// context, or a named one) or from the in-cluster service account. Reading never throws; a problem
// is one line naming the file and the field.

#include <filesystem>
#include <optional>
#include <string>

namespace tidegate::controller::kube {

inline constexpr std::string_view kServiceAccountDir =
    "/var/run/secrets/kubernetes.io/serviceaccount";

struct ClusterConfig {
  std::string server;  // "https://127.0.0.1:6443", no trailing slash
  std::string ca_pem;  // empty: the system's trust store
  bool insecure_skip_tls_verify = false;
  // Bearer token, given inline or read from token_file on every request: a projected
  // service-account token rotates under us, and re-reading a small file is cheaper than a watch.
  std::string token;
  std::string token_file;
  std::string client_cert_pem;  // client certificate authentication, both or neither
  std::string client_key_pem;
  std::string namespace_;  // the context's namespace, or the service account's; may be empty
  // Never prints the token or the key.
  std::string describe() const;
};

// The token to send now: token_file's content (trimmed) when set, else token. Empty when none.
std::string current_token(const ClusterConfig& config, std::string* error);

// Reads a kubeconfig. `context` empty means current-context. Relative file paths in it are
// resolved against the kubeconfig's folder, as kubectl does.
std::optional<ClusterConfig> load_kubeconfig(const std::filesystem::path& path,
                                             const std::string& context, std::string* error);

// Reads a kubeconfig from text (for tests); `base_dir` resolves relative paths.
std::optional<ClusterConfig> parse_kubeconfig(const std::string& text,
                                              const std::filesystem::path& base_dir,
                                              const std::string& context, std::string* error);

// KUBERNETES_SERVICE_HOST/PORT plus the service account's token, ca.crt and namespace files under
// `sa_dir`. nullopt with *error when not running in a cluster.
std::optional<ClusterConfig> load_in_cluster_config(
    std::string* error, const std::filesystem::path& sa_dir = kServiceAccountDir);

}  // namespace tidegate::controller::kube
