#include "balancer/request_view.h"

#include "text/text.h"

namespace tidegate::dataplane::balancer {

std::string_view find_cookie(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    auto semi = header.find(';');
    std::string_view pair = text::trim_ows(header.substr(0, semi));
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    auto eq = pair.find('=');
    if (eq == std::string_view::npos) continue;
    if (text::trim_ows(pair.substr(0, eq)) == name) return text::trim_ows(pair.substr(eq + 1));
  }
  return {};
}

std::string_view find_query_arg(std::string_view uri, std::string_view name) {
  auto q = uri.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view query = uri.substr(q + 1);
  if (auto hash = query.find('#'); hash != std::string_view::npos) query = query.substr(0, hash);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view arg = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    auto eq = arg.find('=');
    if (eq != std::string_view::npos && arg.substr(0, eq) == name) return arg.substr(eq + 1);
  }
  return {};
}

}  // namespace tidegate::dataplane::balancer
