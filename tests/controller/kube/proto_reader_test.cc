#include "kube/proto_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "kube/api.h"
#include "kube/json_reader.h"
#include "objects/objects.h"

namespace tidegate::controller::kube {
namespace {

namespace fs = std::filesystem;

// Answers of a real kube-apiserver (v1.36) to the same lists in JSON and in protobuf, written by
// tests/data/kube_lists/capture.py: every field the object parsers read, with its edge cases.
const fs::path kLists = fs::path(TIDEGATE_SOURCE_DIR) / "tests" / "data" / "kube_lists";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Everything in `pb` (the protobuf tree) is in `js` (the JSON tree) with the same type and text:
// the reader builds JSON's shape for the fields it reads (and leaves the others out).
::testing::AssertionResult contained(const objects::Node& pb, const objects::Node& js,
                                     const std::string& at) {
  if (pb.Type() != js.Type()) {
    return ::testing::AssertionFailure() << at << ": type " << static_cast<int>(pb.Type())
                                         << " vs JSON's " << static_cast<int>(js.Type());
  }
  if (pb.IsScalar() && pb.Scalar() != js.Scalar()) {
    return ::testing::AssertionFailure()
           << at << ": \"" << pb.Scalar() << "\" vs JSON's \"" << js.Scalar() << "\"";
  }
  if (pb.IsSequence()) {
    if (pb.size() != js.size()) {
      return ::testing::AssertionFailure()
             << at << ": " << pb.size() << " elements vs JSON's " << js.size();
    }
    for (size_t i = 0; i < pb.size(); ++i) {
      auto r = contained(pb[i], js[i], at + "[" + std::to_string(i) + "]");
      if (!r) return r;
    }
  }
  if (pb.IsMap()) {
    for (const auto& entry : pb) {
      const std::string& key = entry.first.Scalar();
      if (!js[key].IsDefined())
        return ::testing::AssertionFailure() << at << "." << key << ": not in JSON";
      auto r = contained(entry.second, js[key], at + "." + key);
      if (!r) return r;
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename Parse>
void expect_same_objects(const std::string& name, objects::Kind kind, Parse parse) {
  SCOPED_TRACE(name);
  std::string error;
  const auto js = parse_list(read_file(kLists / (name + ".json")), &error);
  ASSERT_TRUE(js) << error;
  const std::string body = read_file(kLists / (name + ".pb"));
  const auto pb = parse_protobuf_list(body, kind, &error);
  ASSERT_TRUE(pb) << error;
  EXPECT_EQ(pb->resource_version, js->resource_version);
  EXPECT_EQ(pb->continue_token.empty(), js->continue_token.empty());
  EXPECT_EQ(peek_protobuf_continue_token(body), pb->continue_token);
  // remainingItemCount (ListMeta field 4): the captured pages say how many items follow.
  EXPECT_EQ(pb->remaining_items, js->remaining_items);
  EXPECT_EQ(pb->remaining_items.has_value(), !pb->continue_token.empty());
  EXPECT_GE(pb->remaining_items.value_or(1), 1u);
  ASSERT_EQ(pb->items.size(), js->items.size());
  ASSERT_FALSE(pb->items.empty());
  for (size_t i = 0; i < pb->items.size(); ++i) {
    EXPECT_TRUE(contained(pb->items[i], js->items[i], "items[" + std::to_string(i) + "]"));
    const auto from_json = parse(js->items[i]);
    const auto from_pb = parse(pb->items[i]);
    ASSERT_TRUE(from_json.ok()) << from_json.error;
    ASSERT_TRUE(from_pb.ok()) << from_pb.error;
    EXPECT_TRUE(*from_pb.value == *from_json.value) << "items[" << i << "] differ";
  }
}

TEST(ProtoReader, IngressesReadAsFromJson) {
  for (const char* name : {"ingresses", "ingresses-page"}) {
    expect_same_objects(name, objects::Kind::kIngress, objects::parse_ingress);
  }
}

TEST(ProtoReader, ServicesReadAsFromJson) {
  for (const char* name : {"services", "services-page"}) {
    expect_same_objects(name, objects::Kind::kService, objects::parse_service);
  }
}

TEST(ProtoReader, EndpointSlicesReadAsFromJson) {
  for (const char* name : {"endpointslices", "endpointslices-page"}) {
    expect_same_objects(name, objects::Kind::kEndpointSlice, objects::parse_endpoint_slice);
  }
}

// The comparison with JSON could pass with both readers wrong the same way: the values, spelled
// out, for the objects capture.py creates.
TEST(ProtoReader, TheCapturedValues) {
  std::string error;
  const auto ing =
      parse_protobuf_list(read_file(kLists / "ingresses.pb"), objects::Kind::kIngress, &error);
  ASSERT_TRUE(ing) << error;
  bool seen_full = false, seen_resource = false;
  for (const auto& item : ing->items) {
    auto r = objects::parse_ingress(item);
    ASSERT_TRUE(r.ok()) << r.error;
    const objects::Ingress& i = *r.value;
    EXPECT_EQ(i.metadata.namespace_, "capture");
    EXPECT_FALSE(i.metadata.uid.empty());
    EXPECT_EQ(i.metadata.generation, 1);
    // RFC 3339 in UTC to the second, as JSON writes it
    ASSERT_EQ(i.metadata.creation_timestamp.size(), 20u) << i.metadata.creation_timestamp;
    EXPECT_EQ(i.metadata.creation_timestamp.substr(0, 3), "202");
    EXPECT_EQ(i.metadata.creation_timestamp.back(), 'Z');
    if (i.metadata.name == "full") {
      seen_full = true;
      EXPECT_EQ(i.metadata.labels.at("tier"), "web");
      EXPECT_EQ(i.metadata.annotations.at("nginx.ingress.kubernetes.io/rewrite-target"), "/$2");
      EXPECT_EQ(i.spec.ingress_class_name, "tidegate");
      ASSERT_TRUE(i.spec.default_backend && i.spec.default_backend->service);
      EXPECT_EQ(i.spec.default_backend->service->port.name, "http");
      EXPECT_FALSE(i.spec.default_backend->service->port.number);
      ASSERT_EQ(i.spec.tls.size(), 2u);
      EXPECT_EQ(i.spec.tls[0].hosts,
                (std::vector<std::string>{"shop.example", "www.shop.example"}));
      EXPECT_EQ(i.spec.tls[0].secret_name, "shop-tls");
      EXPECT_EQ(i.spec.tls[1].secret_name, "");
      ASSERT_EQ(i.spec.rules.size(), 4u);
      ASSERT_EQ(i.spec.rules[0].paths.size(), 3u);
      EXPECT_EQ(i.spec.rules[0].paths[0].backend.service->port.number, 80);
      EXPECT_EQ(i.spec.rules[0].paths[1].path_type, objects::PathType::kExact);
      EXPECT_EQ(i.spec.rules[0].paths[2].path, "/impl(/|$)(.*)");
      EXPECT_EQ(i.spec.rules[0].paths[2].path_type, objects::PathType::kImplementationSpecific);
      EXPECT_EQ(i.spec.rules[1].host, "*.wild.example");
      EXPECT_EQ(i.spec.rules[2].host, "");
      EXPECT_EQ(i.spec.rules[2].paths.size(), 1u);
      EXPECT_EQ(i.spec.rules[3].host, "no-http.example");
      EXPECT_TRUE(i.spec.rules[3].paths.empty());
    } else if (i.metadata.name == "resource-backend") {
      seen_resource = true;
      EXPECT_FALSE(i.spec.ingress_class_name);
      ASSERT_TRUE(i.spec.default_backend);
      EXPECT_EQ(i.spec.default_backend->resource_kind, "StorageBucket");
      EXPECT_EQ(i.spec.rules.at(0).paths.at(0).backend.resource_kind, "Bucket");
    }
  }
  EXPECT_TRUE(seen_full && seen_resource);

  const auto svc =
      parse_protobuf_list(read_file(kLists / "services.pb"), objects::Kind::kService, &error);
  ASSERT_TRUE(svc) << error;
  bool seen_web = false;
  for (const auto& item : svc->items) {
    auto r = objects::parse_service(item);
    ASSERT_TRUE(r.ok()) << r.error;
    if (r.value->metadata.name != "web") continue;
    seen_web = true;
    const auto& ports = r.value->spec.ports;
    ASSERT_EQ(ports.size(), 3u);
    EXPECT_EQ(ports[0].target_port.name, "web-http");
    EXPECT_FALSE(ports[0].target_port.is_number());
    EXPECT_EQ(ports[0].app_protocol, "http");
    EXPECT_EQ(ports[1].target_port.number, 9001);
    EXPECT_EQ(ports[1].app_protocol, "kubernetes.io/h2c");
    EXPECT_EQ(ports[2].protocol, "UDP");
    EXPECT_EQ(ports[2].target_port.number, 53);  // defaulted to the port by the API server
    EXPECT_EQ(r.value->spec.type, "ClusterIP");
  }
  EXPECT_TRUE(seen_web);

  const auto eps = parse_protobuf_list(read_file(kLists / "endpointslices.pb"),
                                       objects::Kind::kEndpointSlice, &error);
  ASSERT_TRUE(eps) << error;
  bool seen_web_1 = false;
  for (const auto& item : eps->items) {
    auto r = objects::parse_endpoint_slice(item);
    ASSERT_TRUE(r.ok()) << r.error;
    if (r.value->metadata.name != "web-1") continue;
    seen_web_1 = true;
    const auto& e = r.value->endpoints;
    ASSERT_EQ(e.size(), 4u);
    EXPECT_EQ(e[0].conditions.ready, true);
    EXPECT_EQ(e[1].conditions.ready, false);  // a false that is set, not an absent one
    EXPECT_EQ(e[1].conditions.terminating, true);
    EXPECT_FALSE(e[2].conditions.ready.has_value());
    ASSERT_EQ(r.value->ports.size(), 3u);
    EXPECT_EQ(r.value->ports[1].name, "");
    EXPECT_EQ(r.value->ports[1].port, 9001);
    EXPECT_EQ(r.value->ports[2].protocol, "UDP");
  }
  EXPECT_TRUE(seen_web_1);
}

TEST(ProtoReader, PagesCarryTheContinueToken) {
  for (auto [name, kind] : {std::pair{"ingresses-page", objects::Kind::kIngress},
                            std::pair{"services-page", objects::Kind::kService},
                            std::pair{"endpointslices-page", objects::Kind::kEndpointSlice}}) {
    std::string error;
    const std::string body = read_file(kLists / (std::string(name) + ".pb"));
    const auto page = parse_protobuf_list(body, kind, &error);
    ASSERT_TRUE(page) << error;
    EXPECT_EQ(page->items.size(), 2u) << name;
    EXPECT_FALSE(page->continue_token.empty()) << name;
    EXPECT_EQ(peek_protobuf_continue_token(body), page->continue_token) << name;
  }
}

// A page read into the page before's document (the reflector's reuse) gives the same objects as
// one read into a new document; while anything still holds the earlier page's nodes, its document
// is left alone and a new one is made.
TEST(ProtoReader, APageReadIntoThePageBeforesDocument) {
  std::string error;
  const std::string services = read_file(kLists / "services.pb");
  const std::string ingresses = read_file(kLists / "ingresses.pb");
  auto fresh = parse_protobuf_list(ingresses, objects::Kind::kIngress, &error);
  ASSERT_TRUE(fresh) << error;

  auto first = parse_protobuf_list(services, objects::Kind::kService, &error);
  ASSERT_TRUE(first) << error;
  ASSERT_TRUE(first->document);
  const objects::Node held = first->items.at(0);  // still in use: its document must stay
  const std::string held_name = held["metadata"]["name"].Scalar();
  const objects::Document* first_document = first->document.get();
  first->items.clear();
  auto second =
      parse_protobuf_list(ingresses, objects::Kind::kIngress, &error, std::move(first->document));
  ASSERT_TRUE(second) << error;
  EXPECT_NE(second->document.get(), first_document);
  EXPECT_EQ(held["metadata"]["name"].Scalar(), held_name);

  // Nothing holds the second page's nodes once they are dropped: the third page reuses it.
  const objects::Document* second_document = second->document.get();
  second->items.clear();
  auto third =
      parse_protobuf_list(ingresses, objects::Kind::kIngress, &error, std::move(second->document));
  ASSERT_TRUE(third) << error;
  EXPECT_EQ(third->document.get(), second_document);
  ASSERT_EQ(third->items.size(), fresh->items.size());
  for (size_t i = 0; i < fresh->items.size(); ++i) {
    const auto a = objects::parse_ingress(fresh->items[i]);
    const auto b = objects::parse_ingress(third->items[i]);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(*a.value == *b.value) << "items[" << i << "] differ";
  }
}

TEST(ProtoReader, MalformedAnswersAreErrors) {
  const std::string body = read_file(kLists / "ingresses.pb");
  std::string error;
  // Every truncation: an error or a shorter list, never a read past the end (ASan) or a throw.
  size_t errors = 0;
  for (size_t n = 0; n < body.size(); ++n) {
    error.clear();
    // Each prefix in a buffer of its own size, so that AddressSanitizer sees a read past it.
    const std::unique_ptr<char[]> prefix(new char[n == 0 ? 1 : n]);
    std::copy_n(body.data(), n, prefix.get());
    const auto page =
        parse_protobuf_list(std::string_view(prefix.get(), n), objects::Kind::kIngress, &error);
    EXPECT_NE(page.has_value(), !error.empty()) << n;
    errors += page ? 0 : 1;
  }
  EXPECT_GT(errors, body.size() / 2);

  EXPECT_FALSE(parse_protobuf_list("{\"items\":[]}", objects::Kind::kIngress, &error));
  EXPECT_NE(error.find("magic"), std::string::npos) << error;
  EXPECT_FALSE(peek_protobuf_continue_token("{\"items\":[]}"));

  // An item whose metadata (field 1) comes as a varint: the field is named.
  const std::string envelope_head("k8s\0", 4);
  auto answer = [&](const std::string& list) {
    // runtime.Unknown{raw (2): list}
    return envelope_head + std::string(1, 0x12) + std::string(1, static_cast<char>(list.size())) +
           list;
  };
  // ListMeta{resourceVersion: "7"}, then an item {metadata: varint 5}
  const std::string list = std::string("\x0a\x03\x12\x01\x37", 5) + "\x12\x02\x08\x05";
  EXPECT_FALSE(parse_protobuf_list(answer(list), objects::Kind::kIngress, &error));
  EXPECT_NE(error.find("metadata"), std::string::npos) << error;
  EXPECT_NE(error.find("wire type"), std::string::npos) << error;

  // A list without a resourceVersion.
  EXPECT_FALSE(
      parse_protobuf_list(answer(std::string("\x12\x00", 2)), objects::Kind::kIngress, &error));
  EXPECT_NE(error.find("resourceVersion"), std::string::npos) << error;

  // A varint that never ends.
  EXPECT_FALSE(
      parse_protobuf_list(answer(std::string(11, '\xff')), objects::Kind::kIngress, &error));
  EXPECT_NE(error.find("varint"), std::string::npos) << error;

  // A kind without a schema.
  EXPECT_FALSE(parse_protobuf_list(body, objects::Kind::kSecret, &error));
  EXPECT_FALSE(has_protobuf_schema(objects::Kind::kSecret));
  EXPECT_TRUE(has_protobuf_schema(objects::Kind::kEndpointSlice));
}

// Protobuf by hand: a varint, and a length-delimited field.
std::string varint(uint64_t v) {
  std::string out;
  do {
    out.push_back(static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
    v >>= 7;
  } while (v != 0);
  return out;
}
std::string bytes_field(uint32_t number, const std::string& payload) {
  return varint(number << 3 | 2) + varint(payload.size()) + payload;
}
std::string varint_field(uint32_t number, uint64_t v) { return varint(number << 3) + varint(v); }
// `k8s\0` + runtime.Unknown{typeMeta: {kind}, raw}
std::string answer(const std::string& kind, const std::string& raw) {
  return std::string("k8s\0", 4) + bytes_field(1, bytes_field(2, kind)) + bytes_field(2, raw);
}

TEST(ProtoReader, TimesAndRepeatedSingularFieldsAsProtobufReadsThem) {
  // metadata {name: "a", namespace: "x", namespace: "ns" (the last wins), creationTimestamp: {}
  // (the zero Time: JSON's null)}; a second item whose creationTimestamp is {seconds: 0}
  // (non-empty: 1970) and a third at 2026-12-06T05:00:00Z.
  auto item = [](const std::string& time) {
    return bytes_field(2, bytes_field(1, bytes_field(1, "a") + bytes_field(3, "x") +
                                             bytes_field(3, "ns") + bytes_field(8, time)));
  };
  const std::string list = bytes_field(1, bytes_field(2, "9")) + item("") +
                           item(varint_field(1, 0)) + item(varint_field(1, 1796533200));
  std::string error;
  const auto page =
      parse_protobuf_list(answer("ServiceList", list), objects::Kind::kService, &error);
  ASSERT_TRUE(page) << error;
  ASSERT_EQ(page->items.size(), 3u);
  const objects::Node meta = page->items[0]["metadata"];
  EXPECT_EQ(meta["namespace"].Scalar(), "ns");
  EXPECT_EQ(meta.size(), 3u);  // name, namespace, creationTimestamp: one entry each
  EXPECT_TRUE(meta["creationTimestamp"].IsNull());
  EXPECT_EQ(page->items[1]["metadata"]["creationTimestamp"].Scalar(), "1970-01-01T00:00:00Z");
  EXPECT_EQ(page->items[2]["metadata"]["creationTimestamp"].Scalar(), "2026-12-06T05:00:00Z");
}

TEST(ProtoReader, ErrorAnswersInProtobufAreStatuses) {
  // metav1.Status {message (3), reason (4), code (6)}, as a 410 to an expired continue token.
  const std::string status = bytes_field(3, "the provided continue parameter is too old") +
                             bytes_field(4, "Expired") + varint_field(6, 410);
  const auto s = parse_protobuf_status(answer("Status", status));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->code, 410);
  EXPECT_EQ(s->reason, "Expired");
  EXPECT_EQ(s->message, "the provided continue parameter is too old");
  // status_from_body reads it too, and takes the HTTP status when the Status has no code.
  const Status from_body = status_from_body(403, answer("Status", bytes_field(4, "Forbidden")));
  EXPECT_EQ(from_body.code, 403);
  EXPECT_EQ(from_body.reason, "Forbidden");
  // Not a Status, or not protobuf: not read as one (and no binary in the message).
  EXPECT_FALSE(parse_protobuf_status(answer("ServiceList", "")));
  EXPECT_FALSE(parse_protobuf_status(R"({"kind":"Status"})"));
  EXPECT_EQ(status_from_body(500, answer("ServiceList", "")).message,
            "(an answer in protobuf that is not a Status)");
}

TEST(ProtoReader, ContentTypes) {
  EXPECT_TRUE(is_protobuf("application/vnd.kubernetes.protobuf"));
  EXPECT_TRUE(is_protobuf("application/vnd.kubernetes.protobuf;stream=watch"));
  EXPECT_FALSE(is_protobuf("application/json"));
  EXPECT_FALSE(is_protobuf(""));
}

}  // namespace
}  // namespace tidegate::controller::kube
