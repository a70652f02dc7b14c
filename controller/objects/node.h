#pragma once
// The document tree the object parsers read (objects.h, gateway.h): mappings, sequences, scalars
// (their text) and null, read-only once built. It is built from the API server's JSON by
// kube/json_reader (SAX events straight into nodes held by one Document per answer) or copied from
// a yaml-cpp tree (manifests, tests: the implicit constructor).
//
// Why not yaml-cpp's own YAML::Node: at 10,000 objects per kind, building yaml-cpp trees (four
// allocations per node, shared pointers, a set of every node of a document) was the largest piece
// of the controller's start (docs/benchmarks.md, "Start-up at scale"). These nodes live in their
// document's arena, children linked in order.
//
// The accessors keep yaml-cpp's names and meaning, so that the parsers read the same either way: a
// missing key or index gives an undefined node (IsDefined() false), whose accessors answer false,
// "" and 0 instead of throwing; a mapping's lookup finds the first entry with that key (as
// yaml-cpp; the API server never repeats a key). A Node keeps its Document alive.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
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

// The nodes of one document, in an arena the document owns: a node, an entry and a scalar's text
// are each a bump of a pointer in blocks that grow with the document, and go all at once with it.
// A list page of 5,000 objects is about 200,000 nodes: one allocation each, with a string and two
// vectors of their own, made the page's tree the largest temporary of a start and its page
// faults a third of the controller's CPU (docs/benchmarks.md, "Start-up at scale").
class Document {
 public:
  struct Cell;
  struct Data {
    NodeType type = NodeType::kNull;
    uint32_t size = 0;        // a sequence's elements or a mapping's entries
    std::string_view scalar;  // a scalar's text (in this document's arena, or static)
    Cell* first = nullptr;    // the elements or entries in order
    Cell* last = nullptr;
  };
  // An element of a sequence (key null) or an entry of a mapping.
  struct Cell {
    const Data* key = nullptr;
    const Data* value = nullptr;
    Cell* next = nullptr;
  };

  Document() = default;
  Document(const Document&) = delete;
  Document& operator=(const Document&) = delete;

  // A new node of this document (stable address).
  Data* add(NodeType type) {
    Data* d = new (allocate(sizeof(Data), alignof(Data))) Data;
    d->type = type;
    return d;
  }
  // A scalar node with a copy of `text`.
  Data* add_scalar(std::string_view text) {
    Data* d = add(NodeType::kScalar);
    d->scalar = keep(text);
    return d;
  }
  // A scalar node of text that outlives the document (a literal).
  Data* add_static_scalar(std::string_view text) {
    Data* d = add(NodeType::kScalar);
    d->scalar = text;
    return d;
  }
  // `value` appended to the sequence `seq`.
  void push(Data* seq, const Data* value) { link(seq, nullptr, value); }
  // An entry appended to the mapping `map`; its value may be set later through the cell.
  Cell* append(Data* map, const Data* key, const Data* value) { return link(map, key, value); }

  // Forgets every node and text, keeping the full-size blocks for the nodes to come: the pages
  // of one list, alike in size, are read into one document in turn without touching new memory.
  // No node of before may be used after (the caller holds the only reference).
  void reset();
  // Bytes in blocks, spare ones included (for tests).
  size_t capacity() const;

 private:
  Cell* link(Data* parent, const Data* key, const Data* value) {
    Cell* c = new (allocate(sizeof(Cell), alignof(Cell))) Cell{key, value, nullptr};
    if (parent->last != nullptr) {
      parent->last->next = c;
    } else {
      parent->first = c;
    }
    parent->last = c;
    ++parent->size;
    return c;
  }
  std::string_view keep(std::string_view text);
  void* allocate(size_t n, size_t align) {
    size_t pad = (align - reinterpret_cast<std::uintptr_t>(next_) % align) % align;
    if (next_ == nullptr || static_cast<size_t>(end_ - next_) < pad + n) return grow(n, align);
    void* p = next_ + pad;
    next_ += pad + n;
    return p;
  }
  void* grow(size_t n, size_t align);

  std::vector<std::unique_ptr<char[]>> blocks_;
  std::vector<size_t> block_sizes_;             // of blocks_
  std::vector<std::unique_ptr<char[]>> spare_;  // full-size blocks kept by reset()
  char* next_ = nullptr;
  char* end_ = nullptr;
  size_t block_size_ = 0;
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
  // A scalar's text; "" for any other node. ScalarView() is the same text without a copy, valid
  // while the node (or another node of its document) lives.
  std::string Scalar() const { return std::string(ScalarView()); }
  std::string_view ScalarView() const { return IsScalar() ? data_->scalar : std::string_view(); }
  // A sequence's elements or a mapping's entries; 0 for any other node.
  size_t size() const;

  // A mapping's value for `key` (the first entry with it), else an undefined node.
  Node operator[](std::string_view key) const;
  Node operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  Node operator[](const std::string& key) const { return (*this)[std::string_view(key)]; }
  // A sequence's element i, else an undefined node (a walk of i elements: iterate instead over
  // long sequences).
  Node operator[](size_t i) const;
  Node operator[](int i) const { return i < 0 ? Node() : (*this)[static_cast<size_t>(i)]; }

  // Iteration, as yaml-cpp's: over a sequence each element is the entry itself; over a mapping
  // each entry's `first` is the key and `second` the value (NodeEntry, below).
  using Entry = NodeEntry;
  class Iterator {
   public:
    Iterator(const Node* node, const Document::Cell* cell) : node_(node), cell_(cell) {}
    NodeEntry operator*() const;
    Iterator& operator++() {
      cell_ = cell_->next;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return cell_ != o.cell_; }
    bool operator==(const Iterator& o) const { return cell_ == o.cell_; }

   private:
    const Node* node_;
    const Document::Cell* cell_;
  };
  Iterator begin() const;
  Iterator end() const { return Iterator(this, nullptr); }

 private:
  std::shared_ptr<const Document> document_;
  const Document::Data* data_ = nullptr;
};

struct NodeEntry : Node {
  Node first, second;
};

}  // namespace tidegate::controller::objects
