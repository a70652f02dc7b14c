#include "model/policy.h"

#include "model/object_reader.h"

#include <arpa/inet.h>

#include <re2/re2.h>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace tidegate::model {

using detail::ObjectReader;
using nlohmann::json;

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z'); }

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Printable ASCII without space (what a URL or a path may hold as written in YAML).
bool is_visible(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// A DNS-1123 label or subdomain (Kubernetes object names and namespaces).
bool is_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (label.empty() || label.size() > 63) return false;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-')) return false;
    }
    if (label.front() == '-' || label.back() == '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool is_hash_name_char(char c) { return is_alnum(c) || c == '_'; }

// Strict dotted quad: four decimal parts 0-255, no leading zeros (01 is octal to inet_aton).
bool is_ipv4(std::string_view s) {
  size_t pos = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (pos >= s.size() || s[pos] != '.') return false;
      ++pos;
    }
    size_t start = pos;
    unsigned value = 0;
    while (pos < s.size() && is_digit(s[pos]) && pos - start < 3) {
      value = value * 10 + static_cast<unsigned>(s[pos] - '0');
      ++pos;
    }
    const size_t digits = pos - start;
    if (digits == 0 || value > 255 || (digits > 1 && s[start] == '0')) return false;
  }
  return pos == s.size();
}

// Returns whether `s` is an IPv6 literal and, if so, whether it is IPv4-mapped (::ffff:a.b.c.d).
std::optional<bool> ipv6_mapped(std::string_view s) {
  char buf[64];
  if (s.empty() || s.size() >= sizeof buf) return std::nullopt;
  std::copy(s.begin(), s.end(), buf);
  buf[s.size()] = '\0';
  unsigned char bytes[16];
  if (inet_pton(AF_INET6, buf, bytes) != 1) return std::nullopt;
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::equal(std::begin(kMapped), std::end(kMapped), bytes);
}

bool is_cidr_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Header field value: visible ASCII, obs-text, space and tab; no CR, LF, NUL or other controls.
bool is_field_value(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
  });
}

// Response fields the proxy itself manages; setting them would break framing or the connection.
bool is_reserved_response_header(std::string_view name) {
  static constexpr std::string_view kReserved[] = {
      "connection", "content-length", "keep-alive",        "proxy-connection",
      "te",         "trailer",        "transfer-encoding", "upgrade"};
  const std::string l = lowercase(name);
  return std::find(std::begin(kReserved), std::end(kReserved), l) != std::end(kReserved);
}

// "host" or "host:port"; host a DNS name, an IPv4 address or a bracketed IPv6 address.
bool is_host_port(std::string_view s) {
  std::string_view host = s;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    size_t close = s.find(']');
    if (close == std::string_view::npos) return false;
    if (!ipv6_mapped(s.substr(1, close - 1))) return false;
    if (close + 1 == s.size()) return true;
    if (s[close + 1] != ':') return false;
    port = s.substr(close + 2);
    host = {};
  } else if (size_t colon = s.find(':'); colon != std::string_view::npos) {
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (port.empty()) return false;
  }
  if (!port.empty() || (!s.empty() && s.front() == '[')) {
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), is_digit)) {
      return false;
    }
    unsigned long n = std::stoul(std::string(port));
    if (n == 0 || n > 65535) return false;
  }
  if (s.front() == '[') return true;
  if (host.empty() || host.size() > 253 || host.front() == '.' || host.back() == '.' ||
      host.front() == '-') {
    return false;
  }
  return std::all_of(host.begin(), host.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '.' || c == '_'; });
}

void check_cidrs(const std::vector<std::string>& cidrs, const std::string& what,
                 std::vector<std::string>& problems) {
  if (cidrs.size() > kMaxCidrEntries) {
    problems.push_back(what + ": more than " + std::to_string(kMaxCidrEntries) + " entries");
    return;
  }
  for (size_t i = 0; i < cidrs.size(); ++i) {
    if (auto why = check_cidr(cidrs[i])) {
      problems.push_back(what + " entry " + std::to_string(i + 1) + " " + quote(cidrs[i]) + ": " +
                         *why);
    }
  }
}

constexpr const char* kNextUpstreamWords[] = {"error",    "timeout",  "http_502",
                                              "http_503", "http_504", "non_idempotent"};

bool* next_upstream_flag(NextUpstream& n, std::string_view word) {
  if (word == "error") return &n.error;
  if (word == "timeout") return &n.timeout;
  if (word == "http_502") return &n.http_502;
  if (word == "http_503") return &n.http_503;
  if (word == "http_504") return &n.http_504;
  if (word == "non_idempotent") return &n.non_idempotent;
  return nullptr;
}

}  // namespace

