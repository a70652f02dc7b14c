#include "objects/node.h"

#include <yaml-cpp/yaml.h>

namespace tidegate::controller::objects {
namespace {

const Document::Data* copy_yaml(Document* doc, const YAML::Node& yaml) {
  switch (yaml.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return doc->add(NodeType::kNull);
    case YAML::NodeType::Scalar: {
      Document::Data* d = doc->add(NodeType::kScalar);
      d->scalar = yaml.Scalar();
      return d;
    }
    case YAML::NodeType::Sequence: {
      Document::Data* d = doc->add(NodeType::kSequence);
      d->items.reserve(yaml.size());
      for (const auto& item : yaml) d->items.push_back(copy_yaml(doc, item));
      return d;
    }
    case YAML::NodeType::Map: {
      Document::Data* d = doc->add(NodeType::kMap);
      d->entries.reserve(yaml.size());
      for (const auto& kv : yaml) {
        d->entries.emplace_back(copy_yaml(doc, kv.first), copy_yaml(doc, kv.second));
      }
      return d;
    }
  }
  return doc->add(NodeType::kNull);
}

const std::string& empty_string() {
  static const std::string empty;
  return empty;
}

}  // namespace

Node::Node(const YAML::Node& yaml) {
  if (!yaml.IsDefined()) return;
  auto doc = std::make_shared<Document>();
  data_ = copy_yaml(doc.get(), yaml);
  document_ = std::move(doc);
}

const std::string& Node::Scalar() const { return IsScalar() ? data_->scalar : empty_string(); }

size_t Node::size() const {
  switch (Type()) {
    case NodeType::kSequence:
      return data_->items.size();
    case NodeType::kMap:
      return data_->entries.size();
    default:
      return 0;
  }
}

Node Node::operator[](std::string_view key) const {
  if (!IsMap()) return Node();
  for (const auto& [k, v] : data_->entries) {
    if (k->type == NodeType::kScalar && k->scalar == key) return Node(document_, v);
  }
  return Node();
}

Node Node::operator[](size_t i) const {
  if (!IsSequence() || i >= data_->items.size()) return Node();
  return Node(document_, data_->items[i]);
}

Node::Entry Node::Iterator::operator*() const {
  Entry e;
  if (node_->IsSequence()) {
    static_cast<Node&>(e) = (*node_)[i_];
  } else if (node_->IsMap()) {
    const auto& [k, v] = node_->data_->entries[i_];
    e.first = Node(node_->document_, k);
    e.second = Node(node_->document_, v);
  }
  return e;
}

}  // namespace tidegate::controller::objects
