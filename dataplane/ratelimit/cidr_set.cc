#include "ratelimit/cidr_set.h"

#include <algorithm>

namespace tidegate::dataplane::ratelimit {
namespace {

uint32_t mask32(uint8_t prefix) { return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix); }

std::pair<uint64_t, uint64_t> mask128(uint8_t prefix) {
  if (prefix == 0) return {0, 0};
  if (prefix <= 64) return {~uint64_t{0} << (64 - prefix), 0};
  if (prefix == 128) return {~uint64_t{0}, ~uint64_t{0}};
  return {~uint64_t{0}, ~uint64_t{0} << (128 - prefix)};
}

std::pair<uint64_t, uint64_t> masked(const IpAddress& a, uint8_t prefix) {
  auto m = mask128(prefix);
  return {a.high() & m.first, a.low() & m.second};
}

IpAddress from_halves(uint64_t high, uint64_t low) {
  std::array<uint8_t, 16> b{};
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<uint8_t>(high >> (56 - 8 * i));
    b[8 + i] = static_cast<uint8_t>(low >> (56 - 8 * i));
  }
  return IpAddress::v6(b);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::optional<Cidr> Cidr::parse(std::string_view text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<Cidr> {
    *error = why;
    return std::nullopt;
  };
  if (text.empty()) return fail("empty network");
  std::string_view address = text;
  std::optional<unsigned> prefix;
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    address = text.substr(0, slash);
    std::string_view digits = text.substr(slash + 1);
    if (digits.empty()) return fail("missing prefix length after '/'");
    if (digits.size() > 3 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return fail("prefix length \"" + std::string(digits) + "\" is not a number 0-128");
    }
    if (digits.size() > 1 && digits[0] == '0') {
      return fail("prefix length \"" + std::string(digits) + "\" has a leading zero");
    }
    unsigned p = 0;
    for (char c : digits) p = p * 10 + static_cast<unsigned>(c - '0');
    prefix = p;
  }
  if (address.find('%') != std::string_view::npos) {
    return fail("\"" + std::string(address) + "\" has a zone index, which networks cannot have");
  }
  auto ip = IpAddress::parse(address);
  if (!ip) {
    return fail("\"" + std::string(address) + "\" is not an IPv4 or IPv6 address");
  }
  const bool written_v6 = address.find(':') != std::string_view::npos;
  Cidr c;
  if (!written_v6) {
    unsigned p = prefix.value_or(32);
    if (p > 32) {
      return fail("prefix length " + std::to_string(p) + " is out of range 0-32 for IPv4");
    }
    c.prefix = static_cast<uint8_t>(p);
    c.network = IpAddress::v4(ip->v4_value() & mask32(c.prefix));
    return c;
  }
  unsigned p = prefix.value_or(128);
  if (p > 128) {
    return fail("prefix length " + std::to_string(p) + " is out of range 0-128 for IPv6");
  }
  if (ip->is_v4() && p >= 96) {
    // ::ffff:a.b.c.d/96+n is the IPv4 network a.b.c.d/n (clients are normalised the same way).
    c.prefix = static_cast<uint8_t>(p - 96);
    c.network = IpAddress::v4(ip->v4_value() & mask32(c.prefix));
    return c;
  }
  c.prefix = static_cast<uint8_t>(p);
  auto m = masked(*ip, c.prefix);
  c.network = from_halves(m.first, m.second);
  // Below /96 the mask clears part of the ::ffff: marker, so the network stays IPv6.
  return c;
}

bool Cidr::contains(const IpAddress& a) const {
  if (a.is_v4() != network.is_v4()) return false;
  if (a.is_v4()) return (a.v4_value() & mask32(prefix)) == network.v4_value();
  return masked(a, prefix) == std::make_pair(network.high(), network.low());
}

std::string Cidr::to_string() const { return network.to_string() + "/" + std::to_string(prefix); }

CidrSet::CidrSet(const std::vector<Cidr>& input) {
  std::vector<Cidr> cidrs = input;
  // Shorter prefixes first, so that a network inside one already kept can be skipped.
  std::sort(cidrs.begin(), cidrs.end(), [](const Cidr& a, const Cidr& b) {
    if (a.network.is_v4() != b.network.is_v4()) return a.network.is_v4();
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return std::make_pair(a.network.high(), a.network.low()) <
           std::make_pair(b.network.high(), b.network.low());
  });
  for (const auto& c : cidrs) {
    if (contains(c.network)) continue;  // duplicate, or inside a shorter network already kept
    if (c.network.is_v4()) {
      if (v4_.empty() || v4_.back().prefix != c.prefix) v4_.push_back({c.prefix, {}});
      v4_.back().networks.push_back(c.network.v4_value());
    } else {
      if (v6_.empty() || v6_.back().prefix != c.prefix) v6_.push_back({c.prefix, {}});
      v6_.back().networks.emplace_back(c.network.high(), c.network.low());
    }
  }
  // Networks were appended in sorted order within each group, so binary search works.
}

std::optional<CidrSet> CidrSet::parse(std::string_view text, std::string* error) {
  std::vector<Cidr> cidrs;
  size_t pos = 0;
  size_t index = 0;
  bool expect_entry = true;  // after a comma (or at the start) an entry must follow
  while (true) {
    while (pos < text.size() && is_space(text[pos])) ++pos;
    if (pos == text.size()) break;
    if (text[pos] == ',') {
      if (expect_entry) {
        *error = "entry " + std::to_string(index + 1) + " is empty";
        return std::nullopt;
      }
      expect_entry = true;
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && text[end] != ',' && !is_space(text[end])) ++end;
    std::string_view entry = text.substr(pos, end - pos);
    ++index;
    if (index > kMaxEntries) {
      *error = "more than " + std::to_string(kMaxEntries) + " entries";
      return std::nullopt;
    }
    std::string why;
    auto c = Cidr::parse(entry, &why);
    if (!c) {
      *error = "entry " + std::to_string(index) + " \"" + std::string(entry) + "\": " + why;
      return std::nullopt;
    }
    cidrs.push_back(*c);
    expect_entry = false;
    pos = end;
  }
  if (cidrs.empty()) {
    *error = "no network given";
    return std::nullopt;
  }
  if (expect_entry) {
    *error = "trailing comma after entry " + std::to_string(index);
    return std::nullopt;
  }
  return CidrSet(cidrs);
}

bool CidrSet::contains(const IpAddress& a) const {
  if (a.is_v4()) {
    const uint32_t v = a.v4_value();
    for (const auto& g : v4_) {
      if (std::binary_search(g.networks.begin(), g.networks.end(), v & mask32(g.prefix))) {
        return true;
      }
    }
    return false;
  }
  for (const auto& g : v6_) {
    if (std::binary_search(g.networks.begin(), g.networks.end(), masked(a, g.prefix))) return true;
  }
  return false;
}

std::vector<Cidr> CidrSet::entries() const {
  std::vector<Cidr> out;
  for (const auto& g : v4_) {
    for (uint32_t n : g.networks) out.push_back({IpAddress::v4(n), g.prefix});
  }
  for (const auto& g : v6_) {
    for (const auto& n : g.networks) out.push_back({from_halves(n.first, n.second), g.prefix});
  }
  return out;
}

}  // namespace tidegate::dataplane::ratelimit