// ---- Enums ----

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
    if (iequals(s, to_string(v))) return v;
  }
  return std::nullopt;
}

const char* to_string(BackendProtocol p) {
  switch (p) {
    case BackendProtocol::kHttp:
      return "HTTP";
    case BackendProtocol::kHttps:
      return "HTTPS";
    case BackendProtocol::kH2c:
      return "H2C";
    case BackendProtocol::kH2:
      return "H2";
  }
  return "?";
}

std::optional<BackendProtocol> backend_protocol_from_string(std::string_view s) {
  if (iequals(s, "HTTP")) return BackendProtocol::kHttp;
  if (iequals(s, "HTTPS")) return BackendProtocol::kHttps;
  if (iequals(s, "H2C")) return BackendProtocol::kH2c;
  if (iequals(s, "H2")) return BackendProtocol::kH2;
  return std::nullopt;
}

std::string NextUpstream::to_string() const {
  std::string out;
  NextUpstream copy = *this;
  for (const char* word : kNextUpstreamWords) {
    if (*next_upstream_flag(copy, word)) {
      if (!out.empty()) out += ' ';
      out += word;
    }
  }
  if (off()) out = non_idempotent ? "off non_idempotent" : "off";
  return out;
}

// ---- Syntax checks ----

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return is_alnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

std::optional<std::string> check_hash_expression(std::string_view text) {
  // The grammar and limits of dataplane/balancer/hash_expression.cc (HashExpression::compile);
  // tests/lib/policy_test.cc checks that both accept and refuse the same texts.
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

std::optional<std::string> check_cidr(std::string_view text) {
  // The rules of dataplane/ratelimit/cidr_set.cc (Cidr::parse), cross-checked by the tests.
  if (text.empty()) return "empty network";
  std::string_view address = text;
  std::optional<unsigned> prefix;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    address = text.substr(0, slash);
    std::string_view digits = text.substr(slash + 1);
    if (digits.empty()) return "missing prefix length after '/'";
    if (digits.size() > 3 || !std::all_of(digits.begin(), digits.end(), is_digit)) {
      return "prefix length " + quote(digits) + " is not a number 0-128";
    }
    if (digits.size() > 1 && digits[0] == '0') {
      return "prefix length " + quote(digits) + " has a leading zero";
    }
    prefix = static_cast<unsigned>(std::stoul(std::string(digits)));
  }
  if (address.find('%') != std::string_view::npos) {
    return quote(address) + " has a zone index, which networks cannot have";
  }
  if (address.find(':') == std::string_view::npos) {
    if (!is_ipv4(address)) return quote(address) + " is not an IPv4 or IPv6 address";
    if (prefix.value_or(32) > 32) {
      return "prefix length " + std::to_string(*prefix) + " is out of range 0-32 for IPv4";
    }
    return std::nullopt;
  }
  if (!ipv6_mapped(address)) return quote(address) + " is not an IPv4 or IPv6 address";
  if (prefix.value_or(128) > 128) {
    return "prefix length " + std::to_string(*prefix) + " is out of range 0-128 for IPv6";
  }
  return std::nullopt;
}

std::optional<std::string> parse_cidr_list(std::string_view text, std::vector<std::string>* out) {
  std::vector<std::string> entries;
  size_t pos = 0;
  bool expect_entry = true;  // at the start and after a comma an entry must follow
  while (true) {
    while (pos < text.size() && is_cidr_space(text[pos])) ++pos;
    if (pos == text.size()) break;
    if (text[pos] == ',') {
      if (expect_entry) return "entry " + std::to_string(entries.size() + 1) + " is empty";
      expect_entry = true;
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && text[end] != ',' && !is_cidr_space(text[end])) ++end;
    std::string_view entry = text.substr(pos, end - pos);
    if (entries.size() == kMaxCidrEntries) {
      return "more than " + std::to_string(kMaxCidrEntries) + " entries";
    }
    if (auto why = check_cidr(entry)) {
      return "entry " + std::to_string(entries.size() + 1) + " " + quote(entry) + ": " + *why;
    }
    entries.emplace_back(entry);
    expect_entry = false;
    pos = end;
  }
  if (entries.empty()) return "no network given";
  if (expect_entry) return "trailing comma after entry " + std::to_string(entries.size());
  if (out) *out = std::move(entries);
  return std::nullopt;
}

