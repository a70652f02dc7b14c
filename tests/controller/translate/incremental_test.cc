// The endpoint fast path must give exactly the Config a full translation gives (and the same set
// of diagnostics). Randomized EndpointSlice changes (conditions, address families, invalid
// addresses, named and numbered ports, slices moving between Services, deletions) are applied to a
// store with several Ingresses, Services and ports; after each batch the incremental result is
// compared with translate() of the same store.

#include "translate/incremental.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "objects/objects.h"
#include "push/pusher.h"
#include "store/store.h"

namespace tidegate::controller::translate {
namespace {

using objects::Kind;

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(int percent) { return static_cast<int>(below(100)) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  std::mt19937 rng_;
};

objects::PortRef number(int n) { return objects::PortRef{n, ""}; }
objects::PortRef named(std::string n) { return objects::PortRef{std::nullopt, std::move(n)}; }

objects::Service service(const std::string& ns, const std::string& name,
                         std::vector<objects::ServicePort> ports, std::string type = "ClusterIP") {
  objects::Service s;
  s.metadata.namespace_ = ns;
  s.metadata.name = name;
  s.spec.type = std::move(type);
  s.spec.ports = std::move(ports);
  return s;
}

objects::HTTPIngressPath path(const std::string& p, const std::string& service,
                              objects::PortRef port) {
  objects::HTTPIngressPath out;
  out.path = p;
  out.path_type = objects::PathType::kPrefix;
  out.backend.service = objects::IngressServiceBackend{service, std::move(port)};
  return out;
}

objects::Ingress ingress(const std::string& ns, const std::string& name, const std::string& host,
                         std::vector<objects::HTTPIngressPath> paths) {
  objects::Ingress in;
  in.metadata.namespace_ = ns;
  in.metadata.name = name;
  in.spec.ingress_class_name = "tidegate";
  in.spec.rules.push_back(objects::IngressRule{host, std::move(paths)});
  return in;
}

// Services: "web" (port 80 "http" -> target 8080, port 81 unnamed -> target "metrics"), "api"
// (port 80 unnamed -> 9000), "ext" (ExternalName), one in namespace b. Ingresses refer to them by
// number and by name, so that one Service has several upstreams.
store::Store base_store() {
  store::Store s;
  s.insert(
      service("a", "web", {{"http", 80, number(8080), "TCP"}, {"", 81, named("metrics"), "TCP"}}));
  s.insert(service("a", "api", {{"", 80, number(9000), "TCP"}}));
  s.insert(service("a", "ext", {{"", 80, number(80), "TCP"}}, "ExternalName"));
  s.insert(service("b", "web", {{"http", 80, number(8080), "TCP"}}));
  s.insert(service("a", "unused", {{"", 80, number(80), "TCP"}}));
  // Policies (issue #6) ride on routes and upstreams; the fast path must keep them, and keep
  // canary upstreams' endpoints current.
  objects::Ingress one = ingress("a", "one", "one.example",
                                 {path("/", "web", number(80)), path("/m", "web", number(81)),
                                  path("/api", "api", number(80))});
  one.metadata.annotations["tidegate.io/load-balance"] = "ewma";
  one.metadata.annotations["tidegate.io/proxy-read-timeout"] = "2m";
  s.insert(std::move(one));
  objects::Ingress canary = ingress("b", "canary", "three.example", {path("/", "web", number(80))});
  canary.metadata.annotations["tidegate.io/canary"] = "true";
  canary.metadata.annotations["tidegate.io/canary-weight"] = "20";
  s.insert(std::move(canary));
  s.insert(ingress("a", "two", "two.example",
                   {path("/", "web", named("http")), path("/ext", "ext", number(80))}));
  s.insert(ingress("b", "three", "three.example", {path("/", "web", named("http"))}));
  // HTTPS upstreams of the same Service ports ("a/web:80+https"): one that gets endpoints, and
  // one whose CA Secret is missing, which must stay empty (fail closed) on the fast path too.
  objects::Ingress https = ingress("a", "four", "four.example", {path("/", "web", number(80))});
  https.metadata.annotations["tidegate.io/backend-protocol"] = "HTTPS";
  s.insert(std::move(https));
  objects::Ingress closed = ingress("a", "five", "five.example", {path("/", "api", number(80))});
  closed.metadata.annotations["tidegate.io/backend-protocol"] = "HTTPS";
  closed.metadata.annotations["tidegate.io/proxy-ssl-secret"] = "missing-ca";
  s.insert(std::move(closed));
  return s;
}

const std::vector<std::pair<std::string, std::string>> kSliceTargets = {
    {"a", "web"}, {"a", "api"}, {"a", "ext"}, {"b", "web"}, {"a", "unused"}, {"a", "missing"}};

objects::EndpointSlice random_slice(Random& r, const std::string& ns, const std::string& name) {
  objects::EndpointSlice s;
  s.metadata.namespace_ = ns;
  s.metadata.name = name;
  std::vector<std::string> services;
  for (const auto& [n, svc] : kSliceTargets) {
    if (n == ns) services.push_back(svc);
  }
  s.metadata.labels[std::string(objects::kServiceNameLabel)] = r.pick(services);
  const size_t family = r.below(10);
  s.address_type = family < 6 ? "IPv4" : family < 9 ? "IPv6" : "FQDN";
  for (size_t i = r.below(4); i > 0; --i) {
    objects::SliceEndpoint e;
    std::string address;
    if (r.chance(8)) {
      address = "not-an-address-" + std::to_string(r.below(2));
    } else if (s.address_type == "IPv6") {
      address = (r.chance(50) ? "FD00::" : "fd00::") + std::to_string(r.below(4) + 1);
    } else if (s.address_type == "IPv4") {
      address = "10.0.0." + std::to_string(r.below(4) + 1);
    } else {
      address = "pod.example";
    }
    e.addresses.push_back(address);
    if (r.chance(20)) e.addresses.push_back("10.9.9.9");
    auto maybe = [&]() -> std::optional<bool> {
      size_t v = r.below(3);
      return v == 0 ? std::nullopt : std::optional<bool>(v == 1);
    };
    e.conditions = {maybe(), maybe(), maybe()};
    s.endpoints.push_back(e);
  }
  for (const auto& [pname, pnum] : std::vector<std::pair<std::string, int>>{
           {"http", 8080}, {"", 9000}, {"metrics", 9100}, {"other", 7000}}) {
    if (!r.chance(50)) continue;
    objects::EndpointPort p;
    p.name = pname;
    if (!r.chance(10)) p.port = pnum + static_cast<int>(r.below(2));
    s.ports.push_back(p);
  }
  return s;
}

std::vector<Diagnostic> sorted(std::vector<Diagnostic> d) {
  std::sort(d.begin(), d.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.object, a.message, a.severity) < std::tie(b.object, b.message, b.severity);
  });
  return d;
}

