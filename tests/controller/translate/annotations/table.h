#pragma once
// The annotation table tests' shared parts: a case is {name, annotations, want policy (as a
// change to the defaults), want diagnostics (severity + a piece of the message, in order)}.
// Each family keeps its cases in tests/controller/translate/annotations/<family>_test.cc (the
// family of controller/translate/annotations/<family>.cc); annotations_test.cc runs the checks
// that need every case (determinism, coverage of every annotation).

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "translate/annotations.h"

namespace tidegate::controller::translate::annotation_table {

using model::Canary;
using model::RoutePolicy;

using Annotations = std::map<std::string, std::string>;

// Keys without a '/' get our prefix.
inline Annotations A(std::initializer_list<std::pair<const std::string, std::string>> items) {
  Annotations out;
  for (const auto& [k, v] : items) {
    out[k.find('/') == std::string::npos ? "tidegate.io/" + k : k] = v;
  }
  return out;
}

struct Want {
  Severity severity;
  std::string text;  // a piece of the message
};
inline Want E(std::string t) { return {Severity::kError, std::move(t)}; }
inline Want W(std::string t) { return {Severity::kWarning, std::move(t)}; }

inline AnnotationContext plain_paths() {
  return {"default", "web", {{"/", false}, {"/api", false}}};
}
inline AnnotationContext regex_paths() {
  return {"default", "web", {{"/api(/|$)(.*)", true}, {"/v([0-9]+)/(.*)", true}}};
}

struct Case {
  std::string name;
  Annotations annotations;
  std::function<void(IngressPolicy&)> want = [](IngressPolicy&) {};
  std::vector<Want> diagnostics = {};
  AnnotationContext context = plain_paths();
  AnnotationOptions options = {};
};

inline std::string dump(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += to_string(d) + "\n";
  return out;
}

inline void run(const Case& c) {
  SCOPED_TRACE(c.name);
  AnnotationResult got = parse_annotations(c.annotations, c.context, c.options);
  IngressPolicy want;
  if (c.want) c.want(want);  // `{}` in a case leaves it empty: no change
  EXPECT_EQ(got.policy.upstream, want.upstream) << model::to_json(*got.policy.upstream).dump();
  EXPECT_EQ(got.policy.route, want.route) << model::to_json(*got.policy.route).dump();
  EXPECT_EQ(got.policy.canary, want.canary);
  EXPECT_EQ(got.policy.client_auth, want.client_auth);
  ASSERT_EQ(got.diagnostics.size(), c.diagnostics.size()) << dump(got.diagnostics);
  for (size_t i = 0; i < c.diagnostics.size(); ++i) {
    const auto& d = got.diagnostics[i];
    EXPECT_EQ(d.object, "Ingress " + c.context.ingress_namespace + "/" + c.context.ingress_name);
    EXPECT_EQ(d.severity, c.diagnostics[i].severity) << d.message;
    EXPECT_NE(d.message.find(c.diagnostics[i].text), std::string::npos)
        << "want \"" << c.diagnostics[i].text << "\" in: " << d.message;
  }
  EXPECT_TRUE(model::validate(*got.policy.route).empty());
  EXPECT_TRUE(model::validate(*got.policy.upstream).empty());
  if (got.policy.canary) {
    EXPECT_TRUE(model::validate(*got.policy.canary, false).empty());
  }
  if (got.policy.client_auth) {
    EXPECT_TRUE(model::validate(*got.policy.client_auth).empty());
  }
}

// Each family's cases (annotations/<family>_test.cc).
std::vector<Case> backend_cases();
std::vector<Case> timeouts_cases();
std::vector<Case> rewrites_cases();
std::vector<Case> headers_cases();
std::vector<Case> access_cases();
std::vector<Case> canary_cases();
std::vector<Case> auth_cases();
std::vector<Case> external_auth_cases();
std::vector<Case> buffering_cases();
std::vector<Case> compression_cases();
std::vector<Case> errors_cases();
std::vector<Case> client_auth_cases();
std::vector<Case> sendfile_cases();
std::vector<Case> cache_cases();
// Every case of every family, and those of annotations_test.cc.
std::vector<Case> all_cases();

}  // namespace tidegate::controller::translate::annotation_table