std::optional<std::string> check_rewrite_target(std::string_view target) {
  if (target.empty()) return "empty";
  if (target.size() > 4096) return "longer than 4096 bytes";
  if (!is_visible(target)) return "may hold only printable characters without spaces";
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] != '$') continue;
    if (i + 1 >= target.size() || target[i + 1] < '1' || target[i + 1] > '9') {
      return "'$' at offset " + std::to_string(i) +
             " is not followed by a group number 1-9 (no other variables are supported)";
    }
  }
  return std::nullopt;
}

int max_capture_reference(std::string_view target) {
  int max = 0;
  for (size_t i = 0; i + 1 < target.size(); ++i) {
    if (target[i] == '$' && target[i + 1] >= '1' && target[i + 1] <= '9') {
      max = std::max(max, target[i + 1] - '0');
    }
  }
  return max;
}

std::optional<std::string> check_path(std::string_view text) {
  if (text.empty() || text.front() != '/') return "must start with '/'";
  if (text.size() > 4096) return "longer than 4096 bytes";
  if (!is_visible(text) || text.find(';') != std::string_view::npos) {
    return "may hold only printable characters other than spaces and ';'";
  }
  return std::nullopt;
}

std::optional<std::string> check_redirect_url(std::string_view url) {
  const bool absolute = (url.substr(0, 7) == "http://" && url.size() > 7 && url[7] != '/') ||
                        (url.substr(0, 8) == "https://" && url.size() > 8 && url[8] != '/');
  const bool path = !url.empty() && url[0] == '/' && url.substr(0, 2) != "//";
  if (!absolute && !path) return "must be an http:// or https:// URL or a path starting with '/'";
  if (url.size() > 4096) return "longer than 4096 bytes";
  if (!is_visible(url) || url.find_first_of("\"\\<>{}|^`") != std::string_view::npos) {
    return "may not hold spaces, control characters, quotes, backslashes or <>{}|^`";
  }
  return std::nullopt;
}

std::optional<std::string> check_response_header(std::string_view name, std::string_view value) {
  if (!is_token(name)) return "header name " + quote(name) + " is not a token";
  if (is_reserved_response_header(name)) {
    return "header " + std::string(name) + " is managed by the proxy and cannot be set";
  }
  if (!is_field_value(value)) {
    return "the value of " + std::string(name) + " holds a control character";
  }
  if (value.size() > 4096)
    return "the value of " + std::string(name) + " is longer than 4096 bytes";
  return std::nullopt;
}

std::optional<std::string> check_upgrade_protocol(std::string_view text) {
  auto slash = text.find('/');
  auto name = text.substr(0, slash);
  if (!is_token(name) || (slash != std::string_view::npos && !is_token(text.substr(slash + 1)))) {
    return "must be a protocol name, optionally with /version (tokens)";
  }
  for (char c : text) {
    if (c >= 'A' && c <= 'Z') return "must be lower case";
  }
  if (name == "h2c") return "h2c is never forwarded (it would tunnel past the route's policies)";
  if (name == "websocket") return "websocket upgrades are always forwarded";
  return std::nullopt;
}

std::optional<std::string> check_host_port(std::string_view text) {
  if (!is_host_port(text)) return "must be host or host:port";
  return std::nullopt;
}

std::optional<std::string> check_tls_server_name(std::string_view text) {
  if (is_ipv4(text) || ipv6_mapped(text).has_value()) return std::nullopt;
  // A DNS name: letters may be upper case in DNS, but certificates are matched without case and
  // one spelling keeps upstream identities comparable.
  if (!is_dns_subdomain(text))
    return "must be a lower-case DNS name (no wildcard) or an IP address";
  return std::nullopt;
}

std::optional<std::string> check_object_ref(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return "must be \"namespace/name\"";
  if (!is_dns_subdomain(text.substr(0, slash))) return "the namespace is not a valid name";
  if (!is_dns_subdomain(text.substr(slash + 1))) return "the name is not a valid object name";
  return std::nullopt;
}

// ---- Validation ----