std::string dump(const model::Config& c) {
  std::string out;
  for (const auto& [name, u] : c.upstreams) {
    out += name + ":";
    for (const auto& e : u.endpoints) out += " " + e.address + ":" + std::to_string(e.port);
    out += "\n";
  }
  return out;
}

void expect_same_as_full(const IncrementalTranslator& inc, const TranslateResult& got,
                         const store::Store& s, const std::string& where) {
  TranslateResult full = translate(s);
  EXPECT_EQ(got.config, full.config) << where << "\nfast path:\n"
                                     << dump(got.config) << "full:\n"
                                     << dump(full.config);
  EXPECT_EQ(sorted(got.diagnostics), sorted(full.diagnostics)) << where;
  // The fast path keeps the full translation's Gateway API status (the controller sets it from
  // the first build after a translation made ahead of the slices).
  EXPECT_EQ(got.gateway_status, full.gateway_status) << where;
}

TEST(IncrementalTranslatorTest, EndpointFastPathEqualsFullTranslationOnRandomChanges) {
  size_t fast = 0, endpoint_changes = 0, upstreams_updated = 0, warnings_seen = 0;
  size_t https_with_endpoints = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    Random r(seed);
    store::Store s = base_store();
    IncrementalTranslator inc;
    EXPECT_EQ(inc.shared_config(), nullptr);
    inc.update(s, s.take_changes());
    ASSERT_EQ(inc.last_path(), UpdatePath::kFull);
    // The shared Config of a full translation is a new object: one held from before is left
    // as it was (the pusher keeps one as the acknowledged configuration).
    const std::shared_ptr<const model::Config> first = inc.shared_config();
    const model::Config first_copy = *first;
    if (seed == 1) {
      inc.update(s, store::Changes{.other = true});
      ASSERT_EQ(inc.last_path(), UpdatePath::kFull);
      EXPECT_NE(inc.shared_config(), first);
      EXPECT_EQ(*first, first_copy);
    }
    const std::shared_ptr<const model::Config> shared = inc.shared_config();
    for (int batch = 0; batch < 40; ++batch) {
      const std::string where = "seed " + std::to_string(seed) + " batch " + std::to_string(batch);
      model::Config before = translate(s).config;
      for (size_t op = r.below(3) + 1; op > 0; --op) {
        const std::string ns = r.chance(75) ? "a" : "b";
        const std::string name = "slice-" + std::to_string(r.below(4));
        if (r.chance(20)) {
          s.remove(Kind::kEndpointSlice, ns, name);
        } else {
          s.insert(random_slice(r, ns, name));
        }
      }
      store::Changes changes = s.take_changes();
      const TranslateResult& got = inc.update(s, changes);
      ASSERT_NE(inc.last_path(), UpdatePath::kFull) << where << ": slices only, no full path";
      if (inc.last_path() == UpdatePath::kEndpoints) ++fast;
      upstreams_updated += inc.last_upstreams_updated();
      if (!(got.config == before)) ++endpoint_changes;
      for (const auto& d : got.diagnostics) warnings_seen += d.object.starts_with("EndpointSlice");
      https_with_endpoints += !got.config.upstreams.at("a/web:80+https").endpoints.empty();
      EXPECT_TRUE(got.config.upstreams.at("a/api:80+https").endpoints.empty()) << where;
      ASSERT_TRUE(got.config.virtual_hosts.at("three.example").routes.at(0).canary) << where;
      EXPECT_TRUE(got.config.upstreams.contains("b/web:80")) << where << ": canary upstream";
      expect_same_as_full(inc, got, s, where);
      // In place, on the shared object, and only its upstreams.
      EXPECT_EQ(inc.shared_config(), shared) << where;
      EXPECT_EQ(&got.config, shared.get()) << where;
      model::Config others = got.config;
      others.upstreams = before.upstreams;
      EXPECT_EQ(others, before) << where;
      // The changed upstreams it reports are exactly those that differ: the pusher's delta made
      // from them alone is the full diff.
      std::vector<std::string> differing;
      for (const auto& u : model::diff(before, got.config).upsert_upstreams)
        differing.push_back(u.name);
      std::vector<std::string> reported = inc.last_changed_upstreams();
      std::sort(reported.begin(), reported.end());
      EXPECT_EQ(reported, differing) << where;
      EXPECT_EQ(push::upstream_delta(before, got.config, inc.last_changed_upstreams()),
                model::diff(before, got.config))
          << where;
      if (HasFailure()) return;
    }
  }
  // The cases were not vacuous: the fast path ran, changed endpoints and produced warnings.
  EXPECT_GT(fast, 1500u);
  EXPECT_GT(endpoint_changes, 800u);
  EXPECT_GT(upstreams_updated, 1500u);
  EXPECT_GT(warnings_seen, 100u);
  EXPECT_GT(https_with_endpoints, 500u);
}

