// The HTTP side of body substitutions: which responses go through the engine (a table), the
// header rewrite that goes with it, and the memo's validator.

#include "server/substitution.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

runtime::CompiledSubstitution html_and_css() {
  runtime::CompiledSubstitution sub;
  sub.mime_types = {"text/css", "text/html"};
  return sub;
}

TEST(SubstitutionDecision, Table) {
  struct Case {
    const char* name;
    ResponseFacts facts;
    SubstitutionAction want;
  };
  using A = SubstitutionAction;
  const std::vector<Case> cases = {
      {"html", {true, 200, "text/html", "", std::nullopt}, A::kSubstitute},
      {"html with charset, mixed case",
       {true, 200, "Text/HTML; charset=utf-8", "", 1234},
       A::kSubstitute},
      {"second type", {true, 200, "text/css", "", 10}, A::kSubstitute},
      {"error page", {true, 404, "text/html", "", 10}, A::kSubstitute},
      {"identity encoding", {true, 200, "text/html", " Identity ", 10}, A::kSubstitute},
      {"png", {true, 200, "image/png", "", 10}, A::kPass},
      {"no content type", {true, 200, "", "", 10}, A::kPass},
      {"type prefix is not the type", {true, 200, "text/htmlx", "", 10}, A::kPass},
      {"gzip", {true, 200, "text/html", "gzip", 10}, A::kPassCompressed},
      {"br", {true, 200, "text/html", "br", std::nullopt}, A::kPassCompressed},
      {"gzip png is just a png", {true, 200, "image/png", "gzip", 10}, A::kPass},
      {"HEAD / 204 / 304 (no body)", {false, 200, "text/html", "", 10}, A::kPass},
      {"empty body", {true, 200, "text/html", "", 0}, A::kPass},
      {"partial content", {true, 206, "text/html", "", 10}, A::kPass},
  };
  const auto sub = html_and_css();
  for (const auto& c : cases) {
    EXPECT_EQ(decide_substitution(sub, c.facts), c.want) << c.name;
  }
}

TEST(SubstitutionSlice, SizedBySpeedOfTheLastSlice) {
  using std::chrono::microseconds;
  using std::chrono::nanoseconds;
  constexpr size_t K = 1024;
  struct Case {
    const char* what;
    size_t slice, consumed;
    nanoseconds spent;
    size_t output, want;
  };
  const Case cases[] = {
      // 16 KiB in 200 us (a dense body): 50 us buy 4 KiB.
      {"dense: shrinks to what the budget buys", 64 * K, 16 * K, microseconds(200), 16 * K, 4 * K},
      {"twice the budget: half", 8 * K, 8 * K, microseconds(100), 8 * K, 4 * K},
      {"on budget: kept", 8 * K, 8 * K, microseconds(50), 8 * K, 8 * K},
      // 2 KiB in 5 us (a scan): the budget buys 20 KiB.
      {"fast: grows by the speed", 2 * K, 2 * K, microseconds(5), 2 * K, 20 * K},
      {"very fast: at most the largest slice", 4 * K, 4 * K, microseconds(1), 0, 64 * K},
      {"very slow: at least the smallest slice", 64 * K, 16 * K, microseconds(5000), 0, 1 * K},
      // Too little input to measure a speed.
      {"little input, quick: kept", 16 * K, 100, microseconds(2), 100, 16 * K},
      {"little input, slow: halved", 16 * K, 100, microseconds(80), 100, 8 * K},
      {"nothing consumed, no time: kept", 32 * K, 0, nanoseconds(0), 0, 32 * K},
      // Replacements that expand: the output of one slice stays near a slice.
      {"output over two slices: halved", 64 * K, 16 * K, microseconds(10), 130 * K, 32 * K},
      {"output over two slices, slow too: the smaller", 64 * K, 16 * K, microseconds(400), 130 * K,
       2 * K},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(next_substitution_slice(c.slice, c.consumed, c.spent, c.output), c.want) << c.what;
  }
}

