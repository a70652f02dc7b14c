#include "objects/node.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstring>

namespace tidegate::controller::objects {
namespace {

// The arena's blocks: the first small (a watch event, a manifest), each next one twice the last
// up to kMaxBlock; a request larger than half a block gets a block of its own.
constexpr size_t kFirstBlock = 1024;
constexpr size_t kMaxBlock = 256 * 1024;

const Document::Data* copy_yaml(Document* doc, const YAML::Node& yaml) {
  switch (yaml.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return doc->add(NodeType::kNull);
    case YAML::NodeType::Scalar:
      return doc->add_scalar(yaml.Scalar());
    case YAML::NodeType::Sequence: {
      Document::Data* d = doc->add(NodeType::kSequence);
      for (const auto& item : yaml) doc->push(d, copy_yaml(doc, item));
      return d;
    }
    case YAML::NodeType::Map: {
      Document::Data* d = doc->add(NodeType::kMap);
      for (const auto& kv : yaml) {
        const Document::Data* key = copy_yaml(doc, kv.first);
        doc->append(d, key, copy_yaml(doc, kv.second));
      }
      return d;
    }
  }
  return doc->add(NodeType::kNull);
}

}  // namespace

std::string_view Document::keep(std::string_view text) {
  if (text.empty()) return {};
  char* p = static_cast<char*>(allocate(text.size(), 1));
  std::memcpy(p, text.data(), text.size());
  return {p, text.size()};
}

void* Document::grow(size_t n, size_t align) {
  const size_t need = n + align;
  if (need > kMaxBlock / 2) {
    // A block of its own, kept beside the current one (which still has room for small ones).
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(need));
    block_sizes_.push_back(need);
    char* p = blocks_.back().get();
    return p + (align - reinterpret_cast<std::uintptr_t>(p) % align) % align;
  }
  if (!spare_.empty()) {
    // A block kept by reset(): memory this process has touched already.
    block_size_ = kMaxBlock;
    blocks_.push_back(std::move(spare_.back()));
    spare_.pop_back();
  } else {
    block_size_ = std::min(kMaxBlock, std::max(block_size_ * 2, kFirstBlock));
    while (block_size_ < need) block_size_ *= 2;
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(block_size_));
  }
  block_sizes_.push_back(block_size_);
  next_ = blocks_.back().get();
  end_ = next_ + block_size_;
  return allocate(n, align);
}

void Document::reset() {
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (block_sizes_[i] == kMaxBlock) spare_.push_back(std::move(blocks_[i]));
  }
  blocks_.clear();
  block_sizes_.clear();
  next_ = end_ = nullptr;
  block_size_ = 0;
}

size_t Document::capacity() const {
  size_t bytes = spare_.size() * kMaxBlock;
  for (size_t b : block_sizes_) bytes += b;
  return bytes;
}

Node::Node(const YAML::Node& yaml) {
  if (!yaml.IsDefined()) return;
  auto doc = std::make_shared<Document>();
  data_ = copy_yaml(doc.get(), yaml);
  document_ = std::move(doc);
}

size_t Node::size() const {
  switch (Type()) {
    case NodeType::kSequence:
    case NodeType::kMap:
      return data_->size;
    default:
      return 0;
  }
}

Node Node::operator[](std::string_view key) const {
  if (!IsMap()) return Node();
  for (const Document::Cell* c = data_->first; c != nullptr; c = c->next) {
    if (c->key->type == NodeType::kScalar && c->key->scalar == key)
      return Node(document_, c->value);
  }
  return Node();
}

Node Node::operator[](size_t i) const {
  if (!IsSequence() || i >= data_->size) return Node();
  const Document::Cell* c = data_->first;
  while (i-- > 0) c = c->next;
  return Node(document_, c->value);
}

Node::Iterator Node::begin() const {
  return Iterator(this, IsSequence() || IsMap() ? data_->first : nullptr);
}

Node::Entry Node::Iterator::operator*() const {
  Entry e;
  if (node_->IsSequence()) {
    static_cast<Node&>(e) = Node(node_->document_, cell_->value);
  } else if (node_->IsMap()) {
    e.first = Node(node_->document_, cell_->key);
    e.second = Node(node_->document_, cell_->value);
  }
  return e;
}

}  // namespace tidegate::controller::objects
