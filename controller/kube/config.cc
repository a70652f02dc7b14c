#include "kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "objects/objects.h"

namespace tidegate::controller::kube {

namespace {

bool read_file(const std::filesystem::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string scalar(const YAML::Node& node, const char* key) {
  const YAML::Node v = node[key];
  if (!v || !v.IsScalar()) return "";
  return v.Scalar();
}

// The entry of `list` (clusters, users, contexts) whose name is `name`, or an undefined node.
YAML::Node named(const YAML::Node& list, const std::string& name, const char* field) {
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& item : list) {
    if (item.IsMap() && scalar(item, "name") == name) return item[field];
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// `<key>-data` (base64) or `<key>` (a file, relative to base_dir). Returns false on an error.
bool pem_from(const YAML::Node& node, const std::string& key, const std::filesystem::path& base_dir,
              std::string* out, std::string* error) {
  std::string data = scalar(node, (key + "-data").c_str());
  if (!data.empty()) {
    auto decoded = objects::decode_base64(data);
    if (!decoded) {
      *error = key + "-data: invalid base64";
      return false;
    }
    *out = std::move(*decoded);
    return true;
  }
  std::string file = scalar(node, key.c_str());
  if (file.empty()) return true;
  std::filesystem::path p(file);
  if (p.is_relative()) p = base_dir / p;
  if (!read_file(p, out)) {
    *error = key + ": cannot read " + p.string();
    return false;
  }
  return true;
}

}  // namespace

std::string ClusterConfig::describe() const {
  std::string auth = !client_cert_pem.empty() ? "client certificate"
                     : !token_file.empty()    ? "token file " + token_file
                     : !token.empty()         ? "bearer token"
                                              : "no credentials";
  return server + " (" + auth + (ca_pem.empty() ? ", system CAs" : ", given CA") +
         (insecure_skip_tls_verify ? ", TLS NOT VERIFIED" : "") + ")";
}

std::string current_token(const ClusterConfig& config, std::string* error) {
  if (config.token_file.empty()) return config.token;
  std::string text;
  if (!read_file(config.token_file, &text)) {
    if (error) *error = "cannot read token file " + config.token_file;
    return config.token;
  }
  return trim(std::move(text));
}

std::optional<ClusterConfig> parse_kubeconfig(const std::string& text,
                                              const std::filesystem::path& base_dir,
                                              const std::string& context, std::string* error) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    *error = std::string("invalid YAML: ") + e.what();
    return std::nullopt;
  }
  if (!root.IsMap()) {
    *error = "not a kubeconfig (expected a mapping)";
    return std::nullopt;
  }
  try {
    std::string context_name = context.empty() ? scalar(root, "current-context") : context;
    if (context_name.empty()) {
      *error = "no current-context (and no --kube-context given)";
      return std::nullopt;
    }
    YAML::Node ctx = named(root["contexts"], context_name, "context");
    if (!ctx || !ctx.IsMap()) {
      *error = "context " + context_name + " not found";
      return std::nullopt;
    }
    const std::string cluster_name = scalar(ctx, "cluster");
    YAML::Node cluster = named(root["clusters"], cluster_name, "cluster");
    if (!cluster || !cluster.IsMap()) {
      *error = "cluster \"" + cluster_name + "\" of context " + context_name + " not found";
      return std::nullopt;
    }
    ClusterConfig config;
    config.server = scalar(cluster, "server");
    while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
    if (config.server.empty()) {
      *error = "cluster " + cluster_name + ": no server";
      return std::nullopt;
    }
    config.insecure_skip_tls_verify = scalar(cluster, "insecure-skip-tls-verify") == "true";
    std::string why;
    if (!pem_from(cluster, "certificate-authority", base_dir, &config.ca_pem, &why)) {
      *error = "cluster " + cluster_name + ": " + why;
      return std::nullopt;
    }
    config.namespace_ = scalar(ctx, "namespace");
    const std::string user_name = scalar(ctx, "user");
    if (!user_name.empty()) {
      YAML::Node user = named(root["users"], user_name, "user");
      if (!user || !user.IsMap()) {
        *error = "user " + user_name + " of context " + context_name + " not found";
        return std::nullopt;
      }
      config.token = scalar(user, "token");
      std::string token_file = scalar(user, "tokenFile");
      if (!token_file.empty()) {
        std::filesystem::path p(token_file);
        config.token_file = (p.is_relative() ? base_dir / p : p).string();
      }
      if (!pem_from(user, "client-certificate", base_dir, &config.client_cert_pem, &why) ||
          !pem_from(user, "client-key", base_dir, &config.client_key_pem, &why)) {
        *error = "user " + user_name + ": " + why;
        return std::nullopt;
      }
      if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
        *error = "user " + user_name + ": client-certificate and client-key go together";
        return std::nullopt;
      }
      if (user["exec"] || user["auth-provider"]) {
        *error = "user " + user_name + ": exec and auth-provider credentials are not supported";
        return std::nullopt;
      }
    }
    return config;
  } catch (const YAML::Exception& e) {
    *error = std::string("unexpected shape: ") + e.what();
    return std::nullopt;
  }
}

std::optional<ClusterConfig> load_kubeconfig(const std::filesystem::path& path,
                                             const std::string& context, std::string* error) {
  std::string text;
  if (!read_file(path, &text)) {
    *error = path.string() + ": cannot read";
    return std::nullopt;
  }
  auto config = parse_kubeconfig(text, path.parent_path(), context, error);
  if (!config) *error = path.string() + ": " + *error;
  return config;
}

std::optional<ClusterConfig> load_in_cluster_config(std::string* error,
                                                    const std::filesystem::path& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    *error = "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set";
    return std::nullopt;
  }
  ClusterConfig config;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  config.server = "https://" + h + ":" + port;
  config.token_file = (sa_dir / "token").string();
  std::string ignored;
  if (current_token(config, &ignored).empty()) {
    *error = "in-cluster: cannot read the service account token " + config.token_file;
    return std::nullopt;
  }
  if (!read_file(sa_dir / "ca.crt", &config.ca_pem)) {
    *error = "in-cluster: cannot read " + (sa_dir / "ca.crt").string();
    return std::nullopt;
  }
  std::string ns;
  if (read_file(sa_dir / "namespace", &ns)) config.namespace_ = trim(ns);
  return config;
}

}  // namespace tidegate::controller::kube
