#pragma once
// Writes .status.loadBalancer.ingress of our Ingresses: the addresses given by --publish-address,
// or those of the --publish-service Service's own load balancer. Only the leader writes (when an
// elector is given); every replica still serves traffic.
//
// What was written is remembered per Ingress, so a steady state costs no API call; a new leader
// starts with nothing remembered and writes each Ingress once (a merge patch that changes nothing
// is a no-op for the API server, and makes no watch event).
//
// An Ingress we wrote that stops being ours (another class, another controller's IngressClass) has
// its status cleared, with a JSON patch whose "test" operation requires the value we wrote: if
// its new controller has already written its own addresses, they are left alone.

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kube/kube_source.h"
#include "status/leader_election.h"

namespace tidegate::controller::status {

struct StatusOptions {
  std::vector<std::string> publish_addresses;  // IPs or host names
  std::string publish_service;                 // "namespace/name", instead of publish_addresses
  std::chrono::milliseconds period{std::chrono::seconds(2)};
  // On stop(), the leader clears the status it wrote (--update-status-on-shutdown). Off by default:
  // in a rolling update the next leader publishes the same addresses, and clearing them first
  // would make DNS automation (external-dns) drop the records for a moment.
  bool clear_on_shutdown = false;
};

// The JSON array for status.loadBalancer.ingress: {"ip": ...} for an IP, {"hostname": ...} else.
std::string load_balancer_json(const std::vector<std::string>& addresses);

bool is_ip_address(const std::string& s);  // an IPv4 or IPv6 literal

// The addresses of the --publish-service Service "namespace/name": its load balancer's IPs and
// host names; with `cluster_ip_fallback`, its ClusterIP when it has none (Gateway status).
// nullopt when the Service cannot be read (logged).
std::optional<std::vector<std::string>> published_addresses(kube::ApiClient& client,
                                                            const std::string& publish_service,
                                                            bool cluster_ip_fallback);

class StatusWriter {
 public:
  StatusWriter(kube::KubeSource& source, LeaderElector* elector, StatusOptions options);
  ~StatusWriter();
  void start();
  void stop();
  void notify();  // any thread: the store changed

 private:
  void run();
  void sync();
  // Removes status.loadBalancer.ingress of ns/name if it is still `written` (what we wrote).
  void clear(const std::string& key, const std::string& written);
  std::optional<std::vector<std::string>> desired_addresses();

  kube::KubeSource& source_;
  LeaderElector* elector_;
  StatusOptions options_;
  std::map<std::string, std::string> written_;  // "ns/name" -> the JSON last written
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool dirty_ = true;
  std::thread thread_;
};

}  // namespace tidegate::controller::status
