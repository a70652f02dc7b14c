#pragma once
// The Gateway translator's table tests: a case is {name, objects (YAML documents), want routes (one
// line per route, every host, in order), want status lines (each must appear), want diagnostics
// (severity, object, a piece of the message; all of them, in order)}. Every case also checks that
// the Config passes model::validate and that loading the objects in reverse order, or translating
// twice, gives the same Config, diagnostics and status.

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "translate/translate.h"

namespace tidegate::controller::translate::gateway_table {

struct WantDiag {
  Severity severity;
  std::string object;
  std::string piece;
};
inline WantDiag E(std::string object, std::string piece) {
  return {Severity::kError, std::move(object), std::move(piece)};
}
inline WantDiag W(std::string object, std::string piece) {
  return {Severity::kWarning, std::move(object), std::move(piece)};
}

struct Case {
  std::string name;
  std::vector<std::string> objects;
  // "host: Prefix /path [GET] [h:name=value] [h:name~regex] [q:...] -> upstream [policy {...}]";
  // "-> [a*1, *1]" for weighted backends ("" an invalid one), "-> 500" without any.
  std::vector<std::string> routes;
  std::vector<std::string> status = {};  // lines of status_lines() that must appear
  std::vector<WantDiag> diagnostics = {};
  std::function<void(const TranslateResult&)> check = {};
  TranslateOptions options = {};
};

std::vector<std::string> route_lines(const model::Config& config);
std::vector<std::string> status_lines(const gateway::GatewayStatusReport& report);
void run(const Case& c);

// ---- Fixtures (YAML text) ----

std::string gateway_class(const std::string& name = "tidegate",
                          const std::string& controller = "tidegate.io/gateway-controller");
// A Gateway of class `cls` with the listeners given as YAML list items (indented by 2).
std::string gateway(const std::string& name, const std::string& listeners,
                    const std::string& ns = "default", const std::string& cls = "tidegate");
std::string http_listener(const std::string& name, const std::string& extra = "", int port = 80);
// A Service with one TCP port and an EndpointSlice with one ready endpoint 10.0.0.<n>.
std::string service(const std::string& name, int port, const std::string& ns = "default", int n = 1,
                    const std::string& app_protocol = "");
std::string endpoints(const std::string& name, int port, const std::string& ns = "default",
                      int n = 1);
// An HTTPRoute with the spec given as YAML (indented by 2, without "spec:").
std::string http_route(const std::string& name, const std::string& spec,
                       const std::string& ns = "default", const std::string& created = "");
std::string grpc_route(const std::string& name, const std::string& spec,
                       const std::string& ns = "default");
std::string tls_secret(const std::string& name, const std::string& ns = "default");
// A ConfigMap whose ca.crt is a (self-signed) certificate.
std::string ca_config_map(const std::string& name, const std::string& ns = "default");
// A BackendTLSPolicy with the spec given as YAML (indented by 2, without "spec:").
std::string backend_tls_policy(const std::string& name, const std::string& spec,
                               const std::string& created = "");

}  // namespace tidegate::controller::translate::gateway_table
