#pragma once
// The endpoints of one upstream (a Service port), from the Service's EndpointSlices. Shared by the
// full translation and the endpoint fast path (incremental.h), so that the two cannot disagree.
// Rules: docs/translation.md, "Endpoints".

#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "objects/objects.h"
#include "store/store.h"

namespace tidegate::controller::translate {

// Called for each endpoint that is skipped with a warning: (object, message), e.g.
// ("EndpointSlice default/web-abc", "invalid IPv4 address \"x\"; endpoint ignored").
using EndpointWarning = std::function<void(std::string object, std::string message)>;

// Sorted, unique. Ready endpoints; when none is ready across all the Service's slices, those that
// are serving and terminating.
std::vector<model::Endpoint> endpoints_for(const store::Store& store,
                                           const objects::Service& service,
                                           const objects::ServicePort& port,
                                           const EndpointWarning& warn);

// The Service port an Ingress backend names: by number (`port`) or by name. nullptr when none.
const objects::ServicePort* find_service_port(const objects::Service& service,
                                              const objects::PortRef& ref);

}  // namespace tidegate::controller::translate
