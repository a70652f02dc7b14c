#include "server/retry_policy.h"

#include <gtest/gtest.h>

namespace tidegate::dataplane::server {
namespace {

model::NextUpstream next_of(bool error, bool timeout, bool non_idempotent = false) {
  model::NextUpstream n;
  n.error = error;
  n.timeout = timeout;
  n.non_idempotent = non_idempotent;
  return n;
}

TEST(RetryPolicyTest, AfterFailure) {
  const model::NextUpstream defaults{};
  const model::NextUpstream off = next_of(false, false);
  struct Case {
    const char* name;
    model::NextUpstream next;
    unsigned tries;
    RetryState state;
    AttemptFailure failure;
    RetryDecision want;
  };
  using D = RetryDecision;
  const Case cases[] = {
      {"connect error moves on",
       defaults,
       3,
       {false, false, 1},
       {true, false, false},
       D::kNextEndpoint},
      {"connect timeout moves on",
       defaults,
       3,
       {false, false, 1},
       {true, true, false},
       D::kNextEndpoint},
      {"connect timeout without timeout",
       next_of(true, false),
       3,
       {true, false, 1},
       {true, true, false},
       D::kNone},
      {"connect error without error",
       next_of(false, true),
       3,
       {true, false, 1},
       {true, false, false},
       D::kNone},
      {"tries used up", defaults, 2, {true, false, 2}, {true, false, false}, D::kNone},
      {"proxy-next-upstream-timeout passed",
       defaults,
       3,
       {true, false, 1, true},
       {true, false, false},
       D::kNone},
      {"proxy-next-upstream-timeout passed, stale pooled connection",
       defaults,
       3,
       {true, false, 1, true},
       {false, false, true},
       D::kSameEndpoint},
      {"one try", defaults, 1, {true, false, 1}, {true, false, false}, D::kNone},
      {"body streamed up", defaults, 3, {true, true, 1}, {true, false, false}, D::kNone},
      {"error after send, idempotent",
       defaults,
       3,
       {true, false, 1},
       {false, false, false},
       D::kNextEndpoint},
      {"error after send, POST", defaults, 3, {false, false, 1}, {false, false, false}, D::kNone},
      {"error after send, POST, non_idempotent",
       next_of(true, true, true),
       3,
       {false, false, 1},
       {false, false, false},
       D::kNextEndpoint},
      {"read timeout after send", defaults, 3, {true, false, 1}, {false, true, false}, D::kNone},
      {"stale pooled connection",
       defaults,
       3,
       {false, false, 1},
       {false, false, true},
       D::kSameEndpoint},
      {"stale pooled connection, timeout",
       defaults,
       3,
       {false, false, 1},
       {false, true, true},
       D::kSameEndpoint},
      {"stale pooled connection, off", off, 3, {true, false, 1}, {false, false, true}, D::kNone},
      {"stale pooled connection, body streamed",
       defaults,
       3,
       {true, true, 1},
       {false, false, true},
       D::kNone},
      {"off, connect error", off, 3, {true, false, 1}, {true, false, false}, D::kNone},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(decide_after_failure(c.next, c.tries, c.state, c.failure), c.want) << c.name;
  }
}

TEST(RetryPolicyTest, Statuses) {
  model::NextUpstream n;
  n.http_502 = true;
  n.http_504 = true;
  EXPECT_TRUE(is_retryable_status(n, 502));
  EXPECT_FALSE(is_retryable_status(n, 503));
  EXPECT_TRUE(is_retryable_status(n, 504));
  EXPECT_FALSE(is_retryable_status(n, 500));
  EXPECT_FALSE(is_retryable_status(model::NextUpstream{}, 502));
  struct Case {
    const char* name;
    bool non_idempotent;
    unsigned tries;
    RetryState state;
    bool want;
  };
  const Case cases[] = {
      {"GET, tries left", false, 3, {true, false, 1}, true},
      {"GET, tries used up", false, 3, {true, false, 3}, false},
      {"POST", false, 3, {false, false, 1}, false},
      {"POST, non_idempotent", true, 3, {false, false, 1}, true},
      {"body streamed up", true, 3, {true, true, 1}, false},
      {"proxy-next-upstream-timeout passed", false, 3, {true, false, 1, true}, false},
  };
  for (const auto& c : cases) {
    model::NextUpstream next = n;
    next.non_idempotent = c.non_idempotent;
    EXPECT_EQ(may_retry_status(next, c.tries, c.state), c.want) << c.name;
  }
}

TEST(RetryPolicyTest, TimeoutCanMoveOn) {
  const model::NextUpstream defaults{};
  EXPECT_TRUE(timeout_can_move_on(defaults, 3, 1, 1, 2));
  EXPECT_FALSE(timeout_can_move_on(defaults, 3, 1, 2, 2)) << "every endpoint tried";
  EXPECT_FALSE(timeout_can_move_on(defaults, 3, 3, 3, 5)) << "the last try";
  EXPECT_FALSE(timeout_can_move_on(next_of(true, false), 3, 1, 1, 2)) << "timeout not listed";
}

}  // namespace
}  // namespace tidegate::dataplane::server
