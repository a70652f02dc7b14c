#include "log/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

namespace tidegate::log {

namespace {
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};

const char* name(Level l) {
  switch (l) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "?";
}
}  // namespace

void set_level(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

bool enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void write(Level level, std::string_view component, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line;
  line.reserve(64 + message.size());
  line += stamp;
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03dZ ", static_cast<int>(ms));
  line += frac;
  line += name(level);
  line += ' ';
  line += component;
  line += ": ";
  line += message;
  line += '\n';
  // One write(2) per line keeps lines from different threads whole.
  ssize_t unused = ::write(2, line.data(), line.size());
  (void)unused;
}

}  // namespace tidegate::log
