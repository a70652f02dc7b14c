#pragma once
// model::Shared<T>: a value of T that copies of it share until one of them is changed (copy on
// write). A default-constructed Shared holds T{} without allocating.
//
// The routing model holds one RoutePolicy per route (560 bytes), and every route of an Ingress
// has the same policy; most Ingresses have the default one. Each route exists in several copies
// (the controller's translation and its last configuration, the data plane's configuration), so a
// policy held by value cost its whole size in every route of every copy, and copying it was a
// share of the translation's time (docs/benchmarks.md, "Sharing route and upstream policies").
// Shared makes a route's policy a pointer: copies of a route, and the routes of one Ingress,
// share it. The same holds for an upstream's policy.
//
// Reading: *s, s->member (const only). Changing: s.mut() returns a T& that no other Shared sees
// (it copies the value first when another Shared holds it too). Comparison is by value (two
// Shareds holding the same object are equal without comparing it).
//
// Thread safety: as a shared_ptr<const T>. Copies may be read and destroyed on any threads; mut()
// is meant for the thread building a value, before it is handed to others, and its reference is
// not to be kept across a copy of the Shared (writes through it would reach the copy too).
//
// Objects are shared between routes (upstreams), also of different Ingresses when the decoder
// finds the same policy text (lib/protocol): state that belongs to one route, such as rate
// limiter buckets or compiled checks, is keyed by the route (dataplane/server/route_table.h),
// never by the policy's address.

#include <atomic>
#include <memory>
#include <utility>

namespace tidegate::model {

template <class T>
class Shared {
 public:
  using value_type = T;

  Shared() = default;
  Shared(const T& v) : p_(std::make_shared<T>(v)) {}        // NOLINT(google-explicit-constructor)
  Shared(T&& v) : p_(std::make_shared<T>(std::move(v))) {}  // NOLINT(google-explicit-constructor)

  const T& operator*() const { return p_ ? *p_ : default_value(); }
  const T* operator->() const { return &**this; }

  // The value, for changing it: a copy of its own first when another Shared holds it.
  T& mut() {
    if (!p_) {
      p_ = std::make_shared<T>();
    } else if (p_.use_count() != 1) {
      p_ = std::make_shared<T>(*p_);
    } else {
      // The last other holder's release (an acq_rel decrement) happens before the writes that
      // follow: their reads of the value are done.
      std::atomic_thread_fence(std::memory_order_acquire);
    }
    return *p_;
  }

  // Whether the value is T{} (without comparing when it is the default Shared's own).
  bool is_default() const { return p_ == nullptr || *p_ == T{}; }
  // Whether both hold the same object (or both none).
  bool shares_with(const Shared& other) const { return p_ == other.p_; }

  friend bool operator==(const Shared& a, const Shared& b) { return a.p_ == b.p_ || *a == *b; }
  // Against a plain value (without making a Shared of it).
  friend bool operator==(const Shared& a, const T& b) { return *a == b; }

 private:
  static const T& default_value() {
    static const T kDefault{};
    return kDefault;
  }
  std::shared_ptr<T> p_;  // null: T{}
};

}  // namespace tidegate::model