objects::EndpointSlice slice(const std::string& name, const std::string& service,
                             std::vector<objects::SliceEndpoint> endpoints,
                             const std::string& ns = "a") {
  objects::EndpointSlice s;
  s.metadata.namespace_ = ns;
  s.metadata.name = name;
  s.metadata.labels[std::string(objects::kServiceNameLabel)] = service;
  s.address_type = "IPv4";
  s.endpoints = std::move(endpoints);
  s.ports.push_back(objects::EndpointPort{"http", 8080, "TCP"});
  return s;
}

objects::SliceEndpoint ep(std::string address, std::optional<bool> ready = std::nullopt,
                          std::optional<bool> serving = std::nullopt,
                          std::optional<bool> terminating = std::nullopt) {
  return objects::SliceEndpoint{{std::move(address)}, {ready, serving, terminating}};
}

std::vector<model::Endpoint> endpoints_of(const TranslateResult& r, const std::string& upstream) {
  return r.config.upstreams.at(upstream).endpoints;
}

// Steps applied in order; after each one the result must equal a full translation, and take the
// path named.
TEST(IncrementalTranslatorTest, Table) {
  struct Step {
    std::string name;
    std::function<void(store::Store&)> change;
    UpdatePath want_path;
    std::vector<model::Endpoint> want_web;  // a/web:80
  };
  const std::vector<Step> steps = {
      {"first update is full", [](store::Store&) {}, UpdatePath::kFull, {}},
      {"nothing changed", [](store::Store&) {}, UpdatePath::kNone, {}},
      {"a ready endpoint",
       [](store::Store& s) { s.insert(slice("w1", "web", {ep("10.0.0.1")})); },
       UpdatePath::kEndpoints,
       {{"10.0.0.1", 8080}}},
      {"a second slice of the same Service",
       [](store::Store& s) { s.insert(slice("w2", "web", {ep("10.0.0.2", true)})); },
       UpdatePath::kEndpoints,
       {{"10.0.0.1", 8080}, {"10.0.0.2", 8080}}},
      {"not ready: dropped while another is ready",
       [](store::Store& s) { s.insert(slice("w1", "web", {ep("10.0.0.1", false, true, true)})); },
       UpdatePath::kEndpoints,
       {{"10.0.0.2", 8080}}},
      {"the last ready one terminates: serving+terminating ones are used",
       [](store::Store& s) { s.insert(slice("w2", "web", {ep("10.0.0.2", false, true, true)})); },
       UpdatePath::kEndpoints,
       {{"10.0.0.1", 8080}, {"10.0.0.2", 8080}}},
      {"terminating but no longer serving: gone",
       [](store::Store& s) { s.insert(slice("w2", "web", {ep("10.0.0.2", false, false, true)})); },
       UpdatePath::kEndpoints,
       {{"10.0.0.1", 8080}}},
      {"an invalid address: skipped, warned",
       [](store::Store& s) {
         s.insert(slice("w2", "web", {ep("10.0.0.300"), ep("10.0.0.3")}));
       },
       UpdatePath::kEndpoints,
       {{"10.0.0.3", 8080}}},
      {"the slice moves to another Service",
       [](store::Store& s) { s.insert(slice("w2", "api", {ep("10.0.0.3")})); },
       UpdatePath::kEndpoints,
       {{"10.0.0.1", 8080}}},
      {"a slice deleted",
       [](store::Store& s) { s.remove(Kind::kEndpointSlice, "a", "w1"); },
       UpdatePath::kEndpoints,
       {}},
      {"a slice of a Service no Ingress uses: nothing to do",
       [](store::Store& s) { s.insert(slice("u1", "unused", {ep("10.0.0.7")})); },
       UpdatePath::kNone,
       {}},
      {"an Ingress change is a full translation",
       [](store::Store& s) {
         s.insert(slice("w1", "web", {ep("10.0.0.4")}));
         s.insert(ingress("a", "four", "four.example", {path("/", "web", number(80))}));
       },
       UpdatePath::kFull,
       {{"10.0.0.4", 8080}}},
      {"a Service change is a full translation",
       [](store::Store& s) {
         s.insert(service("a", "web", {{"http", 80, number(8081), "TCP"}}));
       },
       UpdatePath::kFull,
       {{"10.0.0.4", 8080}}},
  };
  store::Store s = base_store();
  IncrementalTranslator inc;
  bool warned = false;
  for (const auto& step : steps) {
    SCOPED_TRACE(step.name);
    step.change(s);
    const TranslateResult& got = inc.update(s, s.take_changes());
    EXPECT_EQ(inc.last_path(), step.want_path) << to_string(inc.last_path());
    EXPECT_EQ(endpoints_of(got, "a/web:80"), step.want_web);
    expect_same_as_full(inc, got, s, step.name);
    for (const auto& d : got.diagnostics) {
      warned |=
          d.object == "EndpointSlice a/w2" && d.message.find("10.0.0.300") != std::string::npos;
    }
  }
  EXPECT_TRUE(warned);
}

