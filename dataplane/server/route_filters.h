#pragma once
// The Gateway API's route filters that edit or answer a request, as pure functions the exchange
// calls (docs/gateway-api.md): the RequestRedirect filter's Location, the URLRewrite filter's
// path, and the header modifiers (RequestHeaderModifier, ResponseHeaderModifier).

#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>

#include "model/headers.h"
#include "model/rewrites.h"

namespace tidegate::dataplane::server {

// The path with the part a Prefix route matched replaced by `value` (the Gateway API's
// ReplacePrefixMatch): `prefix_length` bytes of `path` are the matched prefix (the route's path
// without trailing slashes). "/foo/bar" with "/foo" -> "/xyz": "/xyz/bar"; -> "/": "/bar";
// "/foo" -> "/": "/".
std::string replace_path_prefix(std::string_view path, std::size_t prefix_length,
                                std::string_view value);

// The new path a PathModifier gives `path` (on a route whose matched prefix is `prefix_length`
// bytes).
std::string modify_path(const model::PathModifier& m, std::string_view path,
                        std::size_t prefix_length);

// The Location of a RequestRedirect answer (model/rewrites.h): `https` is the scheme the client
// used, `host` the request's Host value (with its port, if any), `path` and `query` the
// request's (query without '?', empty when none).
std::string redirect_location(const model::RequestRedirect& r, bool https, std::string_view host,
                              std::string_view path, std::string_view query,
                              std::size_t prefix_length);

// Applies a header modifier to a request or response head: removals, then fields set
// (replacing every field of the name), then fields added.
template <bool isRequest, class Fields>
void apply_header_modifier(const model::HeaderModifier& m,
                           boost::beast::http::header<isRequest, Fields>& head) {
  for (const auto& name : m.remove) head.erase(name);
  for (const auto& h : m.set) head.set(h.name, h.value);
  for (const auto& h : m.add) head.insert(h.name, h.value);
}

}  // namespace tidegate::dataplane::server