TEST(SubstitutionSlice, QueuedBytesCountWhatProcessTakes) {
  filters::CompileResult compiled = filters::RuleSet::compile({{"bbb", "c", ""}});
  ASSERT_NE(compiled.rules, nullptr);
  std::string out;
  filters::SubstitutionStream stream(compiled.rules, &out);
  stream.write(std::string(10000, 'a'));
  EXPECT_EQ(stream.queued_bytes(), 10000u);
  EXPECT_TRUE(stream.process(4096));
  EXPECT_EQ(stream.queued_bytes(), 10000u - 4096u);
  stream.finish();
  EXPECT_FALSE(stream.process(1 << 20));
  EXPECT_EQ(stream.queued_bytes(), 0u);
  EXPECT_EQ(out.size(), 10000u);
}

TEST(SubstitutionHeaders, WeakEtag) {
  EXPECT_EQ(weak_etag("\"abc\""), "W/\"abc\"");
  EXPECT_EQ(weak_etag("W/\"abc\""), "W/\"abc\"");
  EXPECT_EQ(weak_etag(" \"abc\" "), "W/\"abc\"");
  EXPECT_EQ(weak_etag(""), "");
}

http::response_header<Fields> upstream_header(bool chunked) {
  http::response_header<Fields> res;
  res.result(200);
  res.version(11);
  res.set(http::field::content_type, "text/html");
  res.set(http::field::etag, "\"v1\"");
  if (chunked) {
    res.set(http::field::transfer_encoding, "chunked");
  } else {
    res.set(http::field::content_length, "1234");
  }
  return res;
}

TEST(SubstitutionHeaders, RewriteTable) {
  struct Case {
    const char* name;
    bool upstream_chunked;
    unsigned client_version;
    bool want_chunked;
  };
  const std::vector<Case> cases = {
      {"length -> chunked for 1.1", false, 11, true},
      {"chunked stays chunked for 1.1", true, 11, true},
      {"length -> close-delimited for 1.0", false, 10, false},
      {"chunked -> close-delimited for 1.0", true, 10, false},
  };
  for (const auto& c : cases) {
    auto res = upstream_header(c.upstream_chunked);
    rewrite_substituted_header(res, c.client_version);
    EXPECT_EQ(res.count(http::field::content_length), 0u) << c.name;
    EXPECT_EQ(res[http::field::transfer_encoding], c.want_chunked ? "chunked" : "") << c.name;
    EXPECT_EQ(res.count(http::field::transfer_encoding), c.want_chunked ? 1u : 0u) << c.name;
    EXPECT_EQ(res[http::field::etag], "W/\"v1\"") << c.name;
    EXPECT_EQ(res[http::field::content_type], "text/html") << c.name;
  }
}

TEST(SubstitutionHeaders, RewriteKeepsWeakEtagAndNoEtag) {
  auto weak = upstream_header(false);
  weak.set(http::field::etag, "W/\"x\"");
  rewrite_substituted_header(weak, 11);
  EXPECT_EQ(weak[http::field::etag], "W/\"x\"");
  auto none = upstream_header(false);
  none.erase(http::field::etag);
  rewrite_substituted_header(none, 11);
  EXPECT_EQ(none.count(http::field::etag), 0u);
}

TEST(SubstitutionHeaders, MemoValidatorPrefersEtag) {
  std::string v;
  auto res = upstream_header(false);
  res.set(http::field::last_modified, "Tue, 01 Oct 2024 10:00:00 GMT");
  memo_validator(res, &v);
  EXPECT_EQ(v, "E:\"v1\"");
  res.erase(http::field::etag);
  memo_validator(res, &v);
  EXPECT_EQ(v, "L:Tue, 01 Oct 2024 10:00:00 GMT");
  res.erase(http::field::last_modified);
  memo_validator(res, &v);
  EXPECT_EQ(v, "");
}

