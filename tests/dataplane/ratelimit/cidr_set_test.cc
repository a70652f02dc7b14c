// IP addresses, CIDR parsing (a table of valid and invalid inputs), set membership (fixed cases
// and a comparison with a linear scan) and client-address resolution through trusted proxies.

#include "ratelimit/cidr_set.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ratelimit/client_address.h"
#include "ratelimit/ip_address.h"

namespace tidegate::dataplane::ratelimit {
namespace {

IpAddress ip(std::string_view s) {
  auto a = IpAddress::parse(s);
  EXPECT_TRUE(a.has_value()) << s;
  return a.value_or(IpAddress());
}

TEST(IpAddress, ParsesAndFormats) {
  struct Case {
    const char* in;
    const char* out;  // nullptr: invalid
    bool v4;
  };
  const Case cases[] = {
      {"1.2.3.4", "1.2.3.4", true},
      {"0.0.0.0", "0.0.0.0", true},
      {"255.255.255.255", "255.255.255.255", true},
      {"::1", "::1", false},
      {"2001:DB8:0:0:0:0:0:1", "2001:db8::1", false},
      {"::ffff:10.1.2.3", "10.1.2.3", true},  // v4-mapped becomes IPv4
      {"::ffff:a01:203", "10.1.2.3", true},
      {"::10.1.2.3", "::10.1.2.3", false},  // v4-compatible (deprecated) stays IPv6
      {"256.1.1.1", nullptr, false},
      {"1.2.3", nullptr, false},
      {"1.2.3.4.5", nullptr, false},
      {"01.2.3.4", nullptr, false},  // octal or decimal? refused
      {"1.2.3.4 ", nullptr, false},
      {"", nullptr, false},
      {"1..2.3", nullptr, false},
      {"fe80::1%eth0", nullptr, false},
      {"[::1]", nullptr, false},
      {"2001:db8::g", nullptr, false},
      {"1:2:3:4:5:6:7:8:9", nullptr, false},
  };
  for (const auto& c : cases) {
    auto a = IpAddress::parse(c.in);
    if (c.out == nullptr) {
      EXPECT_FALSE(a.has_value()) << c.in;
      continue;
    }
    ASSERT_TRUE(a.has_value()) << c.in;
    EXPECT_EQ(a->to_string(), c.out) << c.in;
    EXPECT_EQ(a->is_v4(), c.v4) << c.in;
  }
  EXPECT_EQ(ip("10.1.2.3"), ip("::ffff:10.1.2.3"));
  EXPECT_EQ(ip("10.1.2.3").hash(), ip("::ffff:10.1.2.3").hash());
  EXPECT_NE(ip("10.1.2.3").hash(), ip("10.1.2.4").hash());
  EXPECT_EQ(ip("10.1.2.3").v4_value(), 0x0a010203u);
}

// IPv4 is formatted by hand (no sprintf per connection): it must agree with inet_ntop on the
// edges of each byte and on random addresses.
TEST(IpAddress, FormatsIpv4AsInetNtop) {
  std::vector<uint32_t> values = {0,           0xffffffffu, 0x0a000001u,
                                  0x7f000001u, 0x09630a64u, 0x646300ffu};
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) values.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t v : values) {
    const uint32_t network = htonl(v);
    char want[INET_ADDRSTRLEN];
    ASSERT_NE(inet_ntop(AF_INET, &network, want, sizeof want), nullptr);
    EXPECT_EQ(IpAddress::v4(v).to_string(), want) << v;
  }
}

TEST(Cidr, ParseTable) {
  struct Case {
    const char* in;
    const char* normalised;  // nullptr: invalid
    const char* error;       // substring of the message when invalid
  };
  const Case cases[] = {
      {"10.0.0.0/8", "10.0.0.0/8", nullptr},
      {"10.1.2.3/8", "10.0.0.0/8", nullptr},  // host bits cleared
      {"10.1.2.3", "10.1.2.3/32", nullptr},
      {"0.0.0.0/0", "0.0.0.0/0", nullptr},
      {"255.255.255.255/32", "255.255.255.255/32", nullptr},
      {"192.168.1.129/31", "192.168.1.128/31", nullptr},
      {"128.0.0.0/1", "128.0.0.0/1", nullptr},
      {"2001:db8::/32", "2001:db8::/32", nullptr},
      {"2001:db8:ffff::1/33", "2001:db8:8000::/33", nullptr},
      {"::/0", "::/0", nullptr},
      {"::1", "::1/128", nullptr},
      {"::1/128", "::1/128", nullptr},
      {"ffff::/1", "8000::/1", nullptr},
      {"2001:db8::ff/127", "2001:db8::fe/127", nullptr},
      {"fe80::/64", "fe80::/64", nullptr},
      {"::ffff:10.0.0.0/104", "10.0.0.0/8", nullptr},  // v4-mapped: the IPv4 network
      {"::ffff:0:0/96", "0.0.0.0/0", nullptr},
      {"::ffff:10.1.2.3", "10.1.2.3/32", nullptr},
      {"::ffff:10.0.0.0/95", "::fffe:0:0/95", nullptr},  // wider than the mapped block: IPv6
      {"10.0.0.0/33", nullptr, "prefix length 33 is out of range 0-32 for IPv4"},
      {"::/129", nullptr, "prefix length 129 is out of range 0-128 for IPv6"},
      {"10.0.0.0/", nullptr, "missing prefix length"},
      {"10.0.0.0/-1", nullptr, "is not a number"},
      {"10.0.0.0/8/8", nullptr, "is not a number"},
      {"10.0.0.0/08", nullptr, "leading zero"},
      {"10.0.0.0/1000", nullptr, "is not a number"},
      {"10.0.0/8", nullptr, "is not an IPv4 or IPv6 address"},
      {"300.0.0.0/8", nullptr, "is not an IPv4 or IPv6 address"},
      {"example.com/8", nullptr, "is not an IPv4 or IPv6 address"},
      {"fe80::1%eth0/64", nullptr, "zone index"},
      {"/8", nullptr, "is not an IPv4 or IPv6 address"},
      {"", nullptr, "empty network"},
  };
  for (const auto& c : cases) {
    std::string error;
    auto cidr = Cidr::parse(c.in, &error);
    if (c.normalised == nullptr) {
      EXPECT_FALSE(cidr.has_value()) << c.in;
      EXPECT_NE(error.find(c.error), std::string::npos) << c.in << ": " << error;
      continue;
    }
    ASSERT_TRUE(cidr.has_value()) << c.in << ": " << error;
    EXPECT_EQ(cidr->to_string(), c.normalised) << c.in;
  }
}

