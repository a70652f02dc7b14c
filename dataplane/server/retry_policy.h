#pragma once
// Where the retry is decided (docs/proxy.md, "Retries"): proxy-next-upstream (error, timeout,
// http_502/503/504, non_idempotent) and proxy-next-upstream-tries as pure functions of what the
// exchange knows about the attempt that just ended. The exchange (server/exchange.h) acts on the
// answer: it picks the next endpoint, and forwards the error or the response when none is left.
// Table test: tests/dataplane/server/retry_policy_test.cc.

#include <cstddef>

#include "model/policy.h"

namespace tidegate::dataplane::server {

// An attempt that failed before a response header arrived.
struct AttemptFailure {
  bool nothing_sent = false;  // it failed in connect or the upstream TLS handshake
  bool timed_out = false;     // a timeout rather than an error
  bool reused = false;        // on a pooled connection (which the server may have closed meanwhile)
};

// What the exchange knows about its request when an attempt ends.
struct RetryState {
  bool idempotent = false;    // GET, HEAD, PUT, DELETE, OPTIONS, TRACE
  bool body_started = false;  // request body bytes were read from the client: they cannot be
                              // sent again
  unsigned attempts = 0;      // attempts made, the one that ended included
  // proxy-next-upstream-timeout has passed since the first attempt began: no other endpoint
  // is tried (a stale pooled connection is still replaced: that is not a new attempt).
  bool out_of_time = false;
};

enum class RetryDecision {
  kNone,          // answer with the failure (502/504) or forward the response
  kSameEndpoint,  // a stale pooled connection: the same endpoint on a new connection, not counted
  kNextEndpoint,  // another endpoint this request has not tried, if one is left
};

// After a failure before any response byte. A pooled connection the server closed meanwhile, or
// a connect failure, is safe to retry; any other failure only for idempotent requests (or with
// non_idempotent) whose body we still have. "error" and "timeout" choose which failures move
// on; a read timeout after the request went out is never retried (the backend may still be
// working on it); `tries` bounds the attempts.
RetryDecision decide_after_failure(const model::NextUpstream& next, unsigned tries,
                                   const RetryState& state, const AttemptFailure& failure);

// http_502/503/504: whether this status counts as a failure of the endpoint (passive failure
// marking hears of it even when the response is forwarded).
bool is_retryable_status(const model::NextUpstream& next, unsigned status);

// After a response with a status is_retryable_status() lists: whether it may be discarded and the
// request moved to another endpoint (the same body and idempotency rules as after a failure).
bool may_retry_status(const model::NextUpstream& next, unsigned tries, const RetryState& state);

// Whether a timeout of the attempt being started could still move the request on: "timeout" is
// listed, tries are left and an endpoint is left untried (`tried` counts this attempt's). The
// exchange then gives the connect only Limits::kFailoverConnectTimeout (fast failover).
bool timeout_can_move_on(const model::NextUpstream& next, unsigned tries, unsigned attempts,
                         size_t tried, size_t endpoints);

}  // namespace tidegate::dataplane::server
