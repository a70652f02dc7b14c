#include "kube/proto_reader.h"

#include <cstdint>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <utility>

namespace tidegate::controller::kube {

namespace {

using Data = objects::Document::Data;
using objects::NodeType;

// ---- the schemas: the fields the object parsers read, from k8s.io/api v0.36's generated.proto
// ----

enum class Type : uint8_t {
  kString,
  kInt,          // int32/int64 varint, as its decimal text
  kBool,         // varint, as true/false
  kMessage,      // a nested mapping (`schema`)
  kInline,       // a nested message whose fields JSON writes in the parent's mapping
  kStringMap,    // map<string, string>: entries {1: key, 2: value}
  kTime,         // metav1.Time {1: seconds, 2: nanos}, as RFC 3339 (UTC, seconds)
  kIntOrString,  // intstr.IntOrString {1: type, 2: intVal, 3: strVal}
};

struct Schema;

struct Field {
  uint32_t number;
  const char* name;  // the JSON key
  Type type;
  const Schema* schema = nullptr;  // kMessage, kInline
  bool repeated = false;
  // JSON leaves the field out when it is "" or 0 (a non-pointer `omitempty` field, which protobuf
  // writes even when empty). Pointer fields are written by protobuf only when set: kept as read.
  bool omit_empty = false;
};

struct Schema {
  const Field* fields;
  size_t count;
  const Field* find(uint32_t number) const {
    for (size_t i = 0; i < count; ++i) {
      if (fields[i].number == number) return &fields[i];
    }
    return nullptr;
  }
};

template <size_t N>
constexpr Schema schema_of(const Field (&fields)[N]) {
  return Schema{fields, N};
}

constexpr Field kObjectMetaFields[] = {
    {1, "name", Type::kString, nullptr, false, true},
    {3, "namespace", Type::kString, nullptr, false, true},
    {5, "uid", Type::kString, nullptr, false, true},
    {6, "resourceVersion", Type::kString, nullptr, false, true},
    {7, "generation", Type::kInt, nullptr, false, true},
    {8, "creationTimestamp", Type::kTime},
    {11, "labels", Type::kStringMap},
    {12, "annotations", Type::kStringMap},
};
constexpr Schema kObjectMeta = schema_of(kObjectMetaFields);

// networking.k8s.io/v1 Ingress.
constexpr Field kServiceBackendPortFields[] = {
    {1, "name", Type::kString, nullptr, false, true},
    {2, "number", Type::kInt, nullptr, false, true},
};
constexpr Schema kServiceBackendPort = schema_of(kServiceBackendPortFields);
constexpr Field kIngressServiceBackendFields[] = {
    {1, "name", Type::kString},
    {2, "port", Type::kMessage, &kServiceBackendPort},
};
constexpr Schema kIngressServiceBackend = schema_of(kIngressServiceBackendFields);
constexpr Field kTypedLocalObjectReferenceFields[] = {
    {1, "apiGroup", Type::kString},
    {2, "kind", Type::kString},
    {3, "name", Type::kString},
};
constexpr Schema kTypedLocalObjectReference = schema_of(kTypedLocalObjectReferenceFields);
constexpr Field kIngressBackendFields[] = {
    {3, "resource", Type::kMessage, &kTypedLocalObjectReference},
    {4, "service", Type::kMessage, &kIngressServiceBackend},
};
constexpr Schema kIngressBackend = schema_of(kIngressBackendFields);
constexpr Field kHTTPIngressPathFields[] = {
    {1, "path", Type::kString, nullptr, false, true},
    {2, "backend", Type::kMessage, &kIngressBackend},
    {3, "pathType", Type::kString},
};
constexpr Schema kHTTPIngressPath = schema_of(kHTTPIngressPathFields);
constexpr Field kHTTPIngressRuleValueFields[] = {
    {1, "paths", Type::kMessage, &kHTTPIngressPath, true},
};
constexpr Schema kHTTPIngressRuleValue = schema_of(kHTTPIngressRuleValueFields);
constexpr Field kIngressRuleValueFields[] = {
    {1, "http", Type::kMessage, &kHTTPIngressRuleValue},
};
constexpr Schema kIngressRuleValue = schema_of(kIngressRuleValueFields);
constexpr Field kIngressRuleFields[] = {
    {1, "host", Type::kString, nullptr, false, true},
    {2, "ingressRuleValue", Type::kInline, &kIngressRuleValue},
};
constexpr Schema kIngressRule = schema_of(kIngressRuleFields);
constexpr Field kIngressTLSFields[] = {
    {1, "hosts", Type::kString, nullptr, true},
    {2, "secretName", Type::kString, nullptr, false, true},
};
constexpr Schema kIngressTLS = schema_of(kIngressTLSFields);
constexpr Field kIngressSpecFields[] = {
    {1, "defaultBackend", Type::kMessage, &kIngressBackend},
    {2, "tls", Type::kMessage, &kIngressTLS, true},
    {3, "rules", Type::kMessage, &kIngressRule, true},
    {4, "ingressClassName", Type::kString},
};
constexpr Schema kIngressSpec = schema_of(kIngressSpecFields);
constexpr Field kIngressFields[] = {
    {1, "metadata", Type::kMessage, &kObjectMeta},
    {2, "spec", Type::kMessage, &kIngressSpec},
};
constexpr Schema kIngress = schema_of(kIngressFields);

// v1 Service.
constexpr Field kServicePortFields[] = {
    {1, "name", Type::kString, nullptr, false, true},
    {2, "protocol", Type::kString, nullptr, false, true},
    {3, "port", Type::kInt},
    {4, "targetPort", Type::kIntOrString},
    {6, "appProtocol", Type::kString},
};
constexpr Schema kServicePort = schema_of(kServicePortFields);
constexpr Field kServiceSpecFields[] = {
    {1, "ports", Type::kMessage, &kServicePort, true},
    {3, "clusterIP", Type::kString, nullptr, false, true},
    {4, "type", Type::kString, nullptr, false, true},
};
constexpr Schema kServiceSpec = schema_of(kServiceSpecFields);
constexpr Field kServiceFields[] = {
    {1, "metadata", Type::kMessage, &kObjectMeta},
    {2, "spec", Type::kMessage, &kServiceSpec},
};
constexpr Schema kService = schema_of(kServiceFields);

// discovery.k8s.io/v1 EndpointSlice.
constexpr Field kEndpointConditionsFields[] = {
    {1, "ready", Type::kBool},
    {2, "serving", Type::kBool},
    {3, "terminating", Type::kBool},
};
constexpr Schema kEndpointConditions = schema_of(kEndpointConditionsFields);
constexpr Field kEndpointFields[] = {
    {1, "addresses", Type::kString, nullptr, true},
    {2, "conditions", Type::kMessage, &kEndpointConditions},
};
constexpr Schema kEndpoint = schema_of(kEndpointFields);
constexpr Field kEndpointPortFields[] = {
    {1, "name", Type::kString},
    {2, "protocol", Type::kString},
    {3, "port", Type::kInt},
};
constexpr Schema kEndpointPort = schema_of(kEndpointPortFields);
constexpr Field kEndpointSliceFields[] = {
    {1, "metadata", Type::kMessage, &kObjectMeta},
    {2, "endpoints", Type::kMessage, &kEndpoint, true},
    {3, "ports", Type::kMessage, &kEndpointPort, true},
    {4, "addressType", Type::kString},
};
constexpr Schema kEndpointSlice = schema_of(kEndpointSliceFields);

const Schema* item_schema(objects::Kind kind) {
  switch (kind) {
    case objects::Kind::kIngress:
      return &kIngress;
    case objects::Kind::kService:
      return &kService;
    case objects::Kind::kEndpointSlice:
      return &kEndpointSlice;
    default:
      return nullptr;
  }
}

// ---- the wire format ----

enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads one message's fields in order.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool done() const { return p_ == end_; }

