#pragma once
// Minimal leveled logging to stderr, one line per call, safe from any thread. Used off the hot
// path only (configuration changes, errors); request logging is a separate, buffered facility.

#include <sstream>
#include <string>
#include <string_view>

namespace tidegate::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_level(Level level);
bool enabled(Level level);
void write(Level level, std::string_view component, std::string_view message);

}  // namespace tidegate::log

#define TG_LOG(level, component, expr)                            \
  do {                                                            \
    if (::tidegate::log::enabled(level)) {                        \
      std::ostringstream tg_log_os_;                              \
      tg_log_os_ << expr;                                         \
      ::tidegate::log::write(level, component, tg_log_os_.str()); \
    }                                                             \
  } while (0)
#define TG_INFO(component, expr) TG_LOG(::tidegate::log::Level::kInfo, component, expr)
#define TG_WARN(component, expr) TG_LOG(::tidegate::log::Level::kWarn, component, expr)
#define TG_ERROR(component, expr) TG_LOG(::tidegate::log::Level::kError, component, expr)
#define TG_DEBUG(component, expr) TG_LOG(::tidegate::log::Level::kDebug, component, expr)
