#pragma once
// An immutable hash map whose updates share structure: a new version copies only the nodes on
// the paths to the changed keys, so that a snapshot that changes one upstream of 100,000 costs
// (and frees, when the old snapshot goes) a few hundred pointers rather than the whole table.
//
// The shape is fixed: a root of 64 branches, each of 64 leaves, each leaf a vector of entries
// sorted by hash. The top 6 bits of a key's hash pick the branch, the next 6 the leaf: 4,096
// leaves, so a leaf holds about N / 4,096 entries (1 to 3 at 10,000 keys, about 25 at 100,000),
// found by a binary search on the hash. A lookup is the hash and three dependent loads, as with
// std::unordered_map (bucket array, node, key). An update through Transient copies the root (64
// pointers), one branch (64 pointers) and one leaf per touched key, each at most once per
// Transient; nothing it did not copy is written, so a PersistentMap that readers hold never
// changes.
//
// Thread safety: a PersistentMap is immutable and may be read from any thread; a Transient is
// used by one thread.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tidegate::dataplane::runtime {

template <class Key, class Value, class Hash, class KeyEqual = std::equal_to<>>
class PersistentMap {
  static_assert(sizeof(size_t) == 8, "the hash is split into 6-bit indexes from the top");

 public:
  using value_type = std::pair<Key, Value>;
  static constexpr size_t kFanout = 64;

 private:
  struct Slot {
    size_t hash;
    value_type kv;
  };
  // `txn` is the Transient that created the node: only that Transient writes to it, and only
  // until it is made persistent. 0: no Transient may write to it.
  struct Leaf {
    uint64_t txn = 0;
    std::vector<Slot> slots;  // sorted by hash
  };
  struct Branch {
    uint64_t txn = 0;
    std::array<std::shared_ptr<const Leaf>, kFanout> leaves;
  };
  struct Root {
    std::array<std::shared_ptr<const Branch>, kFanout> branches;
  };

  static size_t branch_of(size_t hash) { return hash >> 58; }
  static size_t leaf_of(size_t hash) { return (hash >> 52) & (kFanout - 1); }

  // Where `key` is: its hash, its leaf and its slot, or a null slot.
  struct Location {
    size_t hash = 0;
    const Leaf* leaf = nullptr;
    const Slot* slot = nullptr;
  };

  template <class K>
  static Location locate(const Root* root, const K& key) {
    if (root == nullptr) return {};
    const size_t h = Hash{}(key);
    const Branch* b = root->branches[branch_of(h)].get();
    if (b == nullptr) return {};
    const Leaf* l = b->leaves[leaf_of(h)].get();
    if (l == nullptr) return {};
    for (auto it = first_of(*l, h); it != l->slots.end() && it->hash == h; ++it) {
      if (KeyEqual{}(it->kv.first, key)) return {h, l, &*it};
    }
    return {};
  }

  template <class K>
  static const Value* lookup(const Root* root, const K& key) {
    const Slot* slot = locate(root, key).slot;
    return slot == nullptr ? nullptr : &slot->kv.second;
  }

  static typename std::vector<Slot>::const_iterator first_of(const Leaf& leaf, size_t hash) {
    return std::lower_bound(leaf.slots.begin(), leaf.slots.end(), hash,
                            [](const Slot& s, size_t h) { return s.hash < h; });
  }

 public:
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = PersistentMap::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;

    const_iterator() = default;
    reference operator*() const { return leaf_->slots[slot_].kv; }
    pointer operator->() const { return &leaf_->slots[slot_].kv; }
    const_iterator& operator++() {
      if (++slot_ == leaf_->slots.size()) {
        ++leaf_index_;
        settle();
      }
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const const_iterator& o) const {
      return leaf_ == o.leaf_ && slot_ == o.slot_;  // end: null leaf, slot 0
    }

   private:
    friend class PersistentMap;
    const_iterator(const Root* root, size_t branch, size_t leaf_index, const Leaf* leaf,
                   size_t slot)
        : root_(root), branch_(branch), leaf_index_(leaf_index), leaf_(leaf), slot_(slot) {}
    const Branch* branch_at() const { return root_->branches[branch_].get(); }
    // Moves to the first entry at or after (branch_, leaf_index_), or to the end.
    void settle() {
      slot_ = 0;
      leaf_ = nullptr;
      if (root_ == nullptr) return;
      for (; branch_ < kFanout; ++branch_, leaf_index_ = 0) {
        const Branch* b = branch_at();
        if (b == nullptr) continue;
        for (; leaf_index_ < kFanout; ++leaf_index_) {
          const Leaf* l = b->leaves[leaf_index_].get();
          if (l != nullptr && !l->slots.empty()) {
            leaf_ = l;
            return;
          }
        }
      }
    }