// ---- The memo in the request path: SubstitutionWorkerState::plan and learn ----

runtime::CompiledSubstitution three_rules() {
  runtime::CompiledSubstitution sub = html_and_css();
  filters::CompileResult r =
      filters::RuleSet::compile({{"aa", "1", ""}, {"bb", "2", ""}, {"cc", "3", ""}});
  EXPECT_TRUE(r.errors.empty());
  sub.rules = r.rules;
  sub.rules_version = 77;
  return sub;
}

// Streams `body` through the plan's rules, as the session does.
filters::SubstitutionStreamStats stream(const SubstitutionPlan& plan, std::string_view body,
                                        std::string* out,
                                        filters::SubstitutionStreamOptions options = {}) {
  filters::SubstitutionStream s(plan.rules, out, options);
  s.feed(body);
  s.end();
  return s.stats();
}

TEST(SubstitutionMemoPlan, RunsOnlyTheRulesThatMatchedLastTime) {
  const auto sub = three_rules();
  SubstitutionWorkerState state;
  const std::string body = "xx bb xx bb";
  // First response: every rule runs; rule 1 alone matches; remembered.
  SubstitutionPlan p = state.plan(sub, "a.com/x", "E:1", 200);
  EXPECT_FALSE(p.pass);
  EXPECT_EQ(p.rules, sub.rules);
  EXPECT_EQ(p.rules_skipped, 0u);
  std::string out;
  auto st = stream(p, body, &out);
  EXPECT_EQ(out, "xx 2 xx 2");
  EXPECT_EQ(st.rules_matched, filters::RuleBits{0b010});
  EXPECT_TRUE(state.learn(sub, "a.com/x", "E:1", 200, st));
  // Second: only rule 1, the same output, remembered again (its winners are the same).
  p = state.plan(sub, "a.com/x", "E:1", 200);
  EXPECT_FALSE(p.pass);
  ASSERT_NE(p.rules, nullptr);
  EXPECT_EQ(p.rules->size(), 1u);
  EXPECT_EQ(p.rules_skipped, 2u);
  std::string again;
  st = stream(p, body, &again);
  EXPECT_EQ(again, out);
  EXPECT_EQ(st.rules_matched, filters::RuleBits{0b010});
  EXPECT_TRUE(state.learn(sub, "a.com/x", "E:1", 200, st));
  // A third response reuses the compiled subset.
  EXPECT_EQ(state.plan(sub, "a.com/x", "E:1", 200).rules, p.rules);
  EXPECT_EQ(state.counters.subset_compiles, 1u);
  EXPECT_EQ(state.counters.memo_subsets, 2u);
  EXPECT_EQ(state.counters.rules_skipped, 4u);
  EXPECT_EQ(state.counters.memo_stores, 2u);
  EXPECT_EQ(state.counters.completed, 2u);
  // Another validator, URL or rule set version: every rule.
  EXPECT_EQ(state.plan(sub, "a.com/x", "E:2", 200).rules, sub.rules);
  EXPECT_EQ(state.plan(sub, "a.com/y", "E:1", 200).rules, sub.rules);
  auto other = sub;
  other.rules_version = 78;
  EXPECT_EQ(state.plan(other, "a.com/x", "E:1", 200).rules, sub.rules);
}

TEST(SubstitutionMemoPlan, NoMatchPassesUnscanned) {
  const auto sub = three_rules();
  SubstitutionWorkerState state;
  std::string out;
  auto st = stream(state.plan(sub, "a.com/q", "E:1", 200), "quiet", &out);
  EXPECT_TRUE(state.learn(sub, "a.com/q", "E:1", 200, st));
  const SubstitutionPlan p = state.plan(sub, "a.com/q", "E:1", 200);
  EXPECT_TRUE(p.pass);
  EXPECT_EQ(p.rules, nullptr);
  EXPECT_EQ(p.rules_skipped, 3u);
  EXPECT_EQ(state.counters.memo_skips, 1u);
  EXPECT_EQ(state.counters.subset_compiles, 0u);
}

