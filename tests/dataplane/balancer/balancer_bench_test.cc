// Cost of one pick per method and of one rate-limit check, on one thread. Disabled: a
// measurement, not a test. Run with
//   build/bin/tidegate-unit-tests --gtest_also_run_disabled_tests --gtest_filter='*BalancerBench*'

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "balancer/balancer.h"
#include "ratelimit/rate_limiter.h"
#include "test_request.h"

namespace tidegate::dataplane::balancer {
namespace {

template <class F>
double ns_per_call(int calls, F&& f) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f(i);
  std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  return took.count() / calls;
}

TEST(BalancerBench, DISABLED_PickCost) {
  for (int n : {4, 64}) {
    std::vector<EndpointSpec> eps;
    for (int i = 0; i < n; ++i) eps.push_back({"10.0.0." + std::to_string(i) + ":8080", 1});
    for (auto m : {Method::kRoundRobin, Method::kLeastConn, Method::kIpHash, Method::kEwma,
                   Method::kConsistentHash}) {
      Policy p;
      p.method = m;
      std::string error;
      p.hash_by = HashExpression::compile("$cookie_session", &error);
      auto b = make_balancer(EndpointTable::build(eps, p, &error), 0, nullptr);
      testing::TestRequest r;
      r.headers["cookie"] = "theme=dark; session=8c1f0e2a77d4; lang=en";
      auto view = r.view();
      const TimePoint now = Clock::now();
      uint64_t sink = 0;
      double ns = ns_per_call(1'000'000, [&](int i) {
        view.client = ratelimit::IpAddress::v4(0x0a000000u + static_cast<uint32_t>(i & 4095));
        uint32_t e = b->pick({&view, nullptr, now});
        b->on_start(e);
        b->on_finish(e, std::chrono::milliseconds(1 + (e & 3)), false, now);
        sink += e;
      });
      std::printf("%-16s %3d endpoints: %6.1f ns per pick+start+finish (%llu)\n", to_string(m), n,
                  ns, static_cast<unsigned long long>(sink % 2));
    }
  }
  ratelimit::RateLimitConfig c;
  c.rps = 100;
  ratelimit::RateLimiter limiter(c);
  const auto t0 = ratelimit::Clock::now();
  double ns = ns_per_call(1'000'000, [&](int i) {
    limiter.check(ratelimit::IpAddress::v4(0x0a000000u + static_cast<uint32_t>(i % 10000)),
                  t0 + std::chrono::microseconds(i));
  });
  std::printf("rate limiter, 10,000 clients: %.1f ns per check\n", ns);
}

}  // namespace
}  // namespace tidegate::dataplane::balancer
