#pragma once
// model::Boxed<T>: an optional value kept on the heap. The routing model holds one RoutePolicy
// per route, and each route exists in several copies (the controller's translation, the data
// plane's configuration and router); a policy member that most routes never set (CORS, external
// auth, redirects...) then costs a pointer instead of its whole size in every copy. At 100,000
// hosts that was ~1 KB per route and copy (docs/benchmarks.md, "Memory at 100,000").
//
// The interface is std::optional's (has_value, *, ->, emplace, reset, = std::nullopt, ==), with
// value semantics: copying a Boxed copies its value.

#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

namespace tidegate::model {

template <class T>
class Boxed {
 public:
  using value_type = T;

  Boxed() = default;
  Boxed(std::nullopt_t) {}  // NOLINT(google-explicit-constructor): as std::optional
  Boxed(const T& v) : p_(std::make_unique<T>(v)) {}        // NOLINT(google-explicit-constructor)
  Boxed(T&& v) : p_(std::make_unique<T>(std::move(v))) {}  // NOLINT(google-explicit-constructor)
  Boxed(const std::optional<T>& v)                         // NOLINT(google-explicit-constructor)
      : p_(v ? std::make_unique<T>(*v) : nullptr) {}
  Boxed(std::optional<T>&& v)  // NOLINT(google-explicit-constructor)
      : p_(v ? std::make_unique<T>(std::move(*v)) : nullptr) {}
  Boxed(const Boxed& other) : p_(other.p_ ? std::make_unique<T>(*other.p_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  ~Boxed() = default;

  Boxed& operator=(const Boxed& other) {
    if (this != &other) p_ = other.p_ ? std::make_unique<T>(*other.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  Boxed& operator=(std::nullopt_t) {
    p_.reset();
    return *this;
  }
  Boxed& operator=(const T& v) {
    p_ = std::make_unique<T>(v);
    return *this;
  }
  Boxed& operator=(T&& v) {
    p_ = std::make_unique<T>(std::move(v));
    return *this;
  }
  Boxed& operator=(const std::optional<T>& v) {
    p_ = v ? std::make_unique<T>(*v) : nullptr;
    return *this;
  }
  Boxed& operator=(std::optional<T>&& v) {
    p_ = v ? std::make_unique<T>(std::move(*v)) : nullptr;
    return *this;
  }

  template <class... Args>
  T& emplace(Args&&... args) {
    p_ = std::make_unique<T>(std::forward<Args>(args)...);
    return *p_;
  }
  void reset() { p_.reset(); }

  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return p_ != nullptr; }
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }
  T& value() {
    if (!p_) throw std::bad_optional_access();
    return *p_;
  }
  const T& value() const {
    if (!p_) throw std::bad_optional_access();
    return *p_;
  }

  friend bool operator==(const Boxed& a, const Boxed& b) {
    if (!a.p_ || !b.p_) return !a.p_ && !b.p_;
    return *a.p_ == *b.p_;
  }
  friend bool operator==(const Boxed& a, std::nullopt_t) { return !a.p_; }

 private:
  std::unique_ptr<T> p_;
};

}  // namespace tidegate::model