std::vector<std::string> validate(const UpstreamPolicy& p) {
  std::vector<std::string> problems;
  if (!p.hash_by.empty()) {
    if (auto why = check_hash_expression(p.hash_by)) problems.push_back("hash_by: " + *why);
  }
  if (p.affinity) {
    const SessionAffinity& a = *p.affinity;
    if (!is_token(a.cookie_name)) {
      problems.push_back("affinity cookie name " + quote(a.cookie_name) + " is not a token");
    }
    if (a.max_age_seconds &&
        (*a.max_age_seconds < 0 || *a.max_age_seconds > SessionAffinity::kMaxMaxAgeSeconds)) {
      problems.push_back("affinity max-age " + std::to_string(*a.max_age_seconds) +
                         " is out of range 0-" +
                         std::to_string(SessionAffinity::kMaxMaxAgeSeconds));
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
                         " is out of range 0-" +
                         std::to_string(SessionAffinity::kMaxMaxAgeSeconds));
    }
  }
  if (!p.tls_secret.empty()) {
    if (auto why = check_object_ref(p.tls_secret)) {
      problems.push_back("tls_secret " + quote(p.tls_secret) + ": " + *why);
    }
    if (!uses_tls(p.protocol)) {
      problems.push_back("tls_secret is set but the backend protocol has no TLS");
    }
  }
  if (!p.tls_server_name.empty()) {
    if (auto why = check_tls_server_name(p.tls_server_name)) {
      problems.push_back("tls_server_name " + quote(p.tls_server_name) + ": " + *why);
    }
    if (!uses_tls(p.protocol)) {
      problems.push_back("tls_server_name is set but the backend protocol has no TLS");
    }
  }
  return problems;
}

std::string hsts_value(const Hsts& h) {
  std::string v = "max-age=" + std::to_string(h.max_age_seconds);
  if (h.include_subdomains) v += "; includeSubDomains";
  if (h.preload) v += "; preload";
  return v;
}

