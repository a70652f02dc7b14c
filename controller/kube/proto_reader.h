#pragma once
// The API server's protobuf list answers read into the document tree the object parsers take
// (objects/node.h), for the kinds a start lists by the ten thousand: Ingress, Service and
// EndpointSlice. At 10,000 of each, the API server encodes their JSON pages in about 0.4 s of CPU
// and sends 21 MB; the same lists in protobuf take a fifth of that CPU and half the bytes
// (docs/benchmarks.md, "Start-up at scale"). Watches and every other kind stay JSON
// (kube/json_reader): their events are small, and custom resources have no protobuf encoding.
//
// The answer is `k8s\0` followed by a runtime.Unknown whose `raw` is the list message (ListMeta,
// then the items). Each item is read with a schema of the fields the parsers read (field number,
// JSON name, type), written from k8s.io/api's generated.proto, into the tree that the JSON
// encoding of the same object gives for those fields: the same keys and nesting (IngressRule's
// embedded IngressRuleValue inlined as JSON does), integers and booleans as their decimal and
// true/false text, Time as RFC 3339 in UTC to the second, IntOrString as a number or a string,
// maps as mappings; an empty string or a zero where JSON leaves the field out (`omitempty` on a
// non-pointer field, which protobuf writes anyway) is left out too. Fields outside the schema
// (status, managedFields, ...) are skipped. tests/controller/kube/proto_reader_test.cc checks
// the typed objects read both ways from answers of a real API server (tests/data/kube_lists/).
//
// Malformed input (a truncated varint or length, a wire type a field cannot have, a missing
// magic) gives nullopt and an error naming what was wrong; nothing is read past the body.

#include <optional>
#include <string>
#include <string_view>

#include "kube/api.h"
#include "objects/objects.h"

namespace tidegate::controller::kube {

inline constexpr std::string_view kProtobufMediaType = "application/vnd.kubernetes.protobuf";
// The first bytes of every protobuf answer.
inline constexpr std::string_view kProtobufMagic{"k8s\0", 4};

// Whether lists of `kind` can be read from protobuf (read_protobuf_list has its schema).
bool has_protobuf_schema(objects::Kind kind);

// Whether a response's Content-Type is the protobuf encoding.
bool is_protobuf(std::string_view content_type);

// A list page of `kind` (has_protobuf_schema) in protobuf. Never throws. `reuse`, the page
// before's document, is read into (reset) when nothing else holds it, instead of a new one.
std::optional<ListPage> parse_protobuf_list(std::string_view body, objects::Kind kind,
                                            std::string* error,
                                            std::shared_ptr<objects::Document> reuse = nullptr);

// An error answer in protobuf (a metav1.Status: the API server answers a protobuf request's
// failures, 410 Expired included, in protobuf); nullopt when the body is not one.
std::optional<Status> parse_protobuf_status(std::string_view body);

// The page's metadata.continue ("" on the last page) without reading its items; nullopt when
// the body is not a protobuf list.
std::optional<std::string> peek_protobuf_continue_token(std::string_view body);

}  // namespace tidegate::controller::kube
