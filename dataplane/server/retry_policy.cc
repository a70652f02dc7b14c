#include "server/retry_policy.h"

namespace tidegate::dataplane::server {

RetryDecision decide_after_failure(const model::NextUpstream& next, unsigned tries,
                                   const RetryState& state, const AttemptFailure& failure) {
  const bool allowed = failure.nothing_sent ? (failure.timed_out ? next.timeout : next.error)
                                            : (!failure.timed_out && next.error &&
                                               (state.idempotent || next.non_idempotent));
  const bool can_retry =
      !state.body_started && state.attempts < tries && ((failure.reused && !next.off()) || allowed);
  if (!can_retry) return RetryDecision::kNone;
  // A stale pooled connection is not the endpoint's fault.
  if (failure.reused) return RetryDecision::kSameEndpoint;
  return state.out_of_time ? RetryDecision::kNone : RetryDecision::kNextEndpoint;
}

bool is_retryable_status(const model::NextUpstream& next, unsigned status) {
  return (status == 502 && next.http_502) || (status == 503 && next.http_503) ||
         (status == 504 && next.http_504);
}

bool may_retry_status(const model::NextUpstream& next, unsigned tries, const RetryState& state) {
  return !state.body_started && !state.out_of_time && state.attempts < tries &&
         (state.idempotent || next.non_idempotent);
}

bool timeout_can_move_on(const model::NextUpstream& next, unsigned tries, unsigned attempts,
                         size_t tried, size_t endpoints) {
  return next.timeout && attempts < tries && tried < endpoints;
}

}  // namespace tidegate::dataplane::server