// The controller's start translates the Ingresses while the EndpointSlices are still being
// listed (controller/main.cc), with some of their pages stored already; the rest of the list then
// comes at once: one fast-path update, whose result is the full translation's.
TEST(IncrementalTranslatorTest, AWholeListOfSlicesAfterTheFirstTranslation) {
  store::Store s = base_store();
  s.insert(slice("web-0", "web", {ep("10.1.0.1"), ep("10.1.9.9", false)}));  // a first page
  IncrementalTranslator inc;
  inc.update(s, s.take_changes());
  ASSERT_EQ(inc.last_path(), UpdatePath::kFull);
  EXPECT_EQ(endpoints_of(inc.update(s, s.take_changes()), "a/web:80"),
            (std::vector<model::Endpoint>{{"10.1.0.1", 8080}}));
  for (const auto& [ns, service] : kSliceTargets) {
    for (int i = ns == "a" && service == "web" ? 1 : 0; i < 3; ++i) {
      s.insert(slice(service + "-" + std::to_string(i), service,
                     {ep("10.1." + std::to_string(i) + ".1"), ep("10.1.9.9", false)}, ns));
    }
  }
  s.insert(slice("web-bad", "web", {ep("10.1.0.300")}));  // a warning, from the fast path
  const TranslateResult& got = inc.update(s, s.take_changes());
  EXPECT_EQ(inc.last_path(), UpdatePath::kEndpoints);
  EXPECT_EQ(
      endpoints_of(got, "a/web:80"),
      (std::vector<model::Endpoint>{{"10.1.0.1", 8080}, {"10.1.1.1", 8080}, {"10.1.2.1", 8080}}));
  EXPECT_TRUE(std::any_of(got.diagnostics.begin(), got.diagnostics.end(),
                          [](const auto& d) { return d.object == "EndpointSlice a/web-bad"; }));
  expect_same_as_full(inc, got, s, "all slices at once");
}

}  // namespace
}  // namespace tidegate::controller::translate