TEST(CidrSet, ListParseErrorsNameTheEntry) {
  struct Case {
    const char* in;
    const char* error;
  };
  const Case cases[] = {
      {"", "no network given"},
      {"  ", "no network given"},
      {"10.0.0.0/8,,10.1.0.0/16", "entry 2 is empty"},
      {",10.0.0.0/8", "entry 1 is empty"},
      {"10.0.0.0/8,", "trailing comma after entry 1"},
      {"10.0.0.0/8, 10.0.0.0/33", "entry 2 \"10.0.0.0/33\": prefix length 33"},
      {"10.0.0.0/8 bogus", "entry 2 \"bogus\": \"bogus\" is not an IPv4 or IPv6 address"},
  };
  for (const auto& c : cases) {
    std::string error;
    EXPECT_FALSE(CidrSet::parse(c.in, &error).has_value()) << c.in;
    EXPECT_NE(error.find(c.error), std::string::npos) << c.in << ": " << error;
  }
  std::string many;
  for (size_t i = 0; i <= CidrSet::kMaxEntries; ++i) many += "10.0.0.1,";
  many += "10.0.0.1";
  std::string error;
  EXPECT_FALSE(CidrSet::parse(many, &error).has_value());
  EXPECT_NE(error.find("more than"), std::string::npos) << error;
}

TEST(CidrSet, Membership) {
  std::string error;
  auto set = CidrSet::parse("10.0.0.0/8, 192.168.1.7\t2001:db8::/32\n::1", &error);
  ASSERT_TRUE(set.has_value()) << error;
  EXPECT_TRUE(set->contains(ip("10.0.0.0")));
  EXPECT_TRUE(set->contains(ip("10.255.255.255")));
  EXPECT_FALSE(set->contains(ip("11.0.0.0")));
  EXPECT_FALSE(set->contains(ip("9.255.255.255")));
  EXPECT_TRUE(set->contains(ip("192.168.1.7")));
  EXPECT_FALSE(set->contains(ip("192.168.1.8")));
  EXPECT_TRUE(set->contains(ip("::ffff:10.9.9.9")));  // mapped client matches IPv4 network
  EXPECT_TRUE(set->contains(ip("2001:db8:1::5")));
  EXPECT_FALSE(set->contains(ip("2001:db9::")));
  EXPECT_TRUE(set->contains(ip("::1")));
  EXPECT_FALSE(set->contains(ip("::2")));

  // Families stay apart: ::/0 is every IPv6 client, 0.0.0.0/0 every IPv4 client.
  auto v6_all = CidrSet::parse("::/0", &error);
  ASSERT_TRUE(v6_all);
  EXPECT_TRUE(v6_all->contains(ip("2001:db8::1")));
  EXPECT_FALSE(v6_all->contains(ip("1.2.3.4")));
  EXPECT_FALSE(v6_all->contains(ip("::ffff:1.2.3.4")));
  auto v4_all = CidrSet::parse("0.0.0.0/0", &error);
  ASSERT_TRUE(v4_all);
  EXPECT_TRUE(v4_all->contains(ip("1.2.3.4")));
  EXPECT_TRUE(v4_all->contains(ip("::ffff:1.2.3.4")));
  EXPECT_FALSE(v4_all->contains(ip("::1")));
  EXPECT_FALSE(CidrSet().contains(ip("1.2.3.4")));
}

