#pragma once
// Fuzz target: bytes as a Kubernetes protobuf list answer (kube/proto_reader) of each kind it has
// a schema for, then every item through the object parsers, as the reflector does.
//
// Invariants:
//   - nothing throws and nothing is read past the input, whatever the bytes;
//   - a page either parses or has an error, never both;
//   - peek_protobuf_continue_token agrees with the parsed page's continue token;
//   - each item converts to its kind or gives an error naming a field (parse_* never throws).

#include <cstdint>
#include <string>

#include "common.h"
#include "kube/proto_reader.h"
#include "objects/objects.h"

namespace tidegate::fuzz {

inline std::string run_kube_protobuf(const uint8_t* data, size_t size) {
  using namespace tidegate::controller;
  const std::string_view body = as_text(data, size);
  for (const objects::Kind kind :
       {objects::Kind::kIngress, objects::Kind::kService, objects::Kind::kEndpointSlice}) {
    std::string error;
    const auto page = kube::parse_protobuf_list(body, kind, &error);
    TIDEGATE_FUZZ_CHECK(page.has_value() != !error.empty(),
                        "a page and an error, or neither: " << error);
    if (!page) continue;
    const auto token = kube::peek_protobuf_continue_token(body);
    TIDEGATE_FUZZ_CHECK(token.has_value() && *token == page->continue_token,
                        "the peeked continue token differs from the page's");
    for (const auto& item : page->items) {
      std::string item_error;
      bool ok = false;
      switch (kind) {
        case objects::Kind::kIngress: {
          auto r = objects::parse_ingress(item);
          ok = r.ok(), item_error = r.error;
          break;
        }
        case objects::Kind::kService: {
          auto r = objects::parse_service(item);
          ok = r.ok(), item_error = r.error;
          break;
        }
        default: {
          auto r = objects::parse_endpoint_slice(item);
          ok = r.ok(), item_error = r.error;
          break;
        }
      }
      TIDEGATE_FUZZ_CHECK(ok == item_error.empty(), "an object and an error, or neither");
    }
  }
  return {};
}

}  // namespace tidegate::fuzz
