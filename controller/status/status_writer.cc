#include "status/status_writer.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include "kube/api.h"
#include "log/log.h"

namespace tidegate::controller::status {

bool is_ip_address(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

std::optional<std::vector<std::string>> published_addresses(kube::ApiClient& client,
                                                            const std::string& publish_service,
                                                            bool cluster_ip_fallback) {
  const auto slash = publish_service.find('/');
  const std::string ns = publish_service.substr(0, slash);
  const std::string name = publish_service.substr(slash + 1);
  kube::Response r = client.get(kube::resource_path(objects::Kind::kService, ns, name));
  if (r.status != 200) {
    TG_WARN("status",
            "--publish-service " << publish_service << ": " << r.status << " " << r.error);
    return std::nullopt;
  }
  std::vector<std::string> out;
  try {
    const YAML::Node service = YAML::Load(r.body);
    const YAML::Node lb = service["status"]["loadBalancer"]["ingress"];
    if (lb && lb.IsSequence()) {
      for (const auto& e : lb) {
        std::string a = e["ip"] ? e["ip"].Scalar() : e["hostname"] ? e["hostname"].Scalar() : "";
        if (!a.empty() && a.find_first_of("\"\\") == std::string::npos) out.push_back(a);
      }
    }
    // No load balancer (a ClusterIP or NodePort Service): its ClusterIP, which the cluster's
    // nodes and pods reach.
    if (cluster_ip_fallback && out.empty() && service["spec"]["clusterIP"]) {
      const std::string ip = service["spec"]["clusterIP"].Scalar();
      if (is_ip_address(ip)) out.push_back(ip);
    }
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
  return out;
}

std::string load_balancer_json(const std::vector<std::string>& addresses) {
  std::string out = "[";
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (i) out += ",";
    // Addresses come from our flags or the API server: no quotes or backslashes to escape in a
    // valid IP or DNS name; anything else is dropped by the caller.
    out += std::string("{\"") + (is_ip_address(addresses[i]) ? "ip" : "hostname") + "\":\"" +
           addresses[i] + "\"}";
  }
  return out + "]";
}

StatusWriter::StatusWriter(kube::KubeSource& source, LeaderElector* elector, StatusOptions options)
    : source_(source), elector_(elector), options_(std::move(options)) {}

StatusWriter::~StatusWriter() { stop(); }

void StatusWriter::start() {
  thread_ = std::thread([this] { run(); });
}

void StatusWriter::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (options_.clear_on_shutdown && (!elector_ || elector_->is_leader())) {
    TG_INFO("status", "clearing the status of " << written_.size() << " Ingresses on shutdown");
    for (const auto& [key, lb] : written_) clear(key, lb);
    written_.clear();
  }
}

void StatusWriter::clear(const std::string& key, const std::string& written) {
  auto slash = key.find('/');
  const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
  const std::string patch =
      "[{\"op\":\"test\",\"path\":\"/status/loadBalancer/ingress\",\"value\":" + written +
      "},{\"op\":\"remove\",\"path\":\"/status/loadBalancer/ingress\"}]";
  kube::Response r = source_.client().send(
      "PATCH", kube::resource_path(objects::Kind::kIngress, ns, name) + "/status", patch,
      "application/json-patch+json");
  if (r.status == 200) {
    TG_INFO("status", "Ingress " << key << " status: cleared");
  } else if (r.status == 422) {
    // The test operation failed: what it holds now is someone else's.
    TG_INFO("status", "Ingress " << key << " status: left as it is (no longer what we wrote)");
  } else if (r.status == 404) {
    TG_DEBUG("status", "Ingress " << key << " is gone");
  } else {
    TG_WARN("status",
            "clearing the status of Ingress " << key << " failed: " << r.status << " " << r.error);
  }
}

void StatusWriter::notify() {
  {
    std::lock_guard lock(mu_);
    dirty_ = true;
  }
  cv_.notify_all();
}

std::optional<std::vector<std::string>> StatusWriter::desired_addresses() {
  if (options_.publish_service.empty()) return options_.publish_addresses;
  return published_addresses(source_.client(), options_.publish_service, false);
}

void StatusWriter::sync() {
  if (elector_ && !elector_->is_leader()) {
    written_.clear();  // when we lead again, write everything once
    return;
  }
  auto addresses = desired_addresses();
  if (!addresses) return;
  const std::string lb = load_balancer_json(*addresses);
  std::vector<std::pair<std::string, std::string>> ours;
  std::vector<std::pair<std::string, std::string>> left;  // we wrote it; no longer ours
  source_.with_store([&](const store::Store& s) {
    for (const auto& [key, ingress] : s.ingresses()) {
      if (store::select_ingress(ingress, s.ingress_classes(), s.options()) ==
          store::IngressSelection::kOurs) {
        ours.emplace_back(ingress.metadata.namespace_, ingress.metadata.name);
      } else if (auto it = written_.find(key); it != written_.end()) {
        left.emplace_back(key, it->second);
      }
    }
    return 0;
  });
  for (const auto& [key, written] : left) clear(key, written);
  std::map<std::string, std::string> still;
  for (const auto& [ns, name] : ours) {
    const std::string key = ns + "/" + name;
    auto it = written_.find(key);
    if (it != written_.end() && it->second == lb) {
      still.emplace(key, lb);
      continue;
    }
    const std::string body = "{\"status\":{\"loadBalancer\":{\"ingress\":" + lb + "}}}";
    kube::Response r = source_.client().send(
        "PATCH", kube::resource_path(objects::Kind::kIngress, ns, name) + "/status", body,
        "application/merge-patch+json");
    if (r.status == 200) {
      TG_INFO("status", "Ingress " << key << " status: load balancer " << lb);
      still.emplace(key, lb);
    } else if (r.status != 404) {
      TG_WARN("status",
              "writing the status of Ingress " << key << " failed: " << r.status << " " << r.error);
    }
  }
  written_ = std::move(still);
}

void StatusWriter::run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, options_.period, [this] { return stopping_ || dirty_; });
      if (stopping_) return;
      dirty_ = false;
    }
    sync();
  }
}

}  // namespace tidegate::controller::status
