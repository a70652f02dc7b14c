#pragma once
// The document tree the object parsers read (objects.h, gateway.h): mappings, sequences, scalars
// (their text) and null, read-only once built. It is built from the API server's JSON by
// kube/json_reader (SAX events straight into nodes held by one Document per answer) or copied from
// a yaml-cpp tree (manifests, tests: the implicit constructor).
//
// Why not yaml-cpp's own YAML::Node: at 10,000 objects per kind, building yaml-cpp trees (four
// allocations per node, shared pointers, a set of every node of a document) was the largest piece
// of the controller's start (docs/benchmarks.md, "Start-up at scale"). These nodes are one
// allocation each in a deque, children as pointers.
//
// The accessors keep yaml-cpp's names and meaning, so that the parsers read the same either way: a
// missing key or index gives an undefined node (IsDefined() false), whose accessors answer false,
// "" and 0 instead of throwing; a mapping's lookup finds the first entry with that key (as
// yaml-cpp; the API server never repeats a key). A Node keeps its Document alive.

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace YAML {
class Node;
}

namespace tidegate::controller::objects {

enum class NodeType { kUndefined, kNull, kScalar, kSequence, kMap };

class Node;
struct NodeEntry;

// The nodes of one document.
class Document {
 public:
  struct Data {
    NodeType type = NodeType::kNull;
    std::string scalar;
    std::vector<const Data*> items;                            // a sequence's elements
    std::vector<std::pair<const Data*, const Data*>> entries;  // a mapping's keys and values
  };
  // A new node of this document (stable address).
  Data* add(NodeType type) {
    Data& d = nodes_.emplace_back();
    d.type = type;
    return &d;
  }

 private:
  std::deque<Data> nodes_;
};

class Node {
 public:
  Node() = default;  // undefined
  // A copy of a yaml-cpp tree (an undefined YAML::Node gives an undefined Node).
  Node(const YAML::Node& yaml);  // NOLINT(google-explicit-constructor): tests pass YAML::Load()
  Node(std::shared_ptr<const Document> document, const Document::Data* data)
      : document_(std::move(document)), data_(data) {}

  NodeType Type() const { return data_ == nullptr ? NodeType::kUndefined : data_->type; }
  bool IsDefined() const { return data_ != nullptr; }
  explicit operator bool() const { return IsDefined(); }
  bool IsNull() const { return Type() == NodeType::kNull; }
  bool IsScalar() const { return Type() == NodeType::kScalar; }
  bool IsSequence() const { return Type() == NodeType::kSequence; }
  bool IsMap() const { return Type() == NodeType::kMap; }
  // A scalar's text; "" for any other node.
  const std::string& Scalar() const;
  // A sequence's elements or a mapping's entries; 0 for any other node.
  size_t size() const;

  // A mapping's value for `key` (the first entry with it), else an undefined node.
  Node operator[](std::string_view key) const;
  Node operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  Node operator[](const std::string& key) const { return (*this)[std::string_view(key)]; }
  // A sequence's element i, else an undefined node.
  Node operator[](size_t i) const;
  Node operator[](int i) const { return i < 0 ? Node() : (*this)[static_cast<size_t>(i)]; }

  // Iteration, as yaml-cpp's: over a sequence each element is the entry itself; over a mapping
  // each entry's `first` is the key and `second` the value (NodeEntry, below).
  using Entry = NodeEntry;
  class Iterator {
   public:
    Iterator(const Node* node, size_t i) : node_(node), i_(i) {}
    NodeEntry operator*() const;
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }

   private:
    const Node* node_;
    size_t i_;
  };
  Iterator begin() const { return Iterator(this, 0); }
  Iterator end() const { return Iterator(this, size()); }

 private:
  std::shared_ptr<const Document> document_;
  const Document::Data* data_ = nullptr;
};

struct NodeEntry : Node {
  Node first, second;
};

}  // namespace tidegate::controller::objects