  // The next field's number and wire type; its value is read with varint(), bytes() or skip().
  void tag(uint32_t* number, uint32_t* wire) {
    const uint64_t t = varint();
    *number = static_cast<uint32_t>(t >> 3);
    *wire = static_cast<uint32_t>(t & 7);
    if (*number == 0 || t >> 32 != 0) throw Error{"invalid field tag"};
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) throw Error{"truncated varint"};
      const auto byte = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    throw Error{"varint longer than 10 bytes"};
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_)) throw Error{"length past the end of the message"};
    std::string_view v(p_, n);
    p_ += n;
    return v;
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        advance(8);
        return;
      case kBytes:
        bytes();
        return;
      case kFixed32:
        advance(4);
        return;
      default:
        throw Error{"unsupported wire type " + std::to_string(wire)};
    }
  }

 private:
  void advance(size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) throw Error{"truncated fixed-size field"};
    p_ += n;
  }
  const char* p_;
  const char* end_;
};

void expect_wire(const Field& f, uint32_t wire, uint32_t want) {
  if (wire != want) {
    throw Error{std::string("field ") + f.name + " (" + std::to_string(f.number) + "): wire type " +
                std::to_string(wire) + ", expected " + std::to_string(want)};
  }
}

// RFC 3339 in UTC to the second, as metav1.Time's JSON ("2026-12-06T05:00:00Z").
std::string format_time(int64_t seconds) {
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) throw Error{"timestamp out of range"};
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (n == 0) throw Error{"timestamp out of range"};
  return std::string(buf, n);
}

