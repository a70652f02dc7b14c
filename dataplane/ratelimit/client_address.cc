#include "ratelimit/client_address.h"

#include "text/text.h"

namespace tidegate::dataplane::ratelimit {

std::optional<IpAddress> parse_forwarded_element(std::string_view e) {
  if (e.empty()) return std::nullopt;
  if (e.front() == '[') {
    auto close = e.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = e.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return std::nullopt;
    return IpAddress::parse(e.substr(1, close - 1));
  }
  auto colon = e.find(':');
  if (colon != std::string_view::npos && e.find(':', colon + 1) == std::string_view::npos) {
    // Exactly one colon: IPv4 with a port.
    return IpAddress::parse(e.substr(0, colon));
  }
  return IpAddress::parse(e);
}

IpAddress resolve_client_address(const IpAddress& peer,
                                 std::span<const std::string_view> x_forwarded_for,
                                 const CidrSet& trusted_proxies) {
  IpAddress client = peer;
  if (!trusted_proxies.contains(client)) return client;
  for (size_t line = x_forwarded_for.size(); line-- > 0;) {
    std::string_view list = x_forwarded_for[line];
    while (!list.empty()) {
      auto comma = list.rfind(',');
      std::string_view element =
          text::trim_ows(comma == std::string_view::npos ? list : list.substr(comma + 1));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(0, comma);
      if (element.empty()) continue;  // "a,,b" or a trailing comma: nothing was added there
      auto address = parse_forwarded_element(element);
      if (!address) return client;
      client = *address;
      if (!trusted_proxies.contains(client)) return client;
    }
  }
  // Every hop was a trusted proxy: the leftmost one is as close to the client as we can get.
  return client;
}

}  // namespace tidegate::dataplane::ratelimit
