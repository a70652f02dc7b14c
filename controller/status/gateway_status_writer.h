#pragma once
// Writes the Gateway API status the translator computed (translate/gateway/status.h) onto the
// objects: GatewayClass, Gateway (with the data plane's addresses), the parents[] entries of
// HTTPRoutes and GRPCRoutes that name our Gateways, and the ancestors[] entries of
// BackendTLSPolicies whose Services those routes use. Only the leader writes (when an elector is
// given). docs/gateway-api.md, "Status".
//
// What was written is remembered per object, so a steady state costs no API call. Every write
// reads the object first and sends what it read merged with ours, carrying the resourceVersion
// read (a conflict — someone wrote in between — is read and merged again at once, up to three
// times): a route's and a policy's entries of other controllers are kept, and only our entries
// are replaced. An object whose generation is newer than the one our status describes is left
// alone until the translator has seen it (its status would claim the old spec). Conditions keep
// their lastTransitionTime while their status stays the same (the API requires the field and
// clients read it as "since when"), also across a restart or a change of leader: a condition
// whose status the object already holds keeps the object's time. A malformed status on the object
// (a list that is not one, entries without fields) is taken as empty, never an error.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "status/gateway_services.h"
#include "status/leader_election.h"
#include "translate/gateway/status.h"

namespace tidegate::controller::status {

struct GatewayStatusOptions {
  // The addresses every Gateway gets in status.addresses (IPs or host names): --publish-address,
  // or those of --publish-service (its load balancer's, else its ClusterIP).
  std::vector<std::string> publish_addresses;
  std::string publish_service;  // "namespace/name"
  // --gateway-listener-ports: each Gateway gets a Service of its own beside publish_service
  // (status/gateway_services.h), whose addresses are its status.addresses.
  bool per_gateway_services = false;
  std::chrono::milliseconds period{std::chrono::seconds(2)};
};

// Remembers since when each condition has its status: key "object|type" -> (status, time).
class TransitionTimes {
 public:
  // The lastTransitionTime of a condition with `status` now: the remembered one while the
  // status is unchanged, else `now`.
  std::string at(const std::string& object, const std::string& type, const std::string& status,
                 const std::string& now);
  // The object holds condition `type` with `status` since `time` (read back from the API): that
  // is its transition time while we keep the same status.
  void adopt(const std::string& object, const std::string& type, const std::string& status,
             const std::string& time);

 private:
  std::map<std::string, std::pair<std::string, std::string>> since_;
};

// adopt() for each well-formed condition of a status conditions list read from the API.
void adopt_condition_times(const nlohmann::json& conditions, const std::string& object,
                           TransitionTimes& times);

// The status objects written (pure but for the times; `now` is an RFC 3339 time for new
// transitions; `current`, where taken, is what the object holds, whose times are adopted).
nlohmann::json conditions_json(const std::vector<translate::gateway::Condition>& conditions,
                               const std::string& object, TransitionTimes& times,
                               const std::string& now);
nlohmann::json gateway_class_status_json(const translate::gateway::GatewayClassStatus& s,
                                         TransitionTimes& times, const std::string& now,
                                         const nlohmann::json& current = nullptr);
// `addresses`: IPs become {"type": "IPAddress"}, names {"type": "Hostname"}.
nlohmann::json gateway_status_json(const translate::gateway::GatewayStatus& s,
                                   const std::vector<std::string>& addresses,
                                   TransitionTimes& times, const std::string& now,
                                   const nlohmann::json& current = nullptr);
nlohmann::json parent_ref_json(const objects::ParentReference& ref);
// The route's new status.parents: `current` (what the object holds) without our controller's
// entries, then ours.
nlohmann::json route_parents_json(const translate::gateway::RouteStatus& s,
                                  const nlohmann::json& current, const std::string& controller_name,
                                  TransitionTimes& times, const std::string& now);
// A BackendTLSPolicy's new status.ancestors, likewise.
nlohmann::json policy_ancestors_json(const translate::gateway::BackendTLSPolicyStatus& s,
                                     const nlohmann::json& current,
                                     const std::string& controller_name, TransitionTimes& times,
                                     const std::string& now);

class GatewayStatusWriter {
 public:
  GatewayStatusWriter(kube::ApiClient& client, LeaderElector* elector, GatewayStatusOptions options,
                      std::string controller_name);
  ~GatewayStatusWriter();
  void start();
  void stop();
  // Any thread: the translator's latest report.
  void set(translate::gateway::GatewayStatusReport report);

 private:
  void run();
  void sync();
  // Writes the routes' parents[] and clears ours from routes that no longer name our Gateways.
  void write_routes(const translate::gateway::GatewayStatusReport& report, const std::string& now);
  std::optional<std::vector<std::string>> desired_addresses();
  // Replaces our entries of the route's status.parents with those of `s` (none: clears them),
  // keeping other controllers'. True when done (or nothing was to be done).
  bool write_route_parents(const std::string& path, const translate::gateway::RouteStatus& s,
                           const std::string& now);
  // Replaces our entries (our controllerName) of the object's status.<field> with `merged` of
  // what the object holds (write_status). `generation`: the one our entries describe (0: no
  // check, as when clearing).
  bool write_owned_entries(const std::string& path, const std::string& field,
                           const std::string& what, int64_t generation,
                           const std::function<nlohmann::json(const nlohmann::json&)>& merged);
  // Writes status = `desired(current status)` onto the object at `path` (its /status): nothing
  // when desired(null) is what was written last; else reads the object, skips it when its
  // generation is newer than `generation` (0: no check), and PATCHes the merged status with the
  // resourceVersion read, reading again on a conflict. True when done (or nothing to do).
  bool write_status(const std::string& path, const std::string& what, int64_t generation,
                    const std::function<nlohmann::json(const nlohmann::json&)>& desired);

  kube::ApiClient& client_;
  LeaderElector* elector_;
  GatewayStatusOptions options_;
  std::string controller_name_;
  TransitionTimes times_;
  std::unique_ptr<GatewayServices> services_;   // with per_gateway_services and publish_service
  std::map<std::string, std::string> written_;  // object path -> the status JSON last written
  std::set<std::string> routes_written_;        // routes whose parents[] hold entries of ours
  std::set<std::string> policies_written_;      // BackendTLSPolicies whose ancestors[] do
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<translate::gateway::GatewayStatusReport> report_;
  bool stopping_ = false;
  bool dirty_ = false;
  std::thread thread_;
};

}  // namespace tidegate::controller::status