// Builds the nodes of one page into one Document.
class Builder {
 public:
  explicit Builder(objects::Document* doc) : doc_(doc) {}

  // The fields of `bytes` (a message of `schema`) added to the mapping `map`.
  void message(std::string_view bytes, const Schema& schema, Data* map) {
    Reader r(bytes);
    while (!r.done()) {
      uint32_t number = 0, wire = 0;
      r.tag(&number, &wire);
      const Field* f = schema.find(number);
      if (f == nullptr) {
        r.skip(wire);
        continue;
      }
      field(r, *f, wire, map);
    }
  }

  Data* map() { return doc_->add(NodeType::kMap); }

 private:
  void field(Reader& r, const Field& f, uint32_t wire, Data* map) {
    switch (f.type) {
      case Type::kString: {
        expect_wire(f, wire, kBytes);
        const std::string_view v = r.bytes();
        if (f.omit_empty && v.empty()) return;
        put(map, f, scalar(v));
        return;
      }
      case Type::kInt: {
        expect_wire(f, wire, kVarint);
        const auto v = static_cast<int64_t>(r.varint());
        if (f.omit_empty && v == 0) return;
        put(map, f, scalar(std::to_string(v)));
        return;
      }
      case Type::kBool:
        expect_wire(f, wire, kVarint);
        put(map, f, doc_->add_static_scalar(r.varint() != 0 ? "true" : "false"));
        return;
      case Type::kMessage: {
        expect_wire(f, wire, kBytes);
        Data* child = this->map();
        message(r.bytes(), *f.schema, child);
        put(map, f, child);
        return;
      }
      case Type::kInline:
        expect_wire(f, wire, kBytes);
        message(r.bytes(), *f.schema, map);
        return;
      case Type::kStringMap: {
        expect_wire(f, wire, kBytes);
        Reader entry(r.bytes());
        std::string_view key, value;
        while (!entry.done()) {
          uint32_t number = 0, w = 0;
          entry.tag(&number, &w);
          if ((number == 1 || number == 2) && w == kBytes) {
            (number == 1 ? key : value) = entry.bytes();
          } else {
            entry.skip(w);
          }
        }
        const Data* k = scalar(key);
        doc_->append(child(map, f.name, NodeType::kMap), k, scalar(value));
        return;
      }
      case Type::kTime: {
        expect_wire(f, wire, kBytes);
        const std::string_view bytes = r.bytes();
        Reader t(bytes);
        int64_t seconds = 0;
        while (!t.done()) {
          uint32_t number = 0, w = 0;
          t.tag(&number, &w);
          if (w == kVarint && number == 1) {
            seconds = static_cast<int64_t>(t.varint());
          } else {
            t.skip(w);
          }
        }
        // The zero Time is written as no bytes (metav1.Time's Marshal), and is JSON's null.
        put(map, f, bytes.empty() ? doc_->add(NodeType::kNull) : scalar(format_time(seconds)));
        return;
      }
      case Type::kIntOrString: {
        expect_wire(f, wire, kBytes);
        Reader v(r.bytes());
        int64_t type = 0, int_val = 0;
        std::string_view str_val;
        while (!v.done()) {
          uint32_t number = 0, w = 0;
          v.tag(&number, &w);
          if (number == 1 && w == kVarint) {
            type = static_cast<int64_t>(v.varint());
          } else if (number == 2 && w == kVarint) {
            int_val = static_cast<int32_t>(v.varint());
          } else if (number == 3 && w == kBytes) {
            str_val = v.bytes();
          } else {
            v.skip(w);
          }
        }
        put(map, f, type == 1 ? scalar(str_val) : scalar(std::to_string(int_val)));
        return;
      }
    }
  }

