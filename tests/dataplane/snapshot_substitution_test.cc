// Body substitutions in the data plane's snapshot: compiled once per snapshot, shared between
// substitutions with the same rules and across snapshots, reachable from a router match, and a
// configuration that does not compile is refused with the reason.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "filters/substitution/stream.h"
#include "model/model.h"
#include "protocol/protocol.h"
#include "runtime/publisher.h"
#include "runtime/snapshot.h"

namespace tidegate::dataplane::runtime {
namespace {

using model::PathMatch;

model::Route route(std::string path, std::string substitution) {
  model::Route r{std::move(path), PathMatch::kPrefix, "default/web:80", "default/web"};
  r.substitution = std::move(substitution);
  return r;
}

model::Substitution subst(std::string name, std::vector<substitution::Rule> rules) {
  model::Substitution s;
  s.name = std::move(name);
  s.rules = std::move(rules);
  return s;
}

// foo.com: / -> substitution "ns/a", /same -> "ns/b" (same rules as ns/a), /other -> "ns/c",
// /plain -> none; the default route -> "ns/c".
model::Config sample() {
  model::Config c;
  c.upstreams["default/web:80"] = {"default/web:80", {{"10.0.0.1", 8080}}};
  c.virtual_hosts["foo.com"] = {
      "foo.com",
      {route("/", "ns/a"), route("/same", "ns/b"), route("/other", "ns/c"), route("/plain", "")}};
  c.default_route = route("/", "ns/c");
  c.substitutions["ns/a"] = subst("ns/a", {{"example\\.com", "clone.test", ""}});
  c.substitutions["ns/b"] = subst("ns/b", {{"example\\.com", "clone.test", ""}});
  c.substitutions["ns/b"].mime_types = {"application/xhtml+xml", "text/html"};
  c.substitutions["ns/b"].max_buffer = 4096;
  c.substitutions["ns/c"] = subst("ns/c", {{"(hello)", "$1!", "i"}});
  return c;
}

std::shared_ptr<const Snapshot> build(const model::Config& c, const Snapshot* previous = nullptr) {
  std::string error;
  auto snap = build_snapshot(1, c, 2, &error, previous);
  EXPECT_NE(snap, nullptr) << error;
  return snap;
}

// What a response body becomes through the compiled substitution of `path` on foo.com.
std::string through(const Snapshot& snap, std::string_view path, std::string_view body) {
  auto match = snap.router->match("foo.com", path);
  const CompiledSubstitution* sub = snap.substitution_for(match.route);
  if (sub == nullptr) return std::string(body);
  std::string out;
  filters::SubstitutionStream stream(sub->rules, &out, {sub->max_buffer});
  stream.feed(body);
  stream.end();
  return out;
}

TEST(SnapshotSubstitutionTest, ReachableFromTheRouteAMatchFound) {
  auto snap = build(sample());
  ASSERT_NE(snap, nullptr);
  ASSERT_EQ(snap->substitutions.size(), 3u);

  auto at = [&](std::string_view path) {
    return snap->substitution_for(snap->router->match("foo.com", path).route);
  };
  ASSERT_NE(at("/x"), nullptr);
  EXPECT_EQ(at("/x")->name, "ns/a");
  EXPECT_EQ(at("/x")->mime_types, std::vector<std::string>{"text/html"});
  EXPECT_EQ(at("/x")->max_buffer, 64u * 1024);
  EXPECT_EQ(at("/x")->rules_version, sample().substitutions.at("ns/a").rules_version());
  ASSERT_NE(at("/same/1"), nullptr);
  EXPECT_EQ(at("/same/1")->name, "ns/b");
  EXPECT_EQ(at("/same/1")->max_buffer, 4096u);
  EXPECT_EQ(at("/plain"), nullptr);
  EXPECT_EQ(snap->substitution_for(nullptr), nullptr);
  // The default route (an unknown host) has one too.
  auto fallback = snap->router->match("unknown.com", "/");
  ASSERT_TRUE(fallback.is_default);
  ASSERT_NE(snap->substitution_for(fallback.route), nullptr);
  EXPECT_EQ(snap->substitution_for(fallback.route)->name, "ns/c");

  EXPECT_EQ(through(*snap, "/x", "see example.com"), "see clone.test");
  EXPECT_EQ(through(*snap, "/other", "Hello"), "Hello!");
  EXPECT_EQ(through(*snap, "/plain", "see example.com"), "see example.com");
}

TEST(SnapshotSubstitutionTest, EqualRulesShareOneCompiledRuleSet) {
  auto snap = build(sample());
  ASSERT_NE(snap, nullptr);
  const auto& subs = snap->substitutions;
  EXPECT_EQ(subs.at("ns/a").rules, subs.at("ns/b").rules);  // same rules, other types and buffer
  EXPECT_NE(subs.at("ns/a").rules, subs.at("ns/c").rules);
  EXPECT_EQ(snap->rule_sets.size(), 2u);
}

TEST(SnapshotSubstitutionTest, UnchangedRulesAreReusedFromThePreviousSnapshot) {
  auto first = build(sample());
  ASSERT_NE(first, nullptr);
  model::Config changed = sample();
  changed.substitutions["ns/c"].rules[0].replace = "$1?";
  changed.substitutions["ns/a"].max_buffer = 8192;  // not a change of rules
  auto second = build(changed, first.get());
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->substitutions.at("ns/a").rules, first->substitutions.at("ns/a").rules);
  EXPECT_EQ(second->substitutions.at("ns/a").max_buffer, 8192u);
  EXPECT_NE(second->substitutions.at("ns/c").rules, first->substitutions.at("ns/c").rules);
  EXPECT_EQ(through(*second, "/other", "hello"), "hello?");
  EXPECT_EQ(through(*first, "/other", "hello"), "hello!");  // the old snapshot is untouched
  // Without a previous snapshot, everything is compiled afresh.
  auto fresh = build(sample());
  EXPECT_NE(fresh->substitutions.at("ns/a").rules, first->substitutions.at("ns/a").rules);
}

TEST(SnapshotSubstitutionTest, AppliesToTable) {
  CompiledSubstitution sub;
  sub.mime_types = {"application/xhtml+xml", "text/html"};
  const std::vector<std::pair<std::string, bool>> cases = {
      {"text/html", true},
      {"text/html; charset=utf-8", true},
      {"TEXT/HTML;charset=UTF-8", true},
      {" text/html ", true},
      {"application/xhtml+xml", true},
      {"text/plain", false},
      {"text/htmlx", false},
      {"text/htm", false},
      {"", false},
      {"; charset=utf-8", false},
  };
  for (const auto& [value, want] : cases) EXPECT_EQ(sub.applies_to(value), want) << value;
}

TEST(SnapshotSubstitutionTest, InvalidSubstitutionsAreRefusedWithTheReason) {
  Publisher publisher(1);
  ASSERT_EQ(publisher.apply_snapshot({1, sample()}), "");
  const auto served = publisher.current();

  model::Config bad_rule = sample();
  bad_rule.substitutions["ns/a"].rules.push_back({"a*", "x", ""});
  std::string reason = publisher.apply_snapshot({2, bad_rule});
  EXPECT_NE(reason.find("substitution ns/a: rule 1 (match \"a*\"): match can match the empty "
                        "string"),
            std::string::npos)
      << reason;

  model::Config dangling = sample();
  dangling.substitutions.erase("ns/c");
  reason = publisher.apply_snapshot({3, dangling});
  EXPECT_NE(reason.find("unknown substitution \"ns/c\""), std::string::npos) << reason;

  // A delta is refused the same way and changes nothing.
  model::Delta d;
  d.upsert_substitutions = {subst("ns/a", {{"(?=x)y", "z", ""}})};
  reason = publisher.apply_delta({4, 1, d});
  EXPECT_NE(reason.find("lookahead and lookbehind are not supported"), std::string::npos) << reason;
  EXPECT_EQ(publisher.current(), served);
  EXPECT_EQ(publisher.version(), 1u);
}

TEST(SnapshotSubstitutionTest, DeltaAddsASubstitutionToARoute) {
  Publisher publisher(1);
  model::Config c = sample();
  ASSERT_EQ(publisher.apply_snapshot({1, c}), "");
  model::Config next = c;
  next.virtual_hosts["foo.com"].routes[3].substitution = "ns/d";  // /plain
  next.substitutions["ns/d"] = subst("ns/d", {{"plain", "fancy", ""}});
  ASSERT_EQ(publisher.apply_delta({2, 1, model::diff(c, next)}), "");
  EXPECT_EQ(through(*publisher.current(), "/plain", "plain text"), "fancy text");
}

}  // namespace
}  // namespace tidegate::dataplane::runtime
