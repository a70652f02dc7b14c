#pragma once
// Request mirroring (model::Mirror, the Gateway API's RequestMirror filter; docs/gateway-api.md,
// "Request mirroring"): a copy of a request, as it goes to the route's backend, sent to a mirror
// upstream on its own connection, its answer read and dropped. Fire and forget: the exchange
// hands the copy over and goes on; the copy lives on its own (it holds the snapshot it was made
// under, so its upstream and balancer stay valid) until its answer has been read or it failed.
// Nothing it does reaches the client. Bounded per worker: Limits::kMaxMirrorsInFlight copies in
// flight, Limits::kMaxMirrorBodyBytes of request body each.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <string>
#include <string_view>

#include "balancer/balancer.h"
#include "runtime/snapshot.h"
#include "upstream/attempt.h"

namespace tidegate::dataplane::server {

class Worker;

// The route's timeouts a mirrored request waits under (connect, between two writes, between
// two reads).
struct MirrorTimeouts {
  std::chrono::milliseconds connect{5'000};
  std::chrono::milliseconds send{60'000};
  std::chrono::milliseconds read{60'000};
};

// Sends a copy of `request` (its head as it goes upstream; `body`, the whole request body) to
// an endpoint of `upstream` of `snapshot`, chosen by the upstream's balancer on this worker.
// Returns false (nothing sent, counted as skipped) when the worker already has
// Limits::kMaxMirrorsInFlight copies in flight or the upstream has no endpoint. Worker thread.
bool send_mirror(Worker& worker, std::shared_ptr<const runtime::Snapshot> snapshot,
                 const runtime::UpstreamState& upstream, const upstream::Attempt::Request& request,
                 std::string_view body, const MirrorTimeouts& timeouts);

}  // namespace tidegate::dataplane::server