std::vector<std::string> validate(const RoutePolicy& p) {
  std::vector<std::string> problems;
  auto check_timeout = [&](const char* name, std::chrono::milliseconds t) {
    if (t.count() < 1 || t > RoutePolicy::kMaxTimeout) {
      problems.push_back(std::string(name) + " " + std::to_string(t.count()) +
                         " ms is out of range 1 ms-24 h");
    }
  };
  check_timeout("connect_timeout", p.connect_timeout);
  check_timeout("read_timeout", p.read_timeout);
  check_timeout("send_timeout", p.send_timeout);
  if (p.max_body_bytes &&
      (*p.max_body_bytes == 0 || *p.max_body_bytes > RoutePolicy::kMaxBodyBytes)) {
    problems.push_back("max_body_bytes " + std::to_string(*p.max_body_bytes) +
                       " is out of range 1-" + std::to_string(RoutePolicy::kMaxBodyBytes));
  }
  if (p.next_upstream_tries < 1 || p.next_upstream_tries > RoutePolicy::kMaxNextUpstreamTries) {
    problems.push_back("next_upstream_tries " + std::to_string(p.next_upstream_tries) +
                       " is out of range 1-" + std::to_string(RoutePolicy::kMaxNextUpstreamTries));
  }
  if (p.next_upstream_timeout.count() < 0 || p.next_upstream_timeout > RoutePolicy::kMaxTimeout) {
    problems.push_back("next_upstream_timeout " + std::to_string(p.next_upstream_timeout.count()) +
                       " ms is out of range");
  }
  if (!p.rewrite_target.empty()) {
    if (auto why = check_rewrite_target(p.rewrite_target)) {
      problems.push_back("rewrite_target " + quote(p.rewrite_target) + ": " + *why);
    }
  }
  if (!p.app_root.empty()) {
    if (auto why = check_path(p.app_root)) {
      problems.push_back("app_root " + quote(p.app_root) + ": " + *why);
    }
  }
  if (p.redirect) {
    if (auto why = check_redirect_url(p.redirect->url)) {
      problems.push_back("redirect url " + quote(p.redirect->url) + ": " + *why);
    }
    if (std::find(std::begin(kRedirectCodes), std::end(kRedirectCodes), p.redirect->code) ==
        std::end(kRedirectCodes)) {
      problems.push_back("redirect code " + std::to_string(p.redirect->code) +
                         " is not one of 301, 302, 303, 307, 308");
    }
  }
  if (p.response_headers.size() > kMaxResponseHeaders) {
    problems.push_back("more than " + std::to_string(kMaxResponseHeaders) + " response headers");
  }
  std::set<std::string> names;
  for (const auto& h : p.response_headers) {
    if (auto why = check_response_header(h.name, h.value)) {
      problems.push_back("response header: " + *why);
    } else if (!names.insert(lowercase(h.name)).second) {
      problems.push_back("response header " + h.name + " is set twice");
    }
  }
  if (!p.forwarded_prefix.empty()) {
    if (auto why = check_path(p.forwarded_prefix)) {
      problems.push_back("forwarded_prefix " + quote(p.forwarded_prefix) + ": " + *why);
    }
  }
  if (!p.upstream_vhost.empty()) {
    if (auto why = check_host_port(p.upstream_vhost)) {
      problems.push_back("upstream_vhost " + quote(p.upstream_vhost) + ": " + *why);
    }
  }
  for (const auto& u : p.upgrade_protocols) {
    if (auto why = check_upgrade_protocol(u)) {
      problems.push_back("upgrade protocol " + quote(u) + ": " + *why);
    }
  }
  if (p.cors) {
    for (auto& problem : validate(*p.cors)) problems.push_back(std::move(problem));
  }
  if (p.external_auth) {
    for (auto& problem : validate(*p.external_auth)) problems.push_back(std::move(problem));
  }
  if (p.basic_auth) {
    for (auto& problem : validate(*p.basic_auth)) problems.push_back(std::move(problem));
  }
  if (p.compression) {
    for (auto& problem : validate(*p.compression)) problems.push_back(std::move(problem));
  }
  if (p.sendfile) {
    for (auto& problem : validate(*p.sendfile)) problems.push_back(std::move(problem));
  }
  if (p.hsts &&
      (p.hsts->max_age_seconds < 0 || p.hsts->max_age_seconds > Hsts::kMaxMaxAgeSeconds)) {
    problems.push_back("hsts max_age " + std::to_string(p.hsts->max_age_seconds) +
                       " is out of range 0-" + std::to_string(Hsts::kMaxMaxAgeSeconds));
  }
  if (p.source_ranges) check_cidrs(p.source_ranges->cidrs, "source range", problems);
  if (p.error_codes.size() > RoutePolicy::kMaxErrorCodes) {
    problems.push_back("more than 64 error codes");
  }
  for (size_t i = 0; i < p.error_codes.size(); ++i) {
    if (p.error_codes[i] < 400 || p.error_codes[i] > 599) {
      problems.push_back("error code " + std::to_string(p.error_codes[i]) + " is not 400-599");
    }
    if (i > 0 && p.error_codes[i] <= p.error_codes[i - 1]) {
      problems.push_back("error codes are not sorted and unique");
    }
  }
  if (p.deny_ranges) {
    if (p.deny_ranges->cidrs.empty()) problems.push_back("deny ranges are empty");
    check_cidrs(p.deny_ranges->cidrs, "deny range", problems);
  }
  const RateLimits& r = p.rate_limits;
  if (r.rps && !(std::isfinite(*r.rps) && *r.rps > 0 && *r.rps <= RateLimits::kMaxRps)) {
    problems.push_back("rps must be greater than 0 and at most 100000");
  }
  if (r.rpm && !(std::isfinite(*r.rpm) && *r.rpm > 0 && *r.rpm <= RateLimits::kMaxRps * 60)) {
    problems.push_back("rpm must be greater than 0 and at most 6000000");
  }
  if (!(std::isfinite(r.burst_multiplier) && r.burst_multiplier >= 1 &&
        r.burst_multiplier <= RateLimits::kMaxBurstMultiplier)) {
    problems.push_back("burst multiplier must be between 1 and 10000");
  } else if (auto why = check_burst_window(r)) {
    problems.push_back(*why);
  }
  if (r.connections && (*r.connections < 1 || *r.connections > RateLimits::kMaxConnections)) {
    problems.push_back("connections " + std::to_string(*r.connections) + " is out of range 1-" +
                       std::to_string(RateLimits::kMaxConnections));
  }
  check_cidrs(r.allowlist, "rate-limit allowlist", problems);
  if (r.status_code != 429 && r.status_code != 503) {
    problems.push_back("rate-limit status code " + std::to_string(r.status_code) +
                       " is not 429 or 503");
  }
  return problems;
}

