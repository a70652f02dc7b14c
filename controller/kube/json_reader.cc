#include "kube/json_reader.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <utility>
#include <vector>

namespace tidegate::controller::kube {

namespace {

using json = nlohmann::json;

// What a container is, for the managedFields rule.
enum class Role { kOther, kObject, kMetadata, kItems };

class Builder : public nlohmann::json_sax<json> {
 public:
  explicit Builder(bool skip_managed_fields)
      : skip_managed_fields_(skip_managed_fields), doc_(std::make_shared<objects::Document>()) {}

  bool null() override {
    if (skipped_scalar()) return true;
    place(doc_->add(objects::NodeType::kNull), nullptr);
    return true;
  }
  bool boolean(bool val) override { return scalar(val ? "true" : "false"); }
  bool number_integer(number_integer_t val) override { return scalar(std::to_string(val)); }
  bool number_unsigned(number_unsigned_t val) override { return scalar(std::to_string(val)); }
  bool number_float(number_float_t, const string_t& text) override { return scalar(text); }
  bool string(string_t& val) override { return scalar(std::move(val)); }
  bool binary(binary_t&) override { return false; }  // not in JSON text

  bool start_object(std::size_t) override { return start(objects::NodeType::kMap); }
  bool key(string_t& val) override {
    if (skipping_ > 0) return true;
    Frame& f = stack_.back();
    if (skip_managed_fields_ && f.role == Role::kMetadata && val == "managedFields") {
      skip_next_ = true;
      return true;
    }
    objects::Document::Data* k = doc_->add(objects::NodeType::kScalar);
    k->scalar = std::move(val);
    f.key = k;
    return true;
  }
  bool end_object() override { return end(); }
  bool start_array(std::size_t) override { return start(objects::NodeType::kSequence); }
  bool end_array() override { return end(); }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return false;
  }

  objects::Node root() const { return objects::Node(doc_, root_); }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    objects::Document::Data* node;
    Role role;
    const objects::Document::Data* key = nullptr;  // a mapping's pending key
  };

  // A scalar that is the skipped value itself.
  bool skipped_scalar() {
    if (skipping_ > 0) return true;
    if (skip_next_) {
      skip_next_ = false;
      return true;
    }
    return false;
  }

  bool scalar(std::string text) {
    if (skipped_scalar()) return true;
    objects::Document::Data* d = doc_->add(objects::NodeType::kScalar);
    d->scalar = std::move(text);
    place(d, nullptr);
    return true;
  }

  // Puts a new value into its parent (or makes it the root), and tells the role it has if it is
  // a container.
  void place(const objects::Document::Data* value, Role* role) {
    if (stack_.empty()) {
      root_ = value;
      if (role) *role = Role::kObject;  // the root: a single object, a list or a watch event
      return;
    }
    Frame& f = stack_.back();
    if (f.node->type == objects::NodeType::kSequence) {
      if (role) *role = f.role == Role::kItems ? Role::kObject : Role::kOther;
      f.node->items.push_back(value);
      return;
    }
    if (role) {
      const std::string& key = f.key->scalar;
      *role = Role::kOther;
      if (f.role == Role::kObject && key == "metadata") *role = Role::kMetadata;
      // The root is a list (its "items") or a watch event (its "object").
      if (stack_.size() == 1 && key == "items") *role = Role::kItems;
      if (stack_.size() == 1 && key == "object") *role = Role::kObject;
    }
    f.node->entries.emplace_back(f.key, value);
  }

  bool start(objects::NodeType type) {
    if (skipping_ > 0 || skip_next_) {
      skip_next_ = false;
      ++skipping_;
      return true;
    }
    objects::Document::Data* n = doc_->add(type);
    Role role = Role::kOther;
    place(n, &role);
    stack_.push_back(Frame{n, role});
    return true;
  }

  bool end() {
    if (skipping_ > 0) {
      --skipping_;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool skip_managed_fields_;
  std::shared_ptr<objects::Document> doc_;
  const objects::Document::Data* root_ = nullptr;
  std::vector<Frame> stack_;
  bool skip_next_ = false;  // the next value is managedFields: leave it out
  int skipping_ = 0;        // depth inside a value being left out
  std::string error_;
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
  Builder builder(skip_managed_fields);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
  if (!ok) {
    *error = builder.error().empty() ? "invalid JSON" : builder.error();
    return std::nullopt;
  }
  return builder.root();
}

}  // namespace tidegate::controller::kube
