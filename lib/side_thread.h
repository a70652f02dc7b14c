#pragma once
// Work that may run beside the caller's: std::async on a thread of its own when asked for and a
// thread can be had, deferred otherwise (run by get() on the caller's thread). A configuration
// is then never refused for want of a thread (a pids limit reached).

#include <future>
#include <system_error>
#include <type_traits>
#include <utility>

namespace tidegate {

template <class F>
std::future<std::invoke_result_t<std::decay_t<F>>> run_beside(bool on_a_thread, F f) {
  if (on_a_thread) {
    try {
      return std::async(std::launch::async, f);
    } catch (const std::system_error&) {
      // No thread to be had: the caller's thread does the work when it asks for the result.
    }
  }
  return std::async(std::launch::deferred, std::move(f));
}

}  // namespace tidegate
