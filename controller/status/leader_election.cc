#include "status/leader_election.h"

#include <yaml-cpp/yaml.h>

#include <ctime>

#include "kube/api.h"
#include "log/log.h"

namespace tidegate::controller::status {

namespace {

std::string lease_path(const ElectionOptions& o, bool with_name) {
  std::string p = "/apis/coordination.k8s.io/v1/namespaces/" + o.namespace_ + "/leases";
  if (with_name) p += "/" + o.name;
  return p;
}

std::string scalar(const YAML::Node& n) { return n && n.IsScalar() ? n.Scalar() : ""; }

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

}  // namespace

std::string micro_time_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
            1'000'000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long>(us));
  return buf;
}

LeaderElector::LeaderElector(kube::ApiClient& client, ElectionOptions options)
    : client_(client), options_(std::move(options)) {}

LeaderElector::~LeaderElector() { stop(); }

void LeaderElector::start() {
  thread_ = std::thread([this] { run(); });
}

void LeaderElector::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string LeaderElector::lease_body(const std::string& resource_version,
                                      const std::string& acquire_time, int transitions,
                                      bool held) const {
  std::string now = micro_time_now();
  std::string meta = "{\"name\":" + json_string(options_.name) +
                     ",\"namespace\":" + json_string(options_.namespace_);
  if (!resource_version.empty()) meta += ",\"resourceVersion\":" + json_string(resource_version);
  meta += "}";
  std::string spec =
      "{\"holderIdentity\":" + json_string(held ? options_.identity : "") +
      ",\"leaseDurationSeconds\":" +
      std::to_string(
          held ? std::max<long>(
                     1, std::chrono::ceil<std::chrono::seconds>(options_.lease_duration).count())
               : 1) +
      ",\"acquireTime\":" + json_string(acquire_time.empty() ? now : acquire_time) +
      ",\"renewTime\":" + json_string(now) +
      ",\"leaseTransitions\":" + std::to_string(transitions) + "}";
  return "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":" + meta +
         ",\"spec\":" + spec + "}";
}

bool LeaderElector::try_acquire_or_renew() {
  kube::Response r = client_.get(lease_path(options_, true));
  if (r.status == 404) {
    kube::Response c = client_.send("POST", lease_path(options_, false),
                                    lease_body("", "", 0, true), "application/json");
    return c.status == 201;
  }
  if (r.status != 200) {
    TG_DEBUG("election", "reading Lease " << options_.namespace_ << "/" << options_.name
                                          << " failed: " << r.status << " " << r.error);
    return false;  // cannot renew: when the lease runs out, we are no longer the leader
  }
  YAML::Node lease;
  try {
    lease = YAML::Load(r.body);
  } catch (const YAML::Exception&) {
    return false;
  }
  const std::string holder = scalar(lease["spec"]["holderIdentity"]);
  const std::string renew = scalar(lease["spec"]["renewTime"]);
  const std::string rv = scalar(lease["metadata"]["resourceVersion"]);
  int transitions = 0;
  try {
    if (lease["spec"]["leaseTransitions"])
      transitions = lease["spec"]["leaseTransitions"].as<int>();
  } catch (const YAML::Exception&) {
  }
  const auto now = std::chrono::steady_clock::now();
  if (holder != options_.identity && !holder.empty()) {
    if (leader_) {
      TG_WARN("election", options_.identity << " lost the leadership to " << holder);
      leader_ = false;
    }
    const std::string record = holder + "@" + renew;
    if (record != observed_record_) {
      observed_record_ = record;
      observed_at_ = now;
      return false;  // someone else renewed since we last looked
    }
    if (now - observed_at_ < options_.lease_duration) return false;
    TG_INFO("election", "Lease held by " << holder << " expired; taking it");
  }
  const bool ours = holder == options_.identity;
  kube::Response u = client_.send("PUT", lease_path(options_, true),
                                  lease_body(rv, ours ? scalar(lease["spec"]["acquireTime"]) : "",
                                             ours ? transitions : transitions + 1, true),
                                  "application/json");
  return u.status == 200;  // 409: someone else won the race
}

void LeaderElector::release() {
  kube::Response r = client_.get(lease_path(options_, true));
  if (r.status != 200) return;
  try {
    YAML::Node lease = YAML::Load(r.body);
    if (scalar(lease["spec"]["holderIdentity"]) != options_.identity) return;
    int transitions =
        lease["spec"]["leaseTransitions"] ? lease["spec"]["leaseTransitions"].as<int>() : 0;
    client_.send("PUT", lease_path(options_, true),
                 lease_body(scalar(lease["metadata"]["resourceVersion"]), "", transitions, false),
                 "application/json");
  } catch (const YAML::Exception&) {
  }
}

void LeaderElector::run() {
  auto last_renew = std::chrono::steady_clock::now();
  for (;;) {
    bool held = try_acquire_or_renew();
    auto now = std::chrono::steady_clock::now();
    if (held) {
      last_renew = now;
      if (!leader_)
        TG_INFO("election", options_.identity << " became the leader (Lease " << options_.namespace_
                                              << "/" << options_.name << ")");
      leader_ = true;
    } else if (leader_ && now - last_renew > options_.lease_duration * 2 / 3) {
      // Could not renew in time: stop acting as leader before another replica may take over.
      TG_WARN("election", options_.identity << " lost the leadership");
      leader_ = false;
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, options_.retry_period, [this] { return stopping_; })) break;
  }
  if (leader_) {
    leader_ = false;
    release();
  }
}

}  // namespace tidegate::controller::status
