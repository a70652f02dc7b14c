#include "side_thread.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

namespace tidegate {
namespace {

// On a thread of its own when asked for: the work runs beside the caller, who gets its result.
TEST(SideThread, OnAThreadTheWorkRunsBesideTheCaller) {
  const std::thread::id caller = std::this_thread::get_id();
  auto result = run_beside(true, [] { return std::this_thread::get_id(); });
  EXPECT_NE(result.get(), caller);
}

// Not asked for: nothing runs until the result is asked for, then on the caller's thread; an
// exception reaches the caller as from a thread.
TEST(SideThread, OtherwiseTheCallerDoesItWhenItAsks) {
  bool ran = false;
  const std::thread::id caller = std::this_thread::get_id();
  auto result = run_beside(false, [&] {
    ran = true;
    return std::this_thread::get_id();
  });
  EXPECT_FALSE(ran);
  EXPECT_EQ(result.get(), caller);
  EXPECT_TRUE(ran);
  for (bool on_a_thread : {true, false}) {
    auto failing = run_beside(on_a_thread, []() -> int { throw std::runtime_error("bad item"); });
    EXPECT_THROW(failing.get(), std::runtime_error) << on_a_thread;
  }
}

}  // namespace
}  // namespace tidegate