  // A field's value into `map`: a repeated field's values go into one sequence under its key; a
  // singular field given twice keeps the last (as protobuf's readers do), so that a mapping
  // never holds more entries than its schema has fields (and slot() stays short).
  void put(Data* map, const Field& f, const Data* value) {
    if (!f.repeated) {
      slot(map, f.name) = value;
      return;
    }
    doc_->push(child(map, f.name, NodeType::kSequence), value);
  }

  // The node under `name` in `map`, added (of `type`) when there is none yet.
  Data* child(Data* map, const char* name, NodeType type) {
    const Data*& value = slot(map, name);
    if (value == nullptr) value = doc_->add(type);
    return const_cast<Data*>(value);  // every node is this document's, built here
  }

  // The value of the entry under `name` in `map`, added (null) when there is none yet; key
  // nodes are shared, so entries are compared by the key node's address.
  const Data*& slot(Data* map, const char* name) {
    const Data* key = key_node(name);
    for (objects::Document::Cell* c = map->first; c != nullptr; c = c->next) {
      if (c->key == key) return c->value;
    }
    return doc_->append(map, key, nullptr)->value;
  }

  const Data* scalar(std::string_view text) { return doc_->add_scalar(text); }
  // One node per key name in a document, shared by every mapping that has the key.
  const Data* key_node(const char* name) {
    for (const auto& [n, node] : keys_) {
      if (n == name) return node;
    }
    const Data* node = doc_->add_static_scalar(name);  // the schema's names are literals
    keys_.emplace_back(name, node);
    return node;
  }

  objects::Document* doc_;
  std::vector<std::pair<const char*, const Data*>> keys_;
};

// The envelope: `k8s\0` + runtime.Unknown {typeMeta (1): {kind (2)}, raw (2): the object}.
struct Envelope {
  std::string_view kind;
  std::string_view raw;
};
Envelope envelope(std::string_view body) {
  if (body.substr(0, kProtobufMagic.size()) != kProtobufMagic) {
    throw Error{"not a Kubernetes protobuf answer (no k8s magic)"};
  }
  Reader r(body.substr(kProtobufMagic.size()));
  std::optional<std::string_view> raw;
  std::string_view kind;
  while (!r.done()) {
    uint32_t number = 0, wire = 0;
    r.tag(&number, &wire);
    if (number == 1 && wire == kBytes) {
      Reader type_meta(r.bytes());
      while (!type_meta.done()) {
        uint32_t n = 0, w = 0;
        type_meta.tag(&n, &w);
        if (n == 2 && w == kBytes) {
          kind = type_meta.bytes();
        } else {
          type_meta.skip(w);
        }
      }
    } else if (number == 2 && wire == kBytes) {
      raw = r.bytes();
    } else {
      r.skip(wire);
    }
  }
  if (!raw) throw Error{"an answer without its object (runtime.Unknown.raw)"};
  return {kind, *raw};
}

