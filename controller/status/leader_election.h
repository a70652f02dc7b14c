#pragma once
// Leader election on a coordination.k8s.io/v1 Lease, so that of several replicas only one writes
// Ingress status. Every replica keeps serving traffic; only the status writer waits for this.
//
// As in client-go, expiry is judged by our own clock: a Lease whose holder and renewTime have not
// changed for lease_duration since *we* first saw them is free to take, whatever the writer's
// clock says. Updates carry the resourceVersion read, so two candidates cannot both win.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "kube/client.h"

namespace tidegate::controller::status {

struct ElectionOptions {
  std::string namespace_ = "default";
  std::string name = "tidegate-leader";
  std::string identity;  // unique per replica: hostname_pid by default
  std::chrono::milliseconds lease_duration{std::chrono::seconds(15)};
  std::chrono::milliseconds retry_period{std::chrono::seconds(2)};
};

class LeaderElector {
 public:
  LeaderElector(kube::ApiClient& client, ElectionOptions options);
  ~LeaderElector();
  void start();
  void stop();  // releases the Lease when we hold it, so that another replica takes over at once
  bool is_leader() const { return leader_; }

 private:
  void run();
  bool try_acquire_or_renew();  // returns whether we hold the Lease now
  void release();
  std::string lease_body(const std::string& resource_version, const std::string& acquire_time,
                         int transitions, bool held) const;

  kube::ApiClient& client_;
  ElectionOptions options_;
  std::atomic<bool> leader_{false};
  // What we last saw of another holder's Lease, and when (our clock).
  std::string observed_record_;
  std::chrono::steady_clock::time_point observed_at_{};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// RFC 3339 with microseconds, UTC: the format of a Lease's MicroTime fields.
std::string micro_time_now();

}  // namespace tidegate::controller::status
