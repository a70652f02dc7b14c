#include "server/http_date.h"

#include <array>
#include <ctime>

namespace tidegate::dataplane::server {

namespace {

constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::array<std::string_view, 7> kDays = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};

// Days from 1970-01-01 to y-m-d (proleptic Gregorian; m 1..12).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// A cursor over the date text.
struct Reader {
  std::string_view s;
  bool ok = true;
  bool literal(std::string_view lit) {
    if (!ok || s.substr(0, lit.size()) != lit) return ok = false;
    s.remove_prefix(lit.size());
    return true;
  }
  // Exactly `digits` digits (or 1..digits when `at_least_one`).
  int number(size_t digits, bool at_least_one = false) {
    int n = 0;
    size_t i = 0;
    while (ok && i < digits && i < s.size() && s[i] >= '0' && s[i] <= '9') {
      n = n * 10 + (s[i] - '0');
      ++i;
    }
    if (i == 0 || (!at_least_one && i != digits)) ok = false;
    s.remove_prefix(i);
    return n;
  }
  int month() {
    for (size_t i = 0; i < kMonths.size(); ++i) {
      if (s.substr(0, 3) == kMonths[i]) {
        s.remove_prefix(3);
        return static_cast<int>(i) + 1;
      }
    }
    ok = false;
    return 0;
  }
  void time(int& h, int& m, int& sec) {
    h = number(2);
    literal(":");
    m = number(2);
    literal(":");
    sec = number(2);
  }
};

std::optional<int64_t> to_seconds(bool ok, int64_t year, int month, int day, int h, int m, int s) {
  if (!ok || month < 1 || month > 12 || day < 1 || day > 31 || h > 23 || m > 59 || s > 60) {
    return std::nullopt;
  }
  return days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 +
         h * 3600 + m * 60 + s;
}

}  // namespace

std::string format_http_date(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char out[32];
  const size_t n = std::strftime(out, sizeof out, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(out, n);
}

std::optional<int64_t> parse_http_date(std::string_view text) {
  int h = 0, m = 0, s = 0;
  const size_t comma = text.find(',');
  if (comma == 3) {
    if (text.size() < 5) return std::nullopt;
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    Reader r{text.substr(5)};
    const int day = r.number(2);
    r.literal(" ");
    const int month = r.month();
    r.literal(" ");
    const int year = r.number(4);
    r.literal(" ");
    r.time(h, m, s);
    r.literal(" GMT");
    return to_seconds(r.ok && r.s.empty() && text[4] == ' ', year, month, day, h, m, s);
  }
  if (comma != std::string_view::npos) {
    // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"; a two-digit year is read as the one closest
    // to now within 50 years (RFC 9110 section 5.6.7); this reading takes 1970-2069.
    Reader r{text.substr(comma + 1)};
    r.literal(" ");
    const int day = r.number(2);
    r.literal("-");
    const int month = r.month();
    r.literal("-");
    int year = r.number(2);
    r.literal(" ");
    r.time(h, m, s);
    r.literal(" GMT");
    year += year < 70 ? 2000 : 1900;
    return to_seconds(r.ok && r.s.empty(), year, month, day, h, m, s);
  }
  // asctime: "Sun Nov  6 08:49:37 1994"
  if (text.size() < 4) return std::nullopt;
  Reader r{text.substr(4)};
  const int month = r.month();
  r.literal(" ");
  if (!r.s.empty() && r.s.front() == ' ') r.s.remove_prefix(1);
  const int day = r.number(2, true);
  r.literal(" ");
  r.time(h, m, s);
  r.literal(" ");
  const int year = r.number(4);
  bool day_name = false;
  for (auto d : kDays) day_name = day_name || text.substr(0, 4) == std::string(d) + " ";
  return to_seconds(r.ok && r.s.empty() && day_name, year, month, day, h, m, s);
}

}  // namespace tidegate::dataplane::server
