#include "kube/json_reader.h"

#include <simdjson.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace tidegate::controller::kube {

namespace {

using json = nlohmann::json;

// What a container is, for the managedFields rule.
enum class Role { kOther, kObject, kMetadata, kItems };

// Builds the nodes of one document from simdjson's parsed tree (its DOM: the whole text
// validated first, by the library's fastest code for this CPU), depth first.
class Builder {
 public:
  Builder(objects::Document* doc, bool skip_managed_fields)
      : doc_(doc), skip_managed_fields_(skip_managed_fields) {}

  const objects::Document::Data* build(simdjson::dom::element v, Role role, size_t depth) {
    using simdjson::dom::element_type;
    switch (v.type()) {
      case element_type::OBJECT: {
        objects::Document::Data* d = doc_->add(objects::NodeType::kMap);
        const simdjson::dom::object object(v);
        for (const auto field : object) {
          const std::string_view key = field.key;
          if (skip_managed_fields_ && role == Role::kMetadata && key == "managedFields") continue;
          Role child = Role::kOther;
          if (role == Role::kObject && key == "metadata") child = Role::kMetadata;
          // The root is a list (its "items") or a watch event (its "object").
          if (depth == 0 && key == "items") child = Role::kItems;
          if (depth == 0 && key == "object") child = Role::kObject;
          const objects::Document::Data* k = scalar(key);
          doc_->append(d, k, build(field.value, child, depth + 1));
        }
        return d;
      }
      case element_type::ARRAY: {
        objects::Document::Data* d = doc_->add(objects::NodeType::kSequence);
        const simdjson::dom::array array(v);
        const Role child = role == Role::kItems ? Role::kObject : Role::kOther;
        for (const simdjson::dom::element item : array) {
          doc_->push(d, build(item, child, depth + 1));
        }
        return d;
      }
      case element_type::STRING:
        return scalar(std::string_view(v));
      case element_type::INT64:
        return scalar(std::to_string(int64_t(v)));
      case element_type::UINT64:
        return scalar(std::to_string(uint64_t(v)));
      case element_type::DOUBLE: {
        // The shortest text that reads back as the same number (1.5, 0.0025, 1000): the JSON
        // text itself is not kept. No field the object parsers read is a fraction.
        char buf[32];
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, double(v));
        return scalar(ec == std::errc() ? std::string_view(buf, end - buf) : std::string_view());
      }
      case element_type::BOOL:
        return doc_->add_static_scalar(bool(v) ? "true" : "false");
      case element_type::NULL_VALUE:
        return doc_->add(objects::NodeType::kNull);
    }
    return doc_->add(objects::NodeType::kNull);
  }

 private:
  const objects::Document::Data* scalar(std::string_view text) { return doc_->add_scalar(text); }

  objects::Document* doc_;
  bool skip_managed_fields_;
};

// Reads the root object's keys up to "items", and metadata.continue on the way.
class ContinuePeek : public nlohmann::json_sax<json> {
 public:
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t& val) override {
    if (depth_ == 2 && in_metadata_ && key_ == "continue") token_ = val;
    return value();
  }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override {
    if (depth_ == 0 && started_) return false;  // a second root: not one object
    started_ = true;
    if (depth_ == 1) in_metadata_ = key_ == "metadata";
    ++depth_;
    return true;
  }
  bool end_object() override {
    --depth_;
    if (depth_ == 1 && in_metadata_) metadata_seen_ = true;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return false;  // not an object
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& val) override {
    if (depth_ == 1 && val == "items") {
      reached_items_ = true;
      return false;  // stop: the rest is the items
    }
    key_ = std::move(val);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  std::optional<std::string> result() const {
    if (!reached_items_ || !metadata_seen_) return std::nullopt;
    return token_;
  }

 private:
  bool value() {
    return depth_ > 0;  // a scalar root is not a list
  }
  int depth_ = 0;
  bool started_ = false;
  bool in_metadata_ = false;
  bool metadata_seen_ = false;
  bool reached_items_ = false;
  std::string key_;
  std::string token_;
};

}  // namespace

std::optional<std::string> peek_continue_token(std::string_view list_body) {
  ContinuePeek peek;
  try {
    json::sax_parse(list_body.begin(), list_body.end(), &peek);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return peek.result();
}

std::optional<objects::Node> read_json(std::string_view text, std::string* error,
                                       bool skip_managed_fields) {
  // One parser per thread, reused: its buffers grow to the largest document seen (it copies the
  // text into its own padded buffer).
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto e = parser.parse(text.data(), text.size()).get(root)) {
    *error = simdjson::error_message(e);
    return std::nullopt;
  }
  auto doc = std::make_shared<objects::Document>();
  Builder builder(doc.get(), skip_managed_fields);
  const objects::Document::Data* data = builder.build(root, Role::kObject, 0);
  return objects::Node(std::move(doc), data);
}

}  // namespace tidegate::controller::kube
