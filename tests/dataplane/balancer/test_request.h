#pragma once
// A request for balancer tests: headers in a map (names lower case), exposed through
// RequestView's lookup callback.

#include <map>
#include <string>
#include <string_view>

#include "balancer/request_view.h"

namespace tidegate::dataplane::balancer::testing {

struct TestRequest {
  std::string client = "192.0.2.1";
  std::string uri = "/";
  std::map<std::string, std::string, std::less<>> headers;

  RequestView view() const {
    RequestView v;
    v.client = ratelimit::IpAddress::parse(client).value();
    v.uri = uri;
    v.header = [](const void* ctx, std::string_view name) -> std::string_view {
      const auto& h = static_cast<const TestRequest*>(ctx)->headers;
      auto it = h.find(name);
      return it == h.end() ? std::string_view() : std::string_view(it->second);
    };
    v.header_context = this;
    return v;
  }
};

}  // namespace tidegate::dataplane::balancer::testing
