#pragma once
// The API server's JSON read into the document tree the object parsers take (objects/node.h).
// YAML::Load reads JSON too, but its scanner is slow and its trees costly to build: at 10,000
// objects per kind, decoding list pages with it was most of the controller's start
// (docs/benchmarks.md, "Start-up at scale"). This reader parses with simdjson (Debian's
// libsimdjson-dev: the whole text validated and parsed by the library's code for this CPU, about
// a gigabyte per second) and copies its tree into nodes, all in one objects::Document: objects
// are mappings, arrays sequences, strings, numbers and booleans scalars (strings unescaped,
// integers in decimal), null a null node.
//
// Differences from YAML::Load followed by a copy into objects::Node, none of which the parsers
// see: a number with a fraction or an exponent reads as its shortest form ("1e3" as "1000",
// "1.50" as "1.5"; no field the parsers read is a fraction); text that is YAML but
// not JSON is refused. A key given twice is kept twice, and lookups find the first, as with
// YAML::Load (the API server never repeats a key).
//
// `skip_managed_fields`: metadata.managedFields of the objects (the root, the root's "object"
// (a watch event) and the elements of the root's "items" (a list)) is left out: server-side apply
// bookkeeping, often half an object's bytes, which nothing here reads.

#include <optional>
#include <string>
#include <string_view>

#include "objects/node.h"

namespace tidegate::controller::kube {

// nullopt and *error on text that is not one JSON value.
std::optional<objects::Node> read_json(std::string_view text, std::string* error,
                                       bool skip_managed_fields = true);

// A list page's metadata.continue ("" on the last page), read from the text before "items" (the
// API server writes metadata first), so that the next page can be asked for while this one is
// decoded. nullopt when the metadata does not come before the items, or the text is not a JSON
// object that far: the caller then waits for the full decoding.
std::optional<std::string> peek_continue_token(std::string_view list_body);

}  // namespace tidegate::controller::kube