    const Root* root_ = nullptr;
    size_t branch_ = kFanout;
    size_t leaf_index_ = 0;
    const Leaf* leaf_ = nullptr;
    size_t slot_ = 0;
  };
  using iterator = const_iterator;

  PersistentMap() = default;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  const_iterator begin() const {
    if (root_ == nullptr) return end();
    const_iterator it(root_.get(), 0, 0, nullptr, 0);
    it.settle();
    return it;
  }
  const_iterator end() const { return const_iterator(); }

  // The value of `key`, or null. Valid as long as this map (or a copy of it).
  template <class K>
  const Value* get(const K& key) const {
    return lookup(root_.get(), key);
  }
  template <class K>
  bool contains(const K& key) const {
    return get(key) != nullptr;
  }
  template <class K>
  const Value& at(const K& key) const {
    const Value* v = get(key);
    if (v == nullptr) throw std::out_of_range("PersistentMap::at");
    return *v;
  }
  template <class K>
  const_iterator find(const K& key) const {
    const Location at = locate(root_.get(), key);
    if (at.slot == nullptr) return end();
    return const_iterator(root_.get(), branch_of(at.hash), leaf_of(at.hash), at.leaf,
                          static_cast<size_t>(at.slot - at.leaf->slots.data()));
  }

  // The same keys with equal values (order of insertion does not matter).
  friend bool operator==(const PersistentMap& a, const PersistentMap& b) {
    if (a.size_ != b.size_) return false;
    if (a.root_ == b.root_) return true;
    for (const auto& [k, v] : a) {
      const Value* w = b.get(k);
      if (w == nullptr || !(*w == v)) return false;
    }
    return true;
  }

  // Nodes shared with `other` (for tests and for the benchmark's account of what an update
  // copied): 0 when nothing is shared.
  size_t shared_leaves_with(const PersistentMap& other) const {
    if (root_ == nullptr || other.root_ == nullptr) return 0;
    size_t n = 0;
    for (size_t i = 0; i < kFanout; ++i) {
      const Branch* a = root_->branches[i].get();
      const Branch* b = other.root_->branches[i].get();
      if (a == nullptr || b == nullptr) continue;
      for (size_t j = 0; j < kFanout; ++j) {
        if (a->leaves[j] != nullptr && a->leaves[j] == b->leaves[j]) ++n;
      }
    }
    return n;
  }

  // Edits a copy of a map. Each key touched copies its leaf (and branch, and the root) once per
  // Transient; later edits in the same leaf write the copy in place.
  class Transient {
   public:
    Transient() : txn_(next_txn()) {}
    explicit Transient(const PersistentMap& from)
        : from_(from.root_), txn_(next_txn()), size_(from.size_) {}
    Transient(const Transient&) = delete;
    Transient& operator=(const Transient&) = delete;

    size_t size() const { return size_; }

    // The value of `key` as edited so far, or null. Valid until the next edit.
    template <class K>
    const Value* get(const K& key) const {
      return lookup(root_ ? root_.get() : from_.get(), key);
    }

    // Inserts or replaces; returns the value replaced, if any.
    std::optional<Value> insert_or_assign(Key key, Value value) {
      const size_t h = Hash{}(key);
      auto& leaf = const_cast<Leaf&>(*writable_leaf(h));
      auto it = leaf.slots.begin() + (first_of(leaf, h) - leaf.slots.cbegin());
      for (; it != leaf.slots.end() && it->hash == h; ++it) {
        if (KeyEqual{}(it->kv.first, key)) {
          std::optional<Value> old(std::move(it->kv.second));
          it->kv.second = std::move(value);
          return old;
        }
      }
      leaf.slots.insert(it, Slot{h, value_type(std::move(key), std::move(value))});
      ++size_;
      return std::nullopt;
    }

    // Removes `key`; returns its value, or nothing when it is not there.
    template <class K>
    std::optional<Value> erase(const K& key) {
      if (get(key) == nullptr) return std::nullopt;  // copies nothing for an unknown key
      const size_t h = Hash{}(key);
      std::shared_ptr<const Leaf>& leaf_ptr = writable_leaf(h);
      auto& leaf = const_cast<Leaf&>(*leaf_ptr);
      auto it = leaf.slots.begin() + (first_of(leaf, h) - leaf.slots.cbegin());
      for (; it != leaf.slots.end() && it->hash == h; ++it) {
        if (KeyEqual{}(it->kv.first, key)) {
          std::optional<Value> old(std::move(it->kv.second));
          leaf.slots.erase(it);
          --size_;
          if (leaf.slots.empty()) leaf_ptr.reset();
          return old;
        }
      }
      return std::nullopt;  // not reached: get() found it
    }

    // The map as edited; the Transient is spent.
    PersistentMap persistent() && {
      PersistentMap m;
      m.root_ = root_ ? std::shared_ptr<const Root>(std::move(root_)) : std::move(from_);
      m.size_ = size_;
      if (m.size_ == 0) m.root_ = nullptr;
      txn_ = 0;
      return m;
    }

   private:
    static uint64_t next_txn() {
      static std::atomic<uint64_t> counter{0};
      return counter.fetch_add(1, std::memory_order_relaxed) + 1;
    }

    // The slot of the leaf of `h`, holding a leaf this Transient made (and may write: it was
    // created non-const, and no reader has seen it yet).
    std::shared_ptr<const Leaf>& writable_leaf(size_t h) {
      if (!root_) {
        root_ = from_ ? std::make_shared<Root>(*from_) : std::make_shared<Root>();
        from_.reset();
      }
      auto& branch_ptr = root_->branches[branch_of(h)];
      if (!branch_ptr || branch_ptr->txn != txn_) {
        auto copy = branch_ptr ? std::make_shared<Branch>(*branch_ptr) : std::make_shared<Branch>();
        copy->txn = txn_;
        branch_ptr = std::move(copy);
      }
      // Created above by this Transient (txn_ matches): not yet visible to any reader.
      auto& branch = const_cast<Branch&>(*branch_ptr);
      auto& leaf_ptr = branch.leaves[leaf_of(h)];
      if (!leaf_ptr || leaf_ptr->txn != txn_) {
        auto copy = leaf_ptr ? std::make_shared<Leaf>(*leaf_ptr) : std::make_shared<Leaf>();
        copy->txn = txn_;
        leaf_ptr = std::move(copy);
      }
      return leaf_ptr;
    }

    std::shared_ptr<const Root> from_;  // until the first write
    std::shared_ptr<Root> root_;        // this Transient's own copy
    uint64_t txn_;
    size_t size_ = 0;
  };

 private:
  std::shared_ptr<const Root> root_;  // null: empty
  size_t size_ = 0;
};

}  // namespace tidegate::dataplane::runtime
