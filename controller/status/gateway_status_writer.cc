#include "status/gateway_status_writer.h"

#include <ctime>
#include <set>

#include "kube/api.h"
#include "log/log.h"
#include "status/status_writer.h"

namespace tidegate::controller::status {

using nlohmann::json;
using translate::gateway::Condition;

namespace {

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

// The status subresource of an object (kube::resource_path knows the kinds' paths).
std::string status_path(objects::Kind kind, const std::string& ns, const std::string& name) {
  return kube::resource_path(kind, ns, name) + "/status";
}

}  // namespace

std::string TransitionTimes::at(const std::string& object, const std::string& type,
                                const std::string& status, const std::string& now) {
  auto& entry = since_[object + "|" + type];
  if (entry.first != status || entry.second.empty()) entry = {status, now};
  return entry.second;
}

json conditions_json(const std::vector<Condition>& conditions, const std::string& object,
                     TransitionTimes& times, const std::string& now) {
  json out = json::array();
  for (const auto& c : conditions) {
    out.push_back(json{{"type", c.type},
                       {"status", c.status},
                       {"reason", c.reason},
                       {"message", c.message},
                       {"observedGeneration", c.observed_generation},
                       {"lastTransitionTime", times.at(object, c.type, c.status, now)}});
  }
  return out;
}

json gateway_class_status_json(const translate::gateway::GatewayClassStatus& s,
                               TransitionTimes& times, const std::string& now) {
  return json{{"conditions", conditions_json(s.conditions, "GatewayClass " + s.name, times, now)}};
}

json gateway_status_json(const translate::gateway::GatewayStatus& s,
                         const std::vector<std::string>& addresses, TransitionTimes& times,
                         const std::string& now) {
  const std::string object = "Gateway " + s.namespace_ + "/" + s.name;
  json listeners = json::array();
  for (const auto& l : s.listeners) {
    json kinds = json::array();
    for (const auto& k : l.supported_kinds)
      kinds.push_back(json{{"group", k.group}, {"kind", k.kind}});
    listeners.push_back(json{
        {"name", l.name},
        {"supportedKinds", std::move(kinds)},
        {"attachedRoutes", l.attached_routes},
        {"conditions", conditions_json(l.conditions, object + " listener " + l.name, times, now)}});
  }
  json out{{"conditions", conditions_json(s.conditions, object, times, now)},
           {"listeners", std::move(listeners)}};
  json addrs = json::array();
  for (const auto& a : addresses) {
    addrs.push_back(json{{"type", is_ip_address(a) ? "IPAddress" : "Hostname"}, {"value", a}});
  }
  // Merge patch: an empty list clears what an earlier leader wrote.
  out["addresses"] = std::move(addrs);
  return out;
}

json parent_ref_json(const objects::ParentReference& ref) {
  json j{{"group", ref.group}, {"kind", ref.kind}, {"name", ref.name}};
  if (ref.namespace_) j["namespace"] = *ref.namespace_;
  if (ref.section_name) j["sectionName"] = *ref.section_name;
  if (ref.port) j["port"] = *ref.port;
  return j;
}

namespace {

// The entries of `current` (a status list) that another controller wrote.
json foreign_entries(const json& current, const std::string& controller_name) {
  json out = json::array();
  if (current.is_array()) {
    for (const auto& p : current) {
      if (p.is_object() && p.value("controllerName", "") != controller_name) out.push_back(p);
    }
  }
  return out;
}

}  // namespace

json policy_ancestors_json(const translate::gateway::BackendTLSPolicyStatus& s, const json& current,
                           const std::string& controller_name, TransitionTimes& times,
                           const std::string& now) {
  json ancestors = foreign_entries(current, controller_name);
  const std::string object = "BackendTLSPolicy " + s.namespace_ + "/" + s.name;
  for (const auto& a : s.ancestors) {
    const json ref = parent_ref_json(a.ancestor_ref);
    ancestors.push_back(
        json{{"ancestorRef", ref},
             {"controllerName", a.controller_name},
             {"conditions", conditions_json(a.conditions, object + " " + ref.dump(), times, now)}});
  }
  return ancestors;
}

json route_parents_json(const translate::gateway::RouteStatus& s, const json& current,
                        const std::string& controller_name, TransitionTimes& times,
                        const std::string& now) {
  json parents = foreign_entries(current, controller_name);
  const std::string object = s.kind + " " + s.namespace_ + "/" + s.name;
  for (const auto& p : s.parents) {
    const json ref = parent_ref_json(p.parent_ref);
    parents.push_back(
        json{{"parentRef", ref},
             {"controllerName", p.controller_name},
             {"conditions", conditions_json(p.conditions, object + " " + ref.dump(), times, now)}});
  }
  return parents;
}

GatewayStatusWriter::GatewayStatusWriter(kube::ApiClient& client, LeaderElector* elector,
                                         GatewayStatusOptions options, std::string controller_name)
    : client_(client),
      elector_(elector),
      options_(std::move(options)),
      controller_name_(std::move(controller_name)) {
  if (options_.per_gateway_services && !options_.publish_service.empty()) {
    services_ =
        std::make_unique<GatewayServices>(client_, options_.publish_service, controller_name_);
  }
}

GatewayStatusWriter::~GatewayStatusWriter() { stop(); }

void GatewayStatusWriter::start() {
  thread_ = std::thread([this] { run(); });
}

void GatewayStatusWriter::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GatewayStatusWriter::set(translate::gateway::GatewayStatusReport report) {
  {
    std::lock_guard lock(mu_);
    if (report_ && *report_ == report) return;
    report_ = std::move(report);
    dirty_ = true;
  }
  cv_.notify_all();
}

std::optional<std::vector<std::string>> GatewayStatusWriter::desired_addresses() {
  if (options_.publish_service.empty()) return options_.publish_addresses;
  return published_addresses(client_, options_.publish_service, true);
}

bool GatewayStatusWriter::patch(const std::string& path, const std::string& what,
                                const std::string& body) {
  auto it = written_.find(path);
  if (it != written_.end() && it->second == body) return true;
  kube::Response r = client_.send("PATCH", path, body, "application/merge-patch+json");
  if (r.status == 200) {
    TG_INFO("status", what << " status written");
    written_[path] = body;
    return true;
  }
  if (r.status != 404) {
    TG_WARN("status",
            "writing the status of " << what << " failed: " << r.status << " " << r.error);
  }
  written_.erase(path);
  return false;
}

void GatewayStatusWriter::sync() {
  if (elector_ && !elector_->is_leader()) {
    written_.clear();  // when we lead again, write everything once
    routes_written_.clear();
    if (services_) services_->forget();
    policies_written_.clear();
    return;
  }
  std::optional<translate::gateway::GatewayStatusReport> report;
  {
    std::lock_guard lock(mu_);
    report = report_;
  }
  if (!report) return;
  const std::string now = now_rfc3339();
  if (services_) {
    // One address per Gateway: its own Service's. A Gateway without one (yet) is not programmed.
    const auto own = services_->sync(report->services);
    for (const auto& [name, s] : report->gateway_classes) {
      patch(status_path(objects::Kind::kGatewayClass, "", name), "GatewayClass " + name,
            json{{"status", gateway_class_status_json(s, times_, now)}}.dump());
    }
    for (const auto& [key, s] : report->gateways) {
      translate::gateway::GatewayStatus status = s;
      auto it = own.find(key);
      const std::vector<std::string> none;
      if (it == own.end()) {
        for (auto& c : status.conditions) {
          if (c.type != "Programmed" || c.status != "True") continue;
          c.status = "False";
          c.reason = "AddressNotAssigned";
          c.message = "the Gateway's Service has no address yet";
        }
      }
      patch(status_path(objects::Kind::kGateway, s.namespace_, s.name), "Gateway " + key,
            json{{"status",
                  gateway_status_json(status, it == own.end() ? none : it->second, times_, now)}}
                .dump());
    }
    write_routes(*report, now);
    return;
  }
  const auto addresses = desired_addresses();
  for (const auto& [name, s] : report->gateway_classes) {
    patch(status_path(objects::Kind::kGatewayClass, "", name), "GatewayClass " + name,
          json{{"status", gateway_class_status_json(s, times_, now)}}.dump());
  }
  for (const auto& [key, s] : report->gateways) {
    // Without an answer about the addresses (the Service could not be read) the last ones stay.
    if (!addresses) continue;
    patch(status_path(objects::Kind::kGateway, s.namespace_, s.name), "Gateway " + key,
          json{{"status", gateway_status_json(s, *addresses, times_, now)}}.dump());
  }
  write_routes(*report, now);
}

void GatewayStatusWriter::write_routes(const translate::gateway::GatewayStatusReport& report_in,
                                       const std::string& now) {
  const auto* report = &report_in;
  std::set<std::string> reported;
  for (const auto& [key, s] : report->routes) {
    const std::string path =
        status_path(s.kind == "GRPCRoute" ? objects::Kind::kGRPCRoute : objects::Kind::kHTTPRoute,
                    s.namespace_, s.name);
    reported.insert(path);
    if (write_route_parents(path, s, now)) routes_written_.insert(path);
  }
  // Routes that no longer name our Gateways (or are gone): our entries are taken out.
  for (auto it = routes_written_.begin(); it != routes_written_.end();) {
    if (reported.contains(*it)) {
      ++it;
      continue;
    }
    translate::gateway::RouteStatus none;
    none.kind = it->find("/grpcroutes/") != std::string::npos ? "GRPCRoute" : "HTTPRoute";
    none.name = *it;
    if (write_route_parents(*it, none, now)) {
      written_.erase(*it + "#ours");
      it = routes_written_.erase(it);
    } else {
      ++it;
    }
  }
  // BackendTLSPolicies: our ancestors[] entries, likewise.
  std::set<std::string> policies;
  for (const auto& [key, s] : report->backend_tls_policies) {
    const std::string path = status_path(objects::Kind::kBackendTLSPolicy, s.namespace_, s.name);
    policies.insert(path);
    const json ours = policy_ancestors_json(s, json::array(), controller_name_, times_, now);
    if (write_owned_entries(
            path, "ancestors", "BackendTLSPolicy " + key, ours.dump(), [&](const json& current) {
              return policy_ancestors_json(s, current, controller_name_, times_, now);
            })) {
      policies_written_.insert(path);
    }
  }
  for (auto it = policies_written_.begin(); it != policies_written_.end();) {
    if (policies.contains(*it)) {
      ++it;
      continue;
    }
    if (write_owned_entries(*it, "ancestors", *it, "[]", [&](const json& current) {
          return foreign_entries(current, controller_name_);
        })) {
      written_.erase(*it + "#ours");
      it = policies_written_.erase(it);
    } else {
      ++it;
    }
  }
}

bool GatewayStatusWriter::write_route_parents(const std::string& path,
                                              const translate::gateway::RouteStatus& s,
                                              const std::string& now) {
  const std::string ours =
      route_parents_json(s, json::array(), controller_name_, times_, now).dump();
  const std::string what =
      s.kind + " " + (s.namespace_.empty() ? s.name : s.namespace_ + "/" + s.name);
  return write_owned_entries(path, "parents", what, ours, [&](const json& current) {
    return route_parents_json(s, current, controller_name_, times_, now);
  });
}

bool GatewayStatusWriter::write_owned_entries(const std::string& path, const std::string& field,
                                              const std::string& what, const std::string& ours,
                                              const std::function<json(const json&)>& merged) {
  // Other controllers' entries stay: read the object's list first (only when ours change,
  // judged by what we would write with no foreign entries).
  if (auto it = written_.find(path + "#ours"); it != written_.end() && it->second == ours) {
    return true;
  }
  const std::string object_path = path.substr(0, path.size() - std::string("/status").size());
  kube::Response current = client_.get(object_path);
  if (current.status == 404) return ours == "[]";  // gone: nothing left to clear
  if (current.status != 200) return false;
  json entries = json::array();
  std::string resource_version;
  try {
    json object = json::parse(current.body);
    resource_version = object["metadata"].value("resourceVersion", "");
    if (object.contains("status") && object["status"].contains(field)) {
      entries = object["status"][field];
    }
  } catch (const json::exception&) {
    return false;
  }
  json body{{"metadata", {{"resourceVersion", resource_version}}},
            {"status", {{field, merged(entries)}}}};
  written_.erase(path);  // the resourceVersion makes every body new: always send
  if (!patch(path, what, body.dump())) return false;
  written_[path + "#ours"] = ours;
  return true;
}

void GatewayStatusWriter::run() {
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
