#include "status/gateway_services.h"

#include <cstdio>

#include "kube/api.h"
#include "log/log.h"
#include "status/status_writer.h"

namespace tidegate::controller::status {

using nlohmann::json;

namespace {

constexpr const char* kManagedBy = "app.kubernetes.io/managed-by";
constexpr const char* kControllerLabel = "tidegate.io/gateway-controller";
constexpr const char* kGatewayAnnotation = "tidegate.io/gateway";

uint32_t fnv1a32(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

std::string hex8(uint32_t v) {
  char out[9];
  std::snprintf(out, sizeof out, "%08x", v);
  return out;
}

}  // namespace

std::string gateway_service_name(const std::string& gateway_namespace,
                                 const std::string& gateway_name) {
  std::string stem;
  for (char c : gateway_name) {
    if (stem.size() == 40) break;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    stem += ok ? c : '-';
  }
  while (!stem.empty() && stem.back() == '-') stem.pop_back();
  return "tg-" + (stem.empty() ? std::string("gw") : stem) + "-" +
         hex8(fnv1a32(gateway_namespace + "/" + gateway_name));
}

std::string gateway_controller_label(const std::string& controller_name) {
  return hex8(fnv1a32(controller_name));
}

json gateway_service_json(const translate::gateway::GatewayService& s, const std::string& ns,
                          const std::string& controller_name, const std::string& type,
                          const json& selector, const json& owner) {
  json ports = json::array();
  for (const auto& p : s.ports) {
    ports.push_back(json{
        {"name", p.name}, {"protocol", "TCP"}, {"port", p.port}, {"targetPort", p.target_port}});
  }
  json out{
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata",
       {{"name", gateway_service_name(s.namespace_, s.name)},
        {"namespace", ns},
        {"labels",
         {{kManagedBy, "tidegate"}, {kControllerLabel, gateway_controller_label(controller_name)}}},
        {"annotations", {{kGatewayAnnotation, s.namespace_ + "/" + s.name}}}}},
      {"spec", {{"type", type}, {"selector", selector}, {"ports", std::move(ports)}}}};
  if (!owner.is_null()) out["metadata"]["ownerReferences"] = json::array({owner});
  return out;
}

json service_owner_reference(const json& service) {
  if (!service.is_object() || !service.contains("metadata") || !service["metadata"].is_object()) {
    return nullptr;
  }
  const json& m = service["metadata"];
  const auto name = m.find("name");
  const auto uid = m.find("uid");
  if (name == m.end() || uid == m.end() || !name->is_string() || !uid->is_string() ||
      name->get<std::string>().empty() || uid->get<std::string>().empty()) {
    return nullptr;
  }
  // Not a controller reference and not blocking: the published Service only anchors the
  // garbage collection; deleting it never waits for ours.
  return json{{"apiVersion", "v1"}, {"kind", "Service"}, {"name", *name}, {"uid", *uid}};
}

std::vector<std::string> service_addresses(const json& service) {
  std::vector<std::string> out;
  try {
    const json* lb = nullptr;
    if (service.contains("status") && service["status"].contains("loadBalancer")) {
      lb = &service["status"]["loadBalancer"];
    }
    if (lb != nullptr && lb->contains("ingress") && (*lb)["ingress"].is_array()) {
      for (const auto& e : (*lb)["ingress"]) {
        std::string a = e.value("ip", e.value("hostname", std::string()));
        if (!a.empty() && a.find_first_of("\"\\") == std::string::npos) out.push_back(a);
      }
    }
    if (out.empty() && service.contains("spec")) {
      const std::string ip = service["spec"].value("clusterIP", std::string());
      if (is_ip_address(ip)) out.push_back(ip);
    }
  } catch (const json::exception&) {
    out.clear();
  }
  return out;
}

GatewayServices::GatewayServices(kube::ApiClient& client, std::string publish_service,
                                 std::string controller_name)
    : client_(client),
      namespace_(publish_service.substr(0, publish_service.find('/'))),
      publish_service_(std::move(publish_service)),
      controller_name_(std::move(controller_name)) {}

void GatewayServices::forget() {
  known_.clear();
  cleaned_for_.reset();
}

bool GatewayServices::read_template(std::string* type, json* selector, json* owner) {
  const std::string name = publish_service_.substr(publish_service_.find('/') + 1);
  kube::Response r = client_.get(kube::resource_path(objects::Kind::kService, namespace_, name));
  if (r.status != 200) {
    TG_WARN("status", "Gateway Services: --publish-service " << publish_service_ << ": " << r.status
                                                             << " " << r.error);
    return false;
  }
  try {
    const json service = json::parse(r.body);
    *type = service["spec"].value("type", std::string("ClusterIP"));
    if (*type == "ExternalName") *type = "ClusterIP";
    *selector = service["spec"].value("selector", json::object());
    *owner = service_owner_reference(service);
  } catch (const json::exception&) {
    return false;
  }
  if (selector->empty()) {
    TG_WARN("status", "Gateway Services: --publish-service " << publish_service_
                                                             << " has no selector to copy");
    return false;
  }
  return true;
}

std::map<std::string, std::vector<std::string>> GatewayServices::sync(
    const std::map<std::string, translate::gateway::GatewayService>& services) {
  std::map<std::string, std::vector<std::string>> addresses;
  std::set<std::string> names;
  struct Template {
    std::string type;
    json selector;
    json owner;
  };
  std::optional<Template> tmpl;  // read once, when something must be written
  for (const auto& [key, s] : services) {
    const std::string name = gateway_service_name(s.namespace_, s.name);
    names.insert(name);
    const std::string path = kube::resource_path(objects::Kind::kService, namespace_, name);
    auto known = known_.find(name);
    if (!tmpl) {
      // The template decides the body; without it nothing is written (known ones keep theirs).
      Template t;
      if (read_template(&t.type, &t.selector, &t.owner)) tmpl = std::move(t);
    }
    if (!tmpl) {
      if (known != known_.end()) addresses.emplace(key, known->second.addresses);
      continue;
    }
    const json body = gateway_service_json(s, namespace_, controller_name_, tmpl->type,
                                           tmpl->selector, tmpl->owner);
    const std::string text = body.dump();
    const auto now = std::chrono::steady_clock::now();
    if (known != known_.end() && known->second.body == text && !known->second.load_balancer) {
      if (now >= known->second.settled) addresses.emplace(key, known->second.addresses);
      continue;
    }
    kube::Response r = client_.get(path);
    bool created = false;
    if (r.status == 404) {
      created = true;
      r = client_.send("POST", kube::resource_path(objects::Kind::kService, namespace_, ""), text,
                       "application/json");
      if (r.status == 201 || r.status == 200) {
        TG_INFO("status", "Gateway " << key << ": created Service " << namespace_ << "/" << name);
      }
    } else if (r.status == 200) {
      json current;
      try {
        current = json::parse(r.body);
      } catch (const json::exception&) {
        continue;
      }
      const json& spec = current["spec"];
      const bool same =
          spec.value("type", std::string()) == tmpl->type &&
          spec.value("selector", json::object()) == tmpl->selector &&
          current["metadata"].value("labels", json::object()) == body["metadata"]["labels"] &&
          current["metadata"].value("ownerReferences", json::array()) ==
              body["metadata"].value("ownerReferences", json::array()) &&
          [&] {
            const json& ports = spec.value("ports", json::array());
            if (ports.size() != body["spec"]["ports"].size()) return false;
            for (size_t i = 0; i < ports.size(); ++i) {
              const json& want = body["spec"]["ports"][i];
              if (ports[i].value("name", "") != want["name"] ||
                  ports[i].value("port", 0) != want["port"] ||
                  ports[i].value("targetPort", json()) != want["targetPort"]) {
                return false;
              }
            }
            return true;
          }();
      if (!same) {
        json patch{
            {"metadata",
             {{"labels", body["metadata"]["labels"]},
              {"annotations", body["metadata"]["annotations"]},
              {"ownerReferences", body["metadata"].value("ownerReferences", json::array())}}},
            {"spec", body["spec"]}};
        r = client_.send("PATCH", path, patch.dump(), "application/merge-patch+json");
        if (r.status == 200) {
          TG_INFO("status", "Gateway " << key << ": updated Service " << namespace_ << "/" << name);
        }
      }
    }
    if (r.status != 200 && r.status != 201) {
      TG_WARN("status", "Gateway " << key << ": Service " << namespace_ << "/" << name << ": "
                                   << r.status << " " << r.error << " " << r.body.substr(0, 200));
      known_.erase(name);
      continue;
    }
    Known k;
    k.body = text;
    k.load_balancer = tmpl->type == "LoadBalancer";
    k.settled = created ? now + kSettle : known != known_.end() ? known->second.settled : now;
    try {
      k.addresses = service_addresses(json::parse(r.body));
    } catch (const json::exception&) {
    }
    if (!k.addresses.empty() && now >= k.settled) addresses.emplace(key, k.addresses);
    known_[name] = std::move(k);
  }
  for (auto it = known_.begin(); it != known_.end();) {
    it = names.contains(it->first) ? std::next(it) : known_.erase(it);
  }
  if (!cleaned_for_ || *cleaned_for_ != names) {
    if (delete_others(names)) cleaned_for_ = names;
  }
  return addresses;
}

bool GatewayServices::delete_others(const std::set<std::string>& keep) {
  const std::string selector = std::string(kManagedBy) + "%3Dtidegate%2C" + kControllerLabel +
                               "%3D" + gateway_controller_label(controller_name_);
  kube::Response r = client_.get(kube::resource_path(objects::Kind::kService, namespace_, "") +
                                 "?labelSelector=" + selector);
  if (r.status != 200) {
    TG_WARN("status", "Gateway Services: listing ours failed: " << r.status << " " << r.error);
    return false;
  }
  bool done = true;
  try {
    const json list = json::parse(r.body);
    for (const auto& item : list.value("items", json::array())) {
      const std::string name = item["metadata"].value("name", std::string());
      if (name.empty() || keep.contains(name)) continue;
      kube::Response d =
          client_.send("DELETE", kube::resource_path(objects::Kind::kService, namespace_, name), "",
                       "application/json");
      if (d.status == 200 || d.status == 202 || d.status == 404) {
        TG_INFO("status",
                "deleted Service " << namespace_ << "/" << name << ": no Gateway of ours wants it");
      } else {
        done = false;
      }
    }
  } catch (const json::exception&) {
    return false;
  }
  return done;
}

}  // namespace tidegate::controller::status
