// Table tests for command-line flags and host:port parsing.

#include "cli/flags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tidegate::cli {
namespace {

// ---- parse_host_port ----

struct HostPortCase {
  std::string text;
  std::optional<std::pair<std::string, uint16_t>> want;  // nullopt: rejected
};

std::optional<std::pair<std::string, uint16_t>> ok(std::string host, uint16_t port) {
  return std::make_pair(std::move(host), port);
}
constexpr std::nullopt_t kBad = std::nullopt;

TEST(ParseHostPortTest, Table) {
  const std::vector<HostPortCase> cases = {
      {"0.0.0.0:8080", ok("0.0.0.0", 8080)},
      {"127.0.0.1:0", ok("127.0.0.1", 0)},
      {"localhost:0", ok("localhost", 0)},
      {"example.com:65535", ok("example.com", 65535)},
      {"[::1]:80", ok("::1", 80)},
      {"[::]:8443", ok("::", 8443)},
      {"[fe80::1%eth0]:80", ok("fe80::1%eth0", 80)},
      {"host:080", ok("host", 80)},
      {"", kBad},
      {"localhost", kBad},
      {":80", kBad},
      {"host:", kBad},
      {"host:65536", kBad},
      {"host:99999999999", kBad},
      {"host:-1", kBad},
      {"host:+80", kBad},
      {"host:80x", kBad},
      {"host: 80", kBad},
      {"host:0x50", kBad},
      {"::1:80", kBad},  // an IPv6 literal needs brackets
      {"[::1]", kBad},
      {"[::1]:", kBad},
      {"[::1]80", kBad},
      {"[]:80", kBad},
      {"[::1:80", kBad},
      {"a:b:80", kBad},
  };
  for (const auto& c : cases) {
    auto got = parse_host_port(c.text);
    ASSERT_EQ(got.has_value(), c.want.has_value()) << "\"" << c.text << "\"";
    if (got) {
      EXPECT_EQ(got->host, c.want->first) << c.text;
      EXPECT_EQ(got->port, c.want->second) << c.text;
    }
  }
}

// ---- Flags ----

// Flags as the programs define them: two valued flags with defaults, one without, one bool.
Flags make_flags() {
  Flags f;
  f.define("listen", "0.0.0.0:8080", "HTTP listen address");
  f.define("control-socket", "/run/tidegate.sock", "control socket path");
  f.define("node", "", "node name");
  f.define_bool("verbose", "log more");
  return f;
}

// Runs Flags::parse over argv = {"prog", args...}.
struct Parsed {
  bool ok;
  std::string error;
  Flags flags;
};

Parsed parse(const std::vector<std::string>& args) {
  std::vector<std::string> storage = {"prog"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  Parsed p{false, "", make_flags()};
  p.ok = p.flags.parse(static_cast<int>(storage.size()), argv.data(), &p.error);
  return p;
}

struct FlagsCase {
  std::string name;
  std::vector<std::string> args;
  std::string want_error;                     // substring; empty: must succeed
  std::map<std::string, std::string> values;  // flag -> value after parsing
  std::vector<std::string> set;               // flags reported as given
};

TEST(FlagsTest, Table) {
  const std::vector<FlagsCase> cases = {
      {"no arguments: defaults",
       {},
       "",
       {{"listen", "0.0.0.0:8080"},
        {"control-socket", "/run/tidegate.sock"},
        {"node", ""},
        {"verbose", "false"}},
       {}},
      {"--name value",
       {"--listen", "127.0.0.1:9000"},
       "",
       {{"listen", "127.0.0.1:9000"}},
       {"listen"}},
      {"--name=value", {"--listen=[::1]:80"}, "", {{"listen", "[::1]:80"}}, {"listen"}},
      {"--name= sets an empty value", {"--listen="}, "", {{"listen", ""}}, {"listen"}},
      {"value containing =", {"--node=a=b"}, "", {{"node", "a=b"}}, {"node"}},
      {"value that looks like a flag is taken as the value",
       {"--node", "--verbose"},
       "",
       {{"node", "--verbose"}, {"verbose", "false"}},
       {"node"}},
      {"last one wins", {"--node", "a", "--node=b"}, "", {{"node", "b"}}, {"node"}},
      {"several flags",
       {"--node", "n1", "--verbose", "--control-socket=/tmp/s"},
       "",
       {{"node", "n1"}, {"verbose", "true"}, {"control-socket", "/tmp/s"}},
       {"node", "verbose", "control-socket"}},
      {"bool alone is true", {"--verbose"}, "", {{"verbose", "true"}}, {"verbose"}},
      {"bool =true", {"--verbose=true"}, "", {{"verbose", "true"}}, {"verbose"}},
      {"bool =false", {"--verbose=false"}, "", {{"verbose", "false"}}, {"verbose"}},
      {"bool =yes", {"--verbose=yes"}, "--verbose takes true or false", {}, {}},
      {"bool does not take the next argument",
       {"--verbose", "false"},
       "unexpected argument",
       {},
       {}},
      {"unknown flag", {"--nope"}, "unknown flag --nope", {}, {}},
      {"unknown flag with value", {"--nope=1"}, "unknown flag --nope", {}, {}},
      {"flags are case-sensitive", {"--Listen", "x"}, "unknown flag --Listen", {}, {}},
      {"missing value", {"--listen"}, "--listen needs a value", {}, {}},
      {"missing value after others", {"--verbose", "--node"}, "--node needs a value", {}, {}},
      {"positional argument", {"extra"}, "unexpected argument \"extra\"", {}, {}},
      {"single dash", {"-listen", "x"}, "unexpected argument \"-listen\"", {}, {}},
      {"bare --", {"--"}, "unknown flag --", {}, {}},
  };
  for (const auto& c : cases) {
    Parsed p = parse(c.args);
    if (!c.want_error.empty()) {
      EXPECT_FALSE(p.ok) << c.name;
      EXPECT_NE(p.error.find(c.want_error), std::string::npos)
          << c.name << ": error \"" << p.error << "\", want \"" << c.want_error << "\"";
      continue;
    }
    ASSERT_TRUE(p.ok) << c.name << ": " << p.error;
    for (const auto& [flag, value] : c.values) {
      EXPECT_EQ(p.flags.get(flag), value) << c.name << ": --" << flag;
    }
    for (const std::string flag : {"listen", "control-socket", "node", "verbose"}) {
      bool want_set = std::find(c.set.begin(), c.set.end(), flag) != c.set.end();
      EXPECT_EQ(p.flags.is_set(flag), want_set) << c.name << ": --" << flag;
    }
    EXPECT_EQ(p.flags.get_bool("verbose"), p.flags.get("verbose") == "true") << c.name;
  }
}

TEST(FlagsTest, UsageListsEveryFlagWithItsDefault) {
  const std::string usage = make_flags().usage("tidegate-dataplane");
  EXPECT_NE(usage.find("usage: tidegate-dataplane [flags]"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--listen VALUE"), std::string::npos) << usage;
  EXPECT_NE(usage.find("HTTP listen address (default 0.0.0.0:8080)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--verbose\n"), std::string::npos) << usage;  // no VALUE, no default
  EXPECT_EQ(usage.find("(default false)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("node name\n"), std::string::npos) << usage;  // empty default not shown
}

}  // namespace
}  // namespace tidegate::cli
