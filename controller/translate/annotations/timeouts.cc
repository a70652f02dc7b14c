// Timeouts, retries and body size: proxy-connect/read/send-timeout, proxy-next-upstream(-tries),
// proxy-body-size.

#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_timeouts_and_retries() {
  auto& r = route_;
  if (auto d = get_duration("proxy-connect-timeout")) r.connect_timeout = *d;
  if (auto d = get_duration("proxy-read-timeout")) r.read_timeout = *d;
  if (auto d = get_duration("proxy-send-timeout")) r.send_timeout = *d;
  if (auto a = get("proxy-body-size")) {
    auto n = parse_nginx_size(trim(a->value));
    if (!n) {
      invalid(*a, "expected a size such as \"8m\", \"512k\", \"1g\" or \"0\" (unlimited)");
    } else if (*n > RoutePolicy::kMaxBodyBytes) {
      invalid(*a, "larger than 1 TiB (use \"0\" for unlimited)");
    } else if (*n > 0) {
      r.max_body_bytes = *n;
    }
  }
  if (auto a = get("proxy-next-upstream")) {
    model::NextUpstream n{false, false, false, false, false, false};
    std::string why;
    bool off = false;
    size_t words = 0;
    std::string_view v = a->value;
    size_t pos = 0;
    while (why.empty()) {
      while (pos < v.size() && is_space(v[pos])) ++pos;
      if (pos == v.size()) break;
      size_t end = pos;
      while (end < v.size() && !is_space(v[end])) ++end;
      std::string_view word = v.substr(pos, end - pos);
      pos = end;
      ++words;
      if (word == "off") {
        off = true;
      } else if (word == "error") {
        n.error = true;
      } else if (word == "timeout") {
        n.timeout = true;
      } else if (word == "http_502") {
        n.http_502 = true;
      } else if (word == "http_503") {
        n.http_503 = true;
      } else if (word == "http_504") {
        n.http_504 = true;
      } else if (word == "non_idempotent") {
        n.non_idempotent = true;
      } else {
        why = "unsupported condition " + quote(word) +
              " (supported: error, timeout, http_502, http_503, http_504, non_idempotent, off)";
      }
    }
    if (why.empty() && words == 0) why = "empty";
    if (why.empty() && off && words > 1) why = "\"off\" must be alone";
    if (why.empty() && !off && n.off()) {
      why = "non_idempotent needs at least one condition to retry on";
    }
    if (why.empty()) {
      r.next_upstream = n;
    } else {
      invalid(*a, why);
    }
  }
  if (auto n = get_integer("proxy-next-upstream-tries", 1, RoutePolicy::kMaxNextUpstreamTries)) {
    r.next_upstream_tries = static_cast<uint32_t>(*n);
  }
  // "0" is nginx's default: no limit.
  if (auto d = get_duration("proxy-next-upstream-timeout", /*allow_zero=*/true)) {
    r.next_upstream_timeout = *d;
  }
}

}  // namespace tidegate::controller::translate::annotations_detail
