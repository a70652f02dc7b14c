#pragma once
// The pure half of the Kubernetes API client: where each kind lives, the list and watch URLs, and
// reading list pages and watch events. No I/O here, so the rules are unit-tested without a server.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "objects/objects.h"

namespace tidegate::controller::kube {

struct Resource {
  std::string_view group_version_path;  // "/api/v1" or "/apis/networking.k8s.io/v1"
  std::string_view plural;              // "ingresses"
  bool namespaced = true;
};
Resource resource_of(objects::Kind kind);
// "substitutionrulesets.tidegate.io", "services": the resource as RBAC rules and CRDs name it.
std::string group_resource(objects::Kind kind);

// "/apis/networking.k8s.io/v1/namespaces/NS/ingresses" (no namespace segment when `namespace_` is
// empty or the kind is cluster-scoped), plus "/NAME" when `name` is given.
std::string resource_path(objects::Kind kind, std::string_view namespace_,
                          std::string_view name = {});

// A list page: `limit` items from `continue_token` on (empty for the first page).
std::string list_url(objects::Kind kind, std::string_view namespace_, int limit,
                     std::string_view continue_token);

// A watch from `resource_version`, with bookmarks, ended by the server after `timeout_seconds`.
std::string watch_url(objects::Kind kind, std::string_view namespace_,
                      std::string_view resource_version, int timeout_seconds);

// Percent-encodes everything but RFC 3986 unreserved characters (continue tokens are base64).
std::string query_escape(std::string_view text);

// The fields of a metav1.Status the client acts on (an error response body or an ERROR event).
struct Status {
  int code = 0;
  std::string reason;  // "Expired", "Gone", "NotFound", ...
  std::string message;
};
// nullopt when `node` is not a Status object.
std::optional<Status> status_of(const objects::Node& node);
// From a response body; falls back to the first 200 bytes of the body as the message.
Status status_from_body(int http_status, std::string_view body);

struct ListPage {
  std::vector<objects::Node> items;
  // The items' tree, for parse_protobuf_list to read the next page into once the items are
  // dropped (null for a JSON page).
  std::shared_ptr<objects::Document> document;
  std::string resource_version;
  std::string continue_token;
  // metadata.remainingItemCount: how many items the pages after this one hold, when the server
  // says (a hint for reserving room, never trusted for more).
  std::optional<uint64_t> remaining_items;
};
// Never throws; nullopt and *error on a body that is not a list.
std::optional<ListPage> parse_list(std::string_view body, std::string* error);

enum class EventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  EventType type = EventType::kError;
  objects::Node object;
  std::string resource_version;  // the object's metadata.resourceVersion
  Status status;                 // kError only
};
// One line of a watch stream. Never throws; nullopt and *error on a line that is not an event.
std::optional<WatchEvent> parse_watch_event(std::string_view line, std::string* error);

// Exponential backoff with jitter: each delay is drawn from [d/2, d], d doubling from `min` to
// `max`; reset() after a success. Jitter keeps many controllers (or six watches of one) from
// reconnecting in lockstep after the API server comes back.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, uint32_t seed);
  std::chrono::milliseconds next();
  void reset() { current_ = min_; }

 private:
  std::chrono::milliseconds min_, max_, current_;
  std::mt19937 rng_;
};

}  // namespace tidegate::controller::kube
