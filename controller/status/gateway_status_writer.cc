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

void TransitionTimes::adopt(const std::string& object, const std::string& type,
                            const std::string& status, const std::string& time) {
  if (time.empty()) return;
  auto& entry = since_[object + "|" + type];
  if (entry.first.empty() || entry.first == status) entry = {status, time};
}

void adopt_condition_times(const json& conditions, const std::string& object,
                           TransitionTimes& times) {
  if (!conditions.is_array()) return;
  for (const auto& c : conditions) {
    if (!c.is_object()) continue;
    const auto type = c.find("type");
    const auto status = c.find("status");
    const auto time = c.find("lastTransitionTime");
    if (type == c.end() || status == c.end() || time == c.end() || !type->is_string() ||
        !status->is_string() || !time->is_string()) {
      continue;
    }
    times.adopt(object, type->get<std::string>(), status->get<std::string>(),
                time->get<std::string>());
  }
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

namespace {

// current[key] when `current` is an object that has it, else null.
json member(const json& current, const char* key) {
  if (!current.is_object()) return nullptr;
  auto it = current.find(key);
  return it == current.end() ? json(nullptr) : *it;
}

}  // namespace

json gateway_class_status_json(const translate::gateway::GatewayClassStatus& s,
                               TransitionTimes& times, const std::string& now,
                               const json& current) {
  adopt_condition_times(member(current, "conditions"), "GatewayClass " + s.name, times);
  return json{{"conditions", conditions_json(s.conditions, "GatewayClass " + s.name, times, now)}};
}

json gateway_status_json(const translate::gateway::GatewayStatus& s,
                         const std::vector<std::string>& addresses, TransitionTimes& times,
                         const std::string& now, const json& current) {
  const std::string object = "Gateway " + s.namespace_ + "/" + s.name;
  adopt_condition_times(member(current, "conditions"), object, times);
  const json current_listeners = member(current, "listeners");
  if (current_listeners.is_array()) {
    for (const auto& l : current_listeners) {
      const json name = member(l, "name");
      if (name.is_string()) {
        adopt_condition_times(member(l, "conditions"),
                              object + " listener " + name.get<std::string>(), times);
      }
    }
  }
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

// An entry's controllerName ("" when it has none or a malformed one).
std::string controller_of(const json& entry) {
  const json name = member(entry, "controllerName");
  return name.is_string() ? name.get<std::string>() : std::string();
}

// The entries of `current` (a status list) that another controller wrote.
json foreign_entries(const json& current, const std::string& controller_name) {
  json out = json::array();
  if (current.is_array()) {
    for (const auto& p : current) {
      if (p.is_object() && controller_of(p) != controller_name) out.push_back(p);
    }
  }
  return out;
}

// Our entries of `current` lend their condition times (`ref_key`: "parentRef"/"ancestorRef").
void adopt_entry_times(const json& current, const std::string& controller_name, const char* ref_key,
                       const std::string& object, TransitionTimes& times) {
  if (!current.is_array()) return;
  for (const auto& p : current) {
    if (!p.is_object() || controller_of(p) != controller_name) continue;
    const json ref = member(p, ref_key);
    if (ref.is_object())
      adopt_condition_times(member(p, "conditions"), object + " " + ref.dump(), times);
  }
}

}  // namespace

json policy_ancestors_json(const translate::gateway::BackendTLSPolicyStatus& s, const json& current,
                           const std::string& controller_name, TransitionTimes& times,
                           const std::string& now) {
  json ancestors = foreign_entries(current, controller_name);
  const std::string object = "BackendTLSPolicy " + s.namespace_ + "/" + s.name;
  adopt_entry_times(current, controller_name, "ancestorRef", object, times);
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
  adopt_entry_times(current, controller_name, "parentRef", object, times);
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

namespace {

// The newest generation a list of conditions describes.
int64_t generation_of(const std::vector<Condition>& conditions) {
  int64_t g = 0;
  for (const auto& c : conditions) g = std::max(g, c.observed_generation);
  return g;
}

}  // namespace

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
  for (const auto& [name, s] : report->gateway_classes) {
    write_status(status_path(objects::Kind::kGatewayClass, "", name), "GatewayClass " + name,
                 generation_of(s.conditions), [&](const json& current) {
                   return gateway_class_status_json(s, times_, now, current);
                 });
  }
  // With a Service per Gateway, each Gateway's address is its own Service's, and a Gateway
  // without one (yet) is not programmed; else every Gateway has the published addresses.
  std::optional<std::map<std::string, std::vector<std::string>>> own;
  std::optional<std::vector<std::string>> shared;
  if (services_) {
    own = services_->sync(report->services);
  } else {
    shared = desired_addresses();
  }
  for (const auto& [key, s] : report->gateways) {
    translate::gateway::GatewayStatus status = s;
    std::vector<std::string> addresses;
    if (own) {
      auto it = own->find(key);
      if (it != own->end()) {
        addresses = it->second;
      } else {
        for (auto& c : status.conditions) {
          if (c.type != "Programmed" || c.status != "True") continue;
          c.status = "False";
          c.reason = "AddressNotAssigned";
          c.message = "the Gateway's Service has no address yet";
        }
      }
    } else if (shared) {
      addresses = *shared;
    } else {
      continue;  // the Service could not be read: the last addresses stay
    }
    write_status(status_path(objects::Kind::kGateway, s.namespace_, s.name), "Gateway " + key,
                 generation_of(s.conditions), [&](const json& current) {
                   return gateway_status_json(status, addresses, times_, now, current);
                 });
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
      written_.erase(*it);
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
    int64_t generation = 0;
    for (const auto& a : s.ancestors)
      generation = std::max(generation, generation_of(a.conditions));
    if (write_owned_entries(
            path, "ancestors", "BackendTLSPolicy " + key, generation, [&](const json& current) {
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
    if (write_owned_entries(*it, "ancestors", *it, 0, [&](const json& current) {
          return foreign_entries(current, controller_name_);
        })) {
      written_.erase(*it);
      it = policies_written_.erase(it);
    } else {
      ++it;
    }
  }
}

bool GatewayStatusWriter::write_route_parents(const std::string& path,
                                              const translate::gateway::RouteStatus& s,
                                              const std::string& now) {
  const std::string what =
      s.kind + " " + (s.namespace_.empty() ? s.name : s.namespace_ + "/" + s.name);
  int64_t generation = 0;
  for (const auto& p : s.parents) generation = std::max(generation, generation_of(p.conditions));
  return write_owned_entries(path, "parents", what, generation, [&](const json& current) {
    return route_parents_json(s, current, controller_name_, times_, now);
  });
}

bool GatewayStatusWriter::write_owned_entries(const std::string& path, const std::string& field,
                                              const std::string& what, int64_t generation,
                                              const std::function<json(const json&)>& merged) {
  return write_status(path, what, generation, [&](const json& current) {
    json out = json::object();
    out[field] = merged(member(current, field.c_str()));
    return out;
  });
}

bool GatewayStatusWriter::write_status(const std::string& path, const std::string& what,
                                       int64_t generation,
                                       const std::function<json(const json&)>& desired) {
  // Steady state: what we would write with nothing read is what we wrote last.
  if (auto it = written_.find(path);
      it != written_.end() && it->second == desired(nullptr).dump()) {
    return true;
  }
  const std::string object_path = path.substr(0, path.size() - std::string("/status").size());
  for (int attempt = 0; attempt < 3; ++attempt) {
    kube::Response current = client_.get(object_path);
    if (current.status == 404) {
      written_.erase(path);
      return true;  // gone: nothing to write or clear
    }
    if (current.status != 200) {
      TG_WARN("status",
              "reading " << what << " failed: " << current.status << " " << current.error);
      return false;
    }
    json object;
    std::string resource_version;
    int64_t object_generation = 0;
    try {
      object = json::parse(current.body);
      const json metadata = member(object, "metadata");
      const json rv = member(metadata, "resourceVersion");
      const json gen = member(metadata, "generation");
      if (rv.is_string()) resource_version = rv.get<std::string>();
      if (gen.is_number_integer()) object_generation = gen.get<int64_t>();
    } catch (const json::exception&) {
      TG_WARN("status", "reading " << what << ": not a JSON object");
      return false;
    }
    if (generation > 0 && object_generation > generation) {
      // Changed since the translation our status describes: the next report covers it.
      TG_DEBUG("status", what << " is at generation " << object_generation
                              << ", our status describes " << generation << ": not yet");
      return false;
    }
    json body{{"metadata", {{"resourceVersion", resource_version}}},
              {"status", desired(member(object, "status"))}};
    kube::Response r = client_.send("PATCH", path, body.dump(), "application/merge-patch+json");
    if (r.status == 200) {
      TG_INFO("status", what << " status written");
      written_[path] = desired(nullptr).dump();
      return true;
    }
    written_.erase(path);
    if (r.status == 404) return true;
    if (r.status != 409) {
      TG_WARN("status",
              "writing the status of " << what << " failed: " << r.status << " " << r.error);
      return false;
    }
    // 409 Conflict: written since we read it; read and merge again.
  }
  TG_WARN("status", "writing the status of " << what << ": conflicts three times in a row; later");
  return false;
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