TEST(SubstitutionMemoPlan, WhatIsNotRemembered) {
  const auto sub = three_rules();
  SubstitutionWorkerState state;
  std::string out;
  // Every rule matched: nothing to skip, and a stale entry goes.
  state.memo.remember(sub.rules_version, "a.com/all", "E:1", 0b001);
  auto st = stream(state.plan(sub, "a.com/all", "E:1", 200), "aa bb cc", &out);
  EXPECT_EQ(st.rules_matched, filters::RuleBits{0b001}) << "ran the remembered subset";
  st.rules_matched = 0b111;  // as a full scan of the same bytes, changed unseen, would find
  EXPECT_FALSE(state.learn(sub, "a.com/all", "E:1", 200, st));
  EXPECT_FALSE(state.memo.find(sub.rules_version, "a.com/all", "E:1"));
  // Not a 200: neither remembered nor looked up.
  st = stream(state.plan(sub, "a.com/404", "E:1", 404), "quiet", &out);
  EXPECT_FALSE(state.learn(sub, "a.com/404", "E:1", 404, st));
  state.memo.remember(sub.rules_version, "a.com/404", "E:1", 0);
  EXPECT_FALSE(state.plan(sub, "a.com/404", "E:1", 404).pass);
  // No validator.
  st = stream(state.plan(sub, "a.com/nov", "", 200), "quiet", &out);
  EXPECT_FALSE(state.learn(sub, "a.com/nov", "", 200, st));
  // Bytes released at the buffer limit were never searched: not remembered, and an entry
  // that was there stays.
  const std::string long_candidate = "a" + std::string(100, 'x');
  runtime::CompiledSubstitution growing = html_and_css();
  growing.rules = filters::RuleSet::compile({{"a[x]*y", "Y", ""}, {"zz", "Z", ""}}).rules;
  growing.rules_version = 5;
  st = stream(state.plan(growing, "a.com/long", "E:1", 200), long_candidate, &out, {16});
  ASSERT_GT(st.forced_releases, 0u);
  EXPECT_FALSE(state.learn(growing, "a.com/long", "E:1", 200, st));
  EXPECT_FALSE(state.memo.find(5, "a.com/long", "E:1"));
  state.memo.remember(5, "a.com/long", "E:1", 0b01);
  EXPECT_FALSE(state.learn(growing, "a.com/long", "E:1", 200, st));
  EXPECT_EQ(state.memo.find(5, "a.com/long", "E:1"), filters::RuleBits{0b01});
}

TEST(SubstitutionMemoPlan, ObservationsForTheMetrics) {
  filters::SubstitutionStreamStats st;
  st.bytes_in = 100;
  st.bytes_out = 90;
  st.replacements = 3;
  st.forced_releases = 1;
  auto done = completed_observation(9, st, 2);
  EXPECT_EQ(done.labels, 9u);
  EXPECT_EQ(done.responses, 1u);
  EXPECT_EQ(done.bytes_in, 100u);
  EXPECT_EQ(done.bytes_out, 90u);
  EXPECT_EQ(done.replacements, 3u);
  EXPECT_EQ(done.forced_releases, 1u);
  EXPECT_EQ(done.rules_skipped, 2u);
  EXPECT_EQ(done.skipped_by_memo, 0u);
  auto skip = memo_skip_observation(9, 3);
  EXPECT_EQ(skip.skipped_by_memo, 1u);
  EXPECT_EQ(skip.rules_skipped, 3u);
  EXPECT_EQ(skip.responses, 0u);
  EXPECT_EQ(skip.bytes_in, 0u);
  auto gz = compressed_observation(9);
  EXPECT_EQ(gz.compressed_passthrough, 1u);
  EXPECT_EQ(gz.responses + gz.skipped_by_memo + gz.rules_skipped, 0u);
}

}  // namespace
}  // namespace tidegate::dataplane::server