std::optional<std::string> check_burst_window(const RateLimits& r) {
  if (r.rps && *r.rps > 0 && std::max(1.0, *r.rps * r.burst_multiplier) / *r.rps > 3600) {
    return "a burst of rps × multiplier refills in more than an hour (the engine's limit)";
  }
  if (r.rpm && *r.rpm > 0 && std::max(1.0, *r.rpm * r.burst_multiplier) / (*r.rpm / 60) > 3600) {
    return "a burst of rpm × multiplier refills in more than an hour (the engine's limit)";
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

std::optional<std::string> check_header_pattern(std::string_view pattern) {
  if (pattern.empty()) return "is empty";
  if (pattern.size() > Canary::kMaxHeaderPattern) return "is longer than 1024 bytes";
  RE2::Options options;
  options.set_log_errors(false);
  RE2 re(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re.ok()) return "does not compile: " + re.error();
  return std::nullopt;
}

std::vector<std::string> validate(const Canary& c, bool require_upstream) {
  std::vector<std::string> problems;
  if (require_upstream && c.upstream.empty()) problems.push_back("canary has no upstream");
  if (c.weight_total < 1 || c.weight_total > Canary::kMaxWeightTotal) {
    problems.push_back("canary weight total " + std::to_string(c.weight_total) +
                       " is out of range 1-" + std::to_string(Canary::kMaxWeightTotal));
  } else if (c.weight > c.weight_total) {
    problems.push_back("canary weight " + std::to_string(c.weight) + " exceeds the total " +
                       std::to_string(c.weight_total));
  }
  if (!c.header.empty() && !is_token(c.header)) {
    problems.push_back("canary header " + quote(c.header) + " is not a token");
  }
  if (!c.header_value.empty()) {
    if (c.header.empty()) problems.push_back("canary header value without a header");
    if (!is_field_value(c.header_value) || c.header_value.size() > 4096) {
      problems.push_back("canary header value may not hold control characters");
    }
  }
  if (!c.header_pattern.empty()) {
    if (c.header.empty()) problems.push_back("canary header pattern without a header");
    if (auto why = check_header_pattern(c.header_pattern)) {
      problems.push_back("canary header pattern " + *why);
    }
  }
  if (!c.cookie.empty() && !is_token(c.cookie)) {
    problems.push_back("canary cookie " + quote(c.cookie) + " is not a token");
  }
  return problems;
}

// ---- JSON ----

json to_json(const UpstreamPolicy& p) {
  const UpstreamPolicy d;
  json j = json::object();
  if (p.load_balance != d.load_balance) j["load_balance"] = to_string(p.load_balance);
  if (!p.hash_by.empty()) j["hash_by"] = p.hash_by;
  if (p.affinity) {
    const SessionAffinity& a = *p.affinity;
    const SessionAffinity da;
    json aj = json::object();
    if (a.cookie_name != da.cookie_name) aj["cookie_name"] = a.cookie_name;
    if (a.max_age_seconds) aj["max_age_seconds"] = *a.max_age_seconds;
    if (!a.path.empty()) aj["path"] = a.path;
    if (a.secure) aj["secure"] = true;
    if (a.same_site != SameSite::kUnset) aj["same_site"] = to_string(a.same_site);
    if (!a.domain.empty()) aj["domain"] = a.domain;
    if (a.expires_seconds) aj["expires_seconds"] = *a.expires_seconds;
    j["affinity"] = std::move(aj);
  }
  if (p.protocol != d.protocol) j["protocol"] = to_string(p.protocol);
  if (!p.tls_secret.empty()) j["tls_secret"] = p.tls_secret;
  if (!p.tls_server_name.empty()) j["tls_server_name"] = p.tls_server_name;
  if (p.service_upstream) j["service_upstream"] = true;
  return j;
}

UpstreamPolicy upstream_policy_from_json(const json& j) {
  UpstreamPolicy p;
  ObjectReader r(j, "upstream policy");
  if (const json* v = r.find("load_balance")) {
    auto m = v->is_string() ? load_balance_from_string(v->get<std::string>()) : std::nullopt;
    if (!m) r.fail("load_balance", "is not a known method");
    p.load_balance = *m;
  }
  r.string("hash_by", p.hash_by);
  if (const json* v = r.find("affinity")) {
    SessionAffinity a;
    ObjectReader ar(*v, "upstream policy affinity");
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
    p.affinity = std::move(a);
  }
  if (const json* v = r.find("protocol")) {
    auto proto =
        v->is_string() ? backend_protocol_from_string(v->get<std::string>()) : std::nullopt;
    if (!proto) r.fail("protocol", "must be \"HTTP\", \"HTTPS\", \"H2C\" or \"H2\"");
    p.protocol = *proto;
  }
  r.string("tls_secret", p.tls_secret);
  r.string("tls_server_name", p.tls_server_name);
  r.boolean("service_upstream", p.service_upstream);
  r.finish();
  return p;
}

json to_json(const RoutePolicy& p) {
  const RoutePolicy d;
  json j = json::object();
  if (p.connect_timeout != d.connect_timeout) j["connect_timeout_ms"] = p.connect_timeout.count();
  if (p.read_timeout != d.read_timeout) j["read_timeout_ms"] = p.read_timeout.count();
  if (p.send_timeout != d.send_timeout) j["send_timeout_ms"] = p.send_timeout.count();
  if (p.max_body_bytes) j["max_body_bytes"] = *p.max_body_bytes;
  if (p.next_upstream != d.next_upstream) {
    json words = json::array();
    NextUpstream n = p.next_upstream;
    for (const char* word : kNextUpstreamWords) {
      if (*next_upstream_flag(n, word)) words.push_back(word);
    }
    j["next_upstream"] = std::move(words);
  }
  if (p.next_upstream_tries != d.next_upstream_tries) {
    j["next_upstream_tries"] = p.next_upstream_tries;
  }
  if (p.next_upstream_timeout != d.next_upstream_timeout) {
    j["next_upstream_timeout_ms"] = p.next_upstream_timeout.count();
  }
  if (!p.rewrite_target.empty()) j["rewrite_target"] = p.rewrite_target;
  if (!p.app_root.empty()) j["app_root"] = p.app_root;
  if (p.redirect) j["redirect"] = json{{"url", p.redirect->url}, {"code", p.redirect->code}};
  if (!p.response_headers.empty()) {
    json headers = json::array();
    for (const auto& h : p.response_headers) {
      headers.push_back(json{{"name", h.name}, {"value", h.value}});
    }
    j["response_headers"] = std::move(headers);
  }
  if (!p.upstream_vhost.empty()) j["upstream_vhost"] = p.upstream_vhost;
  if (!p.forwarded_prefix.empty()) j["forwarded_prefix"] = p.forwarded_prefix;
  if (!p.access_log) j["access_log"] = false;
  if (p.cache) j["cache"] = true;
  if (!p.upgrade_protocols.empty()) j["upgrade_protocols"] = p.upgrade_protocols;
  if (p.cors) j["cors"] = to_json(*p.cors);
  if (p.hsts) {
    const Hsts& h = *p.hsts;
    const Hsts dh;
    json hj = json::object();
    if (h.max_age_seconds != dh.max_age_seconds) hj["max_age_seconds"] = h.max_age_seconds;
    if (h.include_subdomains != dh.include_subdomains) {
      hj["include_subdomains"] = h.include_subdomains;
    }
    if (h.preload != dh.preload) hj["preload"] = h.preload;
    j["hsts"] = std::move(hj);
  }
  if (p.source_ranges) j["source_ranges"] = p.source_ranges->cidrs;
  if (p.deny_ranges) j["deny_ranges"] = p.deny_ranges->cidrs;
  if (!p.error_codes.empty()) j["error_codes"] = p.error_codes;
  if (p.basic_auth) j["basic_auth"] = to_json(*p.basic_auth);
  if (p.external_auth) j["external_auth"] = to_json(*p.external_auth);
  if (p.compression) j["compression"] = to_json(*p.compression);
  if (p.sendfile) j["sendfile"] = to_json(*p.sendfile);
  if (p.rate_limits != d.rate_limits) {
    const RateLimits& r = p.rate_limits;
    const RateLimits dr;
    json rj = json::object();
    if (r.rps) rj["rps"] = *r.rps;
    if (r.rpm) rj["rpm"] = *r.rpm;
    if (r.burst_multiplier != dr.burst_multiplier) rj["burst_multiplier"] = r.burst_multiplier;
    if (r.connections) rj["connections"] = *r.connections;
    if (!r.allowlist.empty()) rj["allowlist"] = r.allowlist;
    if (r.status_code != dr.status_code) rj["status_code"] = r.status_code;
    j["rate_limits"] = std::move(rj);
  }
  return j;
}

RoutePolicy route_policy_from_json(const json& j) {
  RoutePolicy p;
  ObjectReader r(j, "route policy");
  auto millis = [&](const char* key, std::chrono::milliseconds& out) {
    int64_t n = out.count();
    r.integer(key, n, static_cast<uint64_t>(INT64_MAX));
    out = std::chrono::milliseconds(n);
  };
  millis("connect_timeout_ms", p.connect_timeout);
  millis("read_timeout_ms", p.read_timeout);
  millis("send_timeout_ms", p.send_timeout);
  r.optional_integer("max_body_bytes", p.max_body_bytes, UINT64_MAX);
  if (const json* v = r.find("next_upstream")) {
    if (!v->is_array()) r.fail("next_upstream", "must be an array");
    NextUpstream n{false, false, false, false, false, false};
    for (const auto& word : *v) {
      bool* flag = word.is_string() ? next_upstream_flag(n, word.get<std::string>()) : nullptr;
      if (!flag) r.fail("next_upstream", "holds an unknown condition");
      *flag = true;
    }
    p.next_upstream = n;
  }
  r.integer("next_upstream_tries", p.next_upstream_tries, UINT32_MAX);
  millis("next_upstream_timeout_ms", p.next_upstream_timeout);
  r.string("rewrite_target", p.rewrite_target);
  r.string("app_root", p.app_root);
  if (const json* v = r.find("redirect")) {
    Redirect redirect;
    ObjectReader rr(*v, "route policy redirect");
    rr.string("url", redirect.url);
    rr.integer("code", redirect.code, 999);
    rr.finish();
    p.redirect = std::move(redirect);
  }
  if (const json* v = r.find("response_headers")) {
    if (!v->is_array()) r.fail("response_headers", "must be an array");
    for (const auto& item : *v) {
      Header h;
      ObjectReader hr(item, "route policy response header");
      hr.string("name", h.name);
      hr.string("value", h.value);
      hr.finish();
      p.response_headers.push_back(std::move(h));
    }
  }
  r.string("upstream_vhost", p.upstream_vhost);
  r.string("forwarded_prefix", p.forwarded_prefix);
  r.boolean("access_log", p.access_log);
  r.boolean("cache", p.cache);
  r.strings("upgrade_protocols", p.upgrade_protocols);
  if (const json* v = r.find("cors")) p.cors = cors_from_json(*v);
  if (const json* v = r.find("hsts")) {
    Hsts h;
    ObjectReader hr(*v, "route policy hsts");
    hr.integer("max_age_seconds", h.max_age_seconds, static_cast<uint64_t>(INT64_MAX));
    hr.boolean("include_subdomains", h.include_subdomains);
    hr.boolean("preload", h.preload);
    hr.finish();
    p.hsts = h;
  }
  if (const json* v = r.find("basic_auth")) p.basic_auth = basic_auth_from_json(*v);
  if (const json* v = r.find("external_auth")) p.external_auth = external_auth_from_json(*v);
  if (const json* v = r.find("compression")) p.compression = compression_from_json(*v);
  if (const json* v = r.find("sendfile")) p.sendfile = sendfile_from_json(*v);
  if (r.find("source_ranges")) {
    SourceRanges ranges;
    r.strings("source_ranges", ranges.cidrs);
    p.source_ranges = std::move(ranges);
  }
  if (const json* v = r.find("error_codes")) {
    if (!v->is_array()) r.fail("error_codes", "must be an array");
    for (const auto& code : *v) {
      if (!code.is_number_unsigned() || code.get<uint64_t>() > 999) {
        r.fail("error_codes", "must hold status codes");
      }
      p.error_codes.push_back(code.get<uint16_t>());
    }
  }
  if (r.find("deny_ranges")) {
    SourceRanges ranges;
    r.strings("deny_ranges", ranges.cidrs);
    p.deny_ranges = std::move(ranges);
  }
  if (const json* v = r.find("rate_limits")) {
    RateLimits& rl = p.rate_limits;
    ObjectReader lr(*v, "route policy rate_limits");
    if (lr.find("rps")) {
      double rps = 0;
      lr.number("rps", rps);
      rl.rps = rps;
    }
    if (lr.find("rpm")) {
      double rpm = 0;
      lr.number("rpm", rpm);
      rl.rpm = rpm;
    }
    lr.number("burst_multiplier", rl.burst_multiplier);
    lr.optional_integer("connections", rl.connections, UINT32_MAX);
    lr.strings("allowlist", rl.allowlist);
    lr.integer("status_code", rl.status_code, 999);
    lr.finish();
  }
  r.finish();
  return p;
}

json to_json(const Canary& c) {
  const Canary d;
  json j = json::object();
  if (!c.upstream.empty()) j["upstream"] = c.upstream;
  if (c.weight != d.weight) j["weight"] = c.weight;
  if (c.weight_total != d.weight_total) j["weight_total"] = c.weight_total;
  if (!c.header.empty()) j["header"] = c.header;
  if (!c.header_value.empty()) j["header_value"] = c.header_value;
  if (!c.header_pattern.empty()) j["header_pattern"] = c.header_pattern;
  if (!c.cookie.empty()) j["cookie"] = c.cookie;
  return j;
}

Canary canary_from_json(const json& j) {
  Canary c;
  ObjectReader r(j, "canary");
  r.string("upstream", c.upstream);
  r.integer("weight", c.weight, UINT32_MAX);
  r.integer("weight_total", c.weight_total, UINT32_MAX);
  r.string("header", c.header);
  r.string("header_value", c.header_value);
  r.string("header_pattern", c.header_pattern);
  r.string("cookie", c.cookie);
  r.finish();
  return c;
}

}  // namespace tidegate::model
