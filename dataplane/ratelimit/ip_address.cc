#include "ratelimit/ip_address.h"

#include <arpa/inet.h>

#include <cstring>

namespace tidegate::dataplane::ratelimit {
namespace {

constexpr std::array<uint8_t, 12> kMappedPrefix{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

std::optional<uint32_t> parse_v4(std::string_view s) {
  uint32_t value = 0;
  size_t pos = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (pos >= s.size() || s[pos] != '.') return std::nullopt;
      ++pos;
    }
    size_t start = pos;
    uint32_t octet = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9' && pos - start < 3) {
      octet = octet * 10 + static_cast<uint32_t>(s[pos] - '0');
      ++pos;
    }
    size_t digits = pos - start;
    // "01" is octal in inet_aton and decimal elsewhere: refuse the ambiguity.
    if (digits == 0 || octet > 255 || (digits > 1 && s[start] == '0')) return std::nullopt;
    value = (value << 8) | octet;
  }
  if (pos != s.size()) return std::nullopt;
  return value;
}

uint64_t load_be64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

// splitmix64's finaliser: a cheap bijective mix with good avalanche.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.empty() || text.size() >= kMaxTextBytes) return std::nullopt;
  if (text.find(':') == std::string_view::npos) {
    auto v = parse_v4(text);
    if (!v) return std::nullopt;
    return IpAddress::v4(*v);
  }
  // inet_pton needs a terminated string; zones ("%eth0") are not client addresses we key on.
  char buf[kMaxTextBytes];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  std::array<uint8_t, 16> bytes{};
  if (inet_pton(AF_INET6, buf, bytes.data()) != 1) return std::nullopt;
  return IpAddress::v6(bytes);
}

IpAddress IpAddress::v4(uint32_t host_order) {
  IpAddress a;
  a.bytes_[12] = static_cast<uint8_t>(host_order >> 24);
  a.bytes_[13] = static_cast<uint8_t>(host_order >> 16);
  a.bytes_[14] = static_cast<uint8_t>(host_order >> 8);
  a.bytes_[15] = static_cast<uint8_t>(host_order);
  return a;
}

IpAddress IpAddress::v6(const std::array<uint8_t, 16>& bytes) {
  IpAddress a;
  a.bytes_ = bytes;
  a.v4_ = std::memcmp(bytes.data(), kMappedPrefix.data(), kMappedPrefix.size()) == 0;
  return a;
}

uint32_t IpAddress::v4_value() const {
  if (!v4_) return 0;
  return (uint32_t{bytes_[12]} << 24) | (uint32_t{bytes_[13]} << 16) | (uint32_t{bytes_[14]} << 8) |
         uint32_t{bytes_[15]};
}

uint64_t IpAddress::high() const { return load_be64(bytes_.data()); }
uint64_t IpAddress::low() const { return load_be64(bytes_.data() + 8); }

uint64_t IpAddress::hash() const { return mix(high() ^ mix(low() + 0x9e3779b97f4a7c15ULL)); }

size_t IpAddress::format(char (&out)[kMaxTextBytes]) const {
  if (v4_) {
    // By hand: glibc's inet_ntop formats IPv4 with sprintf, and this runs per connection.
    char* p = out;
    for (size_t i = 12; i < 16; ++i) {
      const unsigned b = bytes_[i];
      if (b >= 100) *p++ = static_cast<char>('0' + b / 100);
      if (b >= 10) *p++ = static_cast<char>('0' + b / 10 % 10);
      *p++ = static_cast<char>('0' + b % 10);
      if (i < 15) *p++ = '.';
    }
    *p = '\0';
    return static_cast<size_t>(p - out);
  }
  const char* r = inet_ntop(AF_INET6, bytes_.data(), out, sizeof out);
  if (r == nullptr) {
    out[0] = '\0';
    return 0;
  }
  return std::strlen(out);
}

std::string IpAddress::to_string() const {
  char buf[kMaxTextBytes];
  size_t n = format(buf);
  return std::string(buf, n);
}

}  // namespace tidegate::dataplane::ratelimit
