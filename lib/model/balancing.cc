#include "model/balancing.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/policy.h"
#include "model/syntax.h"
#include "text/text.h"

namespace tidegate::model {

using detail::ObjectReader;
using detail::quote;
using nlohmann::json;

namespace {

bool is_hash_name_char(char c) { return detail::is_alnum(c) || c == '_'; }

}  // namespace

const char* to_string(LoadBalance m) {
  switch (m) {
    case LoadBalance::kRoundRobin:
      return "round_robin";
    case LoadBalance::kLeastConn:
      return "least_conn";
    case LoadBalance::kIpHash:
      return "ip_hash";
    case LoadBalance::kEwma:
      return "ewma";
  }
  return "?";
}

std::optional<LoadBalance> load_balance_from_string(std::string_view s) {
  for (auto m : {LoadBalance::kRoundRobin, LoadBalance::kLeastConn, LoadBalance::kIpHash,
                 LoadBalance::kEwma}) {
    if (s == to_string(m)) return m;
  }
  return std::nullopt;
}

const char* to_string(SameSite s) {
  switch (s) {
    case SameSite::kUnset:
      return "";
    case SameSite::kLax:
      return "Lax";
    case SameSite::kStrict:
      return "Strict";
    case SameSite::kNone:
      return "None";
  }
  return "?";
}

std::optional<SameSite> same_site_from_string(std::string_view s) {
  for (auto v : {SameSite::kLax, SameSite::kStrict, SameSite::kNone}) {
    if (text::iequals_ascii(s, to_string(v))) return v;
  }
  return std::nullopt;
}

std::optional<std::string> check_hash_expression(std::string_view text) {
  // The grammar and limits of dataplane/balancer/hash_expression.cc (HashExpression::compile);
  // tests/lib/model/balancing_test.cc checks that both accept and refuse the same texts.
  static constexpr size_t kMaxTextBytes = 1024;
  static constexpr size_t kMaxParts = 32;
  if (text.empty()) return "empty expression";
  if (text.size() > kMaxTextBytes) {
    return "expression longer than " + std::to_string(kMaxTextBytes) + " bytes";
  }
  size_t parts = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] != '$') {
      pos = std::min(text.find('$', pos), text.size());
      ++parts;  // the engine counts literal parts but checks the limit after variables only
      continue;
    }
    {
      const std::string at = " at offset " + std::to_string(pos);
      std::string_view name;
      if (pos + 1 < text.size() && text[pos + 1] == '{') {
        const size_t close = text.find('}', pos + 2);
        if (close == std::string_view::npos) return "\"${\"" + at + " is not closed by '}'";
        name = text.substr(pos + 2, close - pos - 2);
        if (!std::all_of(name.begin(), name.end(), is_hash_name_char)) {
          return "variable name " + quote(name) + at + " may hold only letters, digits and '_'";
        }
        pos = close + 1;
      } else {
        size_t end = pos + 1;
        while (end < text.size() && is_hash_name_char(text[end])) ++end;
        name = text.substr(pos + 1, end - pos - 1);
        pos = end;
      }
      if (name.empty()) {
        return "'$'" + at + " is not followed by a variable name (a literal '$' cannot be written)";
      }
      if (name != "remote_addr" && name != "request_uri") {
        bool known = false;
        for (std::string_view prefix : {"http_", "cookie_", "arg_"}) {
          if (name.substr(0, prefix.size()) == prefix) {
            known = true;
            if (name.size() == prefix.size()) {
              return "variable \"$" + std::string(name) + "\"" + at + " needs a name after the '_'";
            }
          }
        }
        if (!known) {
          return "unknown variable \"$" + std::string(name) + "\"" + at +
                 " (known: $remote_addr, $request_uri, $http_<name>, $cookie_<name>, $arg_<name>)";
        }
      }
    }
    if (++parts > kMaxParts) return "more than " + std::to_string(kMaxParts) + " parts";
  }
  return std::nullopt;
}

std::optional<std::string> check_cookie_domain(std::string_view d) {
  std::string_view name = d;
  if (!name.empty() && name.front() == '.') name.remove_prefix(1);
  if (name.empty() || name.size() > 253) return "must be a DNS name";
  bool label_start = true;
  for (char ch : name) {
    const bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
    if (ch == '.') {
      if (label_start) return "has an empty label";
      label_start = true;
    } else if (alnum || (ch == '-' && !label_start)) {
      label_start = false;
    } else {
      return "must be a lower-case DNS name (letters, digits, '-', '.')";
    }
  }
  if (label_start) return "has an empty label";
  return std::nullopt;
}

