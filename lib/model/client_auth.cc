#include "model/client_auth.h"

#include <re2/re2.h>

#include <nlohmann/json.hpp>
#include "model/object_reader.h"

namespace tidegate::model {

using nlohmann::json;

const char* to_string(ClientVerify v) {
  switch (v) {
    case ClientVerify::kOn:
      return "on";
    case ClientVerify::kOptional:
      return "optional";
    case ClientVerify::kOptionalNoCa:
      return "optional_no_ca";
  }
  return "on";
}

std::optional<ClientVerify> client_verify_from_string(std::string_view s) {
  if (s == "on") return ClientVerify::kOn;
  if (s == "optional") return ClientVerify::kOptional;
  if (s == "optional_no_ca") return ClientVerify::kOptionalNoCa;
  return std::nullopt;
}

std::optional<std::string> check_error_page_url(std::string_view url) {
  if (url.empty()) return "is empty";
  if (url.size() > 2048) return "is longer than 2048 bytes";
  for (char c : url) {
    if (c <= ' ' || c >= 0x7f) return "has a space or a character that is not printable ASCII";
  }
  if (url.front() == '/') {
    if (url.size() > 1 && url[1] == '/') return "is a scheme-relative URL (\"//host\")";
    return std::nullopt;
  }
  for (std::string_view scheme : {"http://", "https://"}) {
    if (url.size() > scheme.size() && url.substr(0, scheme.size()) == scheme) return std::nullopt;
  }
  return "must be an http:// or https:// URL or a path starting with /";
}

std::vector<std::string> validate(const ClientAuth& a) {
  std::vector<std::string> problems;
  if (a.ca_pem.size() + a.crl_pem.size() > ClientAuth::kMaxCaBytes) {
    problems.push_back("client_auth CA bundle is larger than 1 MiB");
  }
  if (a.verify_depth < 1 || a.verify_depth > ClientAuth::kMaxVerifyDepth) {
    problems.push_back("client_auth verify_depth out of range (1-16)");
  }
  if (!a.error_page.empty()) {
    if (auto why = check_error_page_url(a.error_page)) {
      problems.push_back("client_auth error_page " + *why);
    }
  }
  if (!a.match_cn.empty()) {
    RE2::Options options;
    options.set_log_errors(false);
    RE2 re(a.match_cn, options);
    if (!re.ok()) problems.push_back("client_auth match_cn: " + re.error());
  }
  return problems;
}

json to_json(const ClientAuth& a) {
  json j{{"verify", to_string(a.verify)}, {"ca_pem", a.ca_pem}, {"secret", a.secret}};
  if (!a.crl_pem.empty()) j["crl_pem"] = a.crl_pem;
  if (a.verify_depth != ClientAuth::kDefaultVerifyDepth) j["verify_depth"] = a.verify_depth;
  if (a.pass_certificate) j["pass_certificate"] = true;
  if (!a.error_page.empty()) j["error_page"] = a.error_page;
  if (!a.match_cn.empty()) j["match_cn"] = a.match_cn;
  return j;
}

ClientAuth client_auth_from_json(const json& j) {
  ClientAuth a;
  detail::ObjectReader r(j, "TLS host client_auth");
  if (const json* v = r.find("verify")) {
    auto verify = v->is_string() ? client_verify_from_string(v->get<std::string>()) : std::nullopt;
    if (!verify) r.fail("verify", "must be on, optional or optional_no_ca");
    a.verify = *verify;
  }
  r.string("ca_pem", a.ca_pem);
  r.string("crl_pem", a.crl_pem);
  r.string("secret", a.secret);
  r.integer("verify_depth", a.verify_depth, ClientAuth::kMaxVerifyDepth);
  r.boolean("pass_certificate", a.pass_certificate);
  r.string("error_page", a.error_page);
  r.string("match_cn", a.match_cn);
  r.finish();
  return a;
}

}  // namespace tidegate::model