// ListMeta's resourceVersion (2), continue (3) and remainingItemCount (4).
void list_meta(std::string_view bytes, std::string* resource_version, std::string* token,
               std::optional<uint64_t>* remaining = nullptr) {
  Reader r(bytes);
  while (!r.done()) {
    uint32_t number = 0, wire = 0;
    r.tag(&number, &wire);
    if ((number == 2 || number == 3) && wire == kBytes) {
      const std::string_view v = r.bytes();
      (number == 2 ? resource_version : token)->assign(v.data(), v.size());
    } else if (number == 4 && wire == kVarint && remaining != nullptr) {
      // An int64: a negative count (never sent) reads as huge and is capped by the reader.
      *remaining = r.varint();
    } else {
      r.skip(wire);
    }
  }
}

}  // namespace

std::optional<Status> parse_protobuf_status(std::string_view body) {
  try {
    // metav1.Status {message (3), reason (4), code (6)}
    const Envelope e = envelope(body);
    if (e.kind != "Status") return std::nullopt;
    Status s;
    Reader r(e.raw);
    while (!r.done()) {
      uint32_t number = 0, wire = 0;
      r.tag(&number, &wire);
      if ((number == 3 || number == 4) && wire == kBytes) {
        const std::string_view v = r.bytes();
        (number == 3 ? s.message : s.reason).assign(v.data(), v.size());
      } else if (number == 6 && wire == kVarint) {
        s.code = static_cast<int32_t>(r.varint());
      } else {
        r.skip(wire);
      }
    }
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool has_protobuf_schema(objects::Kind kind) { return item_schema(kind) != nullptr; }

bool is_protobuf(std::string_view content_type) {
  return content_type.substr(0, kProtobufMediaType.size()) == kProtobufMediaType;
}

std::optional<ListPage> parse_protobuf_list(std::string_view body, objects::Kind kind,
                                            std::string* error,
                                            std::shared_ptr<objects::Document> reuse) {
  const Schema* schema = item_schema(kind);
  if (schema == nullptr) {
    *error = "no protobuf schema for " + std::string(objects::to_string(kind));
    return std::nullopt;
  }
  try {
    std::shared_ptr<objects::Document> doc;
    if (reuse && reuse.use_count() == 1) {
      reuse->reset();
      doc = std::move(reuse);
    } else {
      doc = std::make_shared<objects::Document>();
    }
    Builder builder(doc.get());
    ListPage page;
    std::vector<const Data*> items;
    Reader r(envelope(body).raw);
    while (!r.done()) {
      uint32_t number = 0, wire = 0;
      r.tag(&number, &wire);
      if (number == 1 && wire == kBytes) {
        list_meta(r.bytes(), &page.resource_version, &page.continue_token, &page.remaining_items);
      } else if (number == 2 && wire == kBytes) {
        Data* item = builder.map();
        builder.message(r.bytes(), *schema, item);
        items.push_back(item);
      } else {
        r.skip(wire);
      }
    }
    if (page.resource_version.empty()) {
      *error = "list without metadata.resourceVersion";
      return std::nullopt;
    }
    page.items.reserve(items.size());
    for (const Data* item : items) page.items.emplace_back(doc, item);
    page.document = std::move(doc);
    return page;
  } catch (const std::exception& e) {
    *error = std::string("invalid protobuf: ") + e.what();
    return std::nullopt;
  }
}

std::optional<std::string> peek_protobuf_continue_token(std::string_view body) {
  try {
    // The items are skipped by their lengths, not read (ListMeta comes first, but a later one
    // would win, as in parse_protobuf_list).
    std::string version, token;
    Reader r(envelope(body).raw);
    while (!r.done()) {
      uint32_t number = 0, wire = 0;
      r.tag(&number, &wire);
      if (number == 1 && wire == kBytes) {
        list_meta(r.bytes(), &version, &token);
      } else {
        r.skip(wire);
      }
    }
    return token;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace tidegate::controller::kube