std::vector<std::string> validate(const SessionAffinity& a) {
  std::vector<std::string> problems;
  if (!is_token(a.cookie_name)) {
    problems.push_back("affinity cookie name " + quote(a.cookie_name) + " is not a token");
  }
  if (a.max_age_seconds &&
      (*a.max_age_seconds < 0 || *a.max_age_seconds > SessionAffinity::kMaxMaxAgeSeconds)) {
    problems.push_back("affinity max-age " + std::to_string(*a.max_age_seconds) +
                       " is out of range 0-" + std::to_string(SessionAffinity::kMaxMaxAgeSeconds));
  }
  if (!a.path.empty()) {
    if (auto why = check_path(a.path)) {
      problems.push_back("affinity cookie path " + quote(a.path) + ": " + *why);
    }
  }
  if (!a.domain.empty()) {
    if (auto why = check_cookie_domain(a.domain)) {
      problems.push_back("affinity cookie domain " + quote(a.domain) + ": " + *why);
    }
  }
  if (a.expires_seconds &&
      (*a.expires_seconds < 0 || *a.expires_seconds > SessionAffinity::kMaxMaxAgeSeconds)) {
    problems.push_back("affinity expires " + std::to_string(*a.expires_seconds) +
                       " is out of range 0-" + std::to_string(SessionAffinity::kMaxMaxAgeSeconds));
  }
  return problems;
}

json to_json(const SessionAffinity& a) {
  const SessionAffinity da;
  json aj = json::object();
  if (a.cookie_name != da.cookie_name) aj["cookie_name"] = a.cookie_name;
  if (a.max_age_seconds) aj["max_age_seconds"] = *a.max_age_seconds;
  if (!a.path.empty()) aj["path"] = a.path;
  if (a.secure) aj["secure"] = true;
  if (a.same_site != SameSite::kUnset) aj["same_site"] = to_string(a.same_site);
  if (!a.domain.empty()) aj["domain"] = a.domain;
  if (a.expires_seconds) aj["expires_seconds"] = *a.expires_seconds;
  return aj;
}

SessionAffinity session_affinity_from_json(const json& j) {
  SessionAffinity a;
  ObjectReader ar(j, "upstream policy affinity");
  ar.string("cookie_name", a.cookie_name);
  if (const json* age = ar.find("max_age_seconds")) {
    if (!age->is_number_integer()) ar.fail("max_age_seconds", "must be an integer");
    a.max_age_seconds = age->get<int64_t>();
  }
  ar.string("path", a.path);
  ar.boolean("secure", a.secure);
  if (const json* ss = ar.find("same_site")) {
    auto s = ss->is_string() ? same_site_from_string(ss->get<std::string>()) : std::nullopt;
    if (!s) ar.fail("same_site", "must be \"Lax\", \"Strict\" or \"None\"");
    a.same_site = *s;
  }
  ar.string("domain", a.domain);
  if (const json* e = ar.find("expires_seconds")) {
    if (!e->is_number_integer()) ar.fail("expires_seconds", "must be an integer");
    a.expires_seconds = e->get<int64_t>();
  }
  ar.finish();
  return a;
}

void validate_balancing(const UpstreamPolicy& p, std::vector<std::string>& problems) {
  if (!p.hash_by.empty()) {
    if (auto why = check_hash_expression(p.hash_by)) problems.push_back("hash_by: " + *why);
  }
  if (p.affinity) {
    for (auto& problem : validate(*p.affinity)) problems.push_back(std::move(problem));
  }
}

void balancing_to_json(const UpstreamPolicy& p, json& j) {
  const UpstreamPolicy d;
  if (p.load_balance != d.load_balance) j["load_balance"] = to_string(p.load_balance);
  if (!p.hash_by.empty()) j["hash_by"] = p.hash_by;
  if (p.affinity) j["affinity"] = to_json(*p.affinity);
}

void balancing_from_json(ObjectReader& r, UpstreamPolicy& p) {
  if (const json* v = r.find("load_balance")) {
    auto m = v->is_string() ? load_balance_from_string(v->get<std::string>()) : std::nullopt;
    if (!m) r.fail("load_balance", "is not a known method");
    p.load_balance = *m;
  }
  r.string("hash_by", p.hash_by);
  if (const json* v = r.find("affinity")) p.affinity = session_affinity_from_json(*v);
}

}  // namespace tidegate::model
