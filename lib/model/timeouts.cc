#include "model/timeouts.h"

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/policy.h"

namespace tidegate::model {

using detail::ObjectReader;
using nlohmann::json;

namespace {

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

void validate_timeouts(const RoutePolicy& p, std::vector<std::string>& problems) {
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
  if (p.request_timeout.count() < 0 || p.request_timeout > RoutePolicy::kMaxTimeout) {
    problems.push_back("request_timeout " + std::to_string(p.request_timeout.count()) +
                       " ms is out of range");
  }
}

void timeouts_to_json(const RoutePolicy& p, json& j) {
  const RoutePolicy d;
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
  if (p.request_timeout != d.request_timeout) {
    j["request_timeout_ms"] = p.request_timeout.count();
  }
}

void timeouts_from_json(ObjectReader& r, RoutePolicy& p) {
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
  millis("request_timeout_ms", p.request_timeout);
}

}  // namespace tidegate::model