TEST(CidrSet, NormalisesDuplicatesAndCoveredNetworks) {
  std::string error;
  auto set = CidrSet::parse(
      "10.1.0.0/16 10.0.0.0/8 10.0.0.0/8 10.2.3.4 192.168.0.0/24 "
      "2001:db8:1::/48 2001:db8::/32",
      &error);
  ASSERT_TRUE(set.has_value()) << error;
  std::vector<std::string> got;
  for (const auto& c : set->entries()) got.push_back(c.to_string());
  EXPECT_EQ(got, (std::vector<std::string>{"10.0.0.0/8", "192.168.0.0/24", "2001:db8::/32"}));
}

TEST(CidrSet, AgreesWithALinearScan) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<Cidr> cidrs;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      std::string error;
      std::optional<Cidr> c;
      if (rng() % 2) {
        // Few distinct high octets, so that networks overlap and nest.
        IpAddress a = IpAddress::v4(static_cast<uint32_t>(rng() % 4) << 30 |
                                    static_cast<uint32_t>(rng() & 0x3fffffff));
        c = Cidr::parse(a.to_string() + "/" + std::to_string(rng() % 33), &error);
      } else {
        std::array<uint8_t, 16> b{};
        b[0] = 0x20;
        b[1] = static_cast<uint8_t>(rng() % 2);
        for (int k = 2; k < 16; ++k) b[k] = static_cast<uint8_t>(rng());
        c = Cidr::parse(IpAddress::v6(b).to_string() + "/" + std::to_string(rng() % 129), &error);
      }
      ASSERT_TRUE(c.has_value()) << error;
      cidrs.push_back(*c);
    }
    CidrSet set(cidrs);
    for (int probe = 0; probe < 400; ++probe) {
      IpAddress a;
      if (rng() % 2) {
        a = IpAddress::v4(static_cast<uint32_t>(rng() % 4) << 30 |
                          static_cast<uint32_t>(rng() & 0x3fffffff));
      } else {
        // Near a listed network half of the time.
        const Cidr& near = cidrs[rng() % cidrs.size()];
        std::array<uint8_t, 16> b = near.network.bytes();
        if (!near.network.is_v4())
          b[15 - rng() % 4] ^= static_cast<uint8_t>(rng());
        else
          b[15] ^= static_cast<uint8_t>(rng() % 4);
        a = IpAddress::v6(b);
      }
      bool linear = false;
      for (const auto& c : cidrs) linear = linear || c.contains(a);
      ASSERT_EQ(set.contains(a), linear) << a.to_string();
    }
  }
}

TEST(ClientAddress, TrustsForwardedForOnlyFromTrustedProxies) {
  std::string error;
  auto trusted = CidrSet::parse("10.0.0.0/8, 2001:db8::/32", &error);
  ASSERT_TRUE(trusted.has_value()) << error;
  auto resolve = [&](const char* peer, std::vector<std::string_view> xff) {
    return resolve_client_address(ip(peer), xff, *trusted).to_string();
  };
  // An untrusted peer is the client, whatever it claims.
  EXPECT_EQ(resolve("203.0.113.9", {"1.1.1.1"}), "203.0.113.9");
  // A trusted peer: the rightmost untrusted address.
  EXPECT_EQ(resolve("10.0.0.1", {"1.1.1.1"}), "1.1.1.1");
  EXPECT_EQ(resolve("10.0.0.1", {"6.6.6.6, 1.1.1.1, 10.2.3.4"}), "1.1.1.1");
  EXPECT_EQ(resolve("10.0.0.1", {"6.6.6.6", "1.1.1.1,10.2.3.4"}), "1.1.1.1");
  // Ports and brackets are removed; mapped addresses are IPv4.
  EXPECT_EQ(resolve("10.0.0.1", {"1.1.1.1:5555"}), "1.1.1.1");
  EXPECT_EQ(resolve("10.0.0.1", {"[2001:db9::7]:443"}), "2001:db9::7");
  EXPECT_EQ(resolve("10.0.0.1", {"2001:db9::7"}), "2001:db9::7");
  EXPECT_EQ(resolve("::ffff:10.0.0.1", {"::ffff:1.1.1.1"}), "1.1.1.1");
  // Garbage stops the walk at the last trusted hop.
  EXPECT_EQ(resolve("10.0.0.1", {"1.1.1.1, unknown"}), "10.0.0.1");
  EXPECT_EQ(resolve("10.0.0.1", {"1.1.1.1, bogus, 10.0.0.2"}), "10.0.0.2");
  // Every hop trusted, or nothing forwarded: the leftmost trusted hop.
  EXPECT_EQ(resolve("10.0.0.1", {"10.0.0.3, 10.0.0.2"}), "10.0.0.3");
  EXPECT_EQ(resolve("10.0.0.1", {}), "10.0.0.1");
  EXPECT_EQ(resolve("10.0.0.1", {" , "}), "10.0.0.1");
  EXPECT_EQ(resolve("2001:db8::5", {"1.1.1.1"}), "1.1.1.1");
  // No trusted proxies configured: X-Forwarded-For is never read.
  std::vector<std::string_view> xff{"1.1.1.1"};
  EXPECT_EQ(resolve_client_address(ip("10.0.0.1"), xff, CidrSet()).to_string(), "10.0.0.1");
}

}  // namespace
}  // namespace tidegate::dataplane::ratelimit
