// The substitution engine (dataplane/filters/substitution/): fixed cases for each semantic rule,
// the streaming edge cases, rule validation, and a differential property test against the
// non-streaming reference in fuzz/targets/substitution.h.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "../../../fuzz/targets/substitution.h"
#include "dense_rules.h"
#include "filters/substitution/linear_rule.h"
#include "filters/substitution/rule_set.h"
#include "filters/substitution/stream.h"
#include "substitution/prefix_regex.h"

namespace tidegate::dataplane::filters {
namespace {

using Rules = std::vector<SubstitutionRule>;
using substitution::literal_alternatives;
using substitution::literal_prefix;
using substitution::prefix_pattern;

std::shared_ptr<const RuleSet> compile_ok(const Rules& rules) {
  CompileResult r = RuleSet::compile(rules);
  for (const auto& e : r.errors) ADD_FAILURE() << e.message;
  return r.rules;
}

// The body in the given pieces.
std::string run_pieces(const std::shared_ptr<const RuleSet>& set,
                       const std::vector<std::string_view>& pieces,
                       SubstitutionStreamOptions options = {},
                       SubstitutionStreamStats* stats = nullptr) {
  std::string out;
  SubstitutionStream s(set, &out, options);
  for (auto p : pieces) s.feed(p);
  s.end();
  if (stats) *stats = s.stats();
  return out;
}

// Queues `piece` as an upstream read does (write_space, then commit_write), asking for more room
// than it fills when `extra` is non-zero; write() when the stream takes nothing in place.
void write_in_place(SubstitutionStream& s, std::string_view piece, size_t extra) {
  const std::span<char> space = s.write_space(piece.size() + extra);
  if (space.empty()) {
    s.write(piece);
    return;
  }
  ASSERT_EQ(space.size(), piece.size() + extra);
  std::copy(piece.begin(), piece.end(), space.begin());
  s.commit_write(piece.size());
}

// The body in the given pieces, each processed in slices of `slice` bytes by calls whose
// time limit is zero: each call stops at its first clock check (after every replacement:
// clock_check_commits 1; and where a search is cut, after every failed candidate: check_window
// 1), so the stream resumes from wherever a call left off. Every other piece is written in place
// (write_space), as the proxy reads a body into the stream.
std::string run_interrupted(const std::shared_ptr<const RuleSet>& set,
                            const std::vector<std::string_view>& pieces, size_t slice,
                            size_t* calls = nullptr) {
  std::string out;
  SubstitutionStreamOptions options;
  options.clock_check_commits = 1;
  options.check_window = 1;
  SubstitutionStream s(set, &out, options);
  const auto no_time = std::chrono::nanoseconds(0);
  size_t n = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i % 2 == 0) {
      s.write(pieces[i]);
    } else {
      write_in_place(s, pieces[i], i % 3 * 7);
    }
    while (s.process(slice, no_time)) ++n;
  }
  s.finish();
  while (s.process(slice, no_time)) ++n;
  EXPECT_EQ(s.stats().abandoned, 0u);
  if (calls) *calls = n;
  return out;
}

// Every split of `body` into two pieces and into single bytes gives `want`.
void expect_all_splits(const Rules& rules, std::string_view body, const std::string& want) {
  auto set = compile_ok(rules);
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(run_pieces(set, {body}), want);
  for (size_t i = 0; i <= body.size(); ++i) {
    EXPECT_EQ(run_pieces(set, {body.substr(0, i), body.substr(i)}), want) << "split at " << i;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < body.size(); ++i) bytes.push_back(body.substr(i, 1));
  EXPECT_EQ(run_pieces(set, bytes), want) << "byte by byte";
}

TEST(SubstitutionSemanticsTest, LeftmostStartWins) {
  expect_all_splits({{"cd", "1", ""}, {"bcde", "2", ""}}, "abcdef", "a2f");
  expect_all_splits({{"bcde", "2", ""}, {"cd", "1", ""}}, "abcdef", "a2f");
}

TEST(SubstitutionSemanticsTest, LongestAtTheSameStartWins) {
  expect_all_splits({{"ab", "1", ""}, {"abc", "2", ""}}, "abcabx", "21x");
  expect_all_splits({{"a[a-z]*", "W", ""}, {"abc", "2", ""}}, "abcd abc", "W W");
}

TEST(SubstitutionSemanticsTest, EqualLengthEarlierRuleWins) {
  expect_all_splits({{"a.c", "1", ""}, {"ab.", "2", ""}}, "abc", "1");
  expect_all_splits({{"ab.", "2", ""}, {"a.c", "1", ""}}, "abc", "2");
}

TEST(SubstitutionSemanticsTest, GlobalAndResumesAfterTheMatch) {
  expect_all_splits({{"aa", "X", ""}}, "aaaaa", "XXa");
  expect_all_splits({{"foo", "bar", ""}}, "foo foo foofoo", "bar bar barbar");
}

TEST(SubstitutionSemanticsTest, ReplacementsAreNotRescanned) {
  expect_all_splits({{"a", "aa", ""}}, "aba", "aabaa");
  expect_all_splits({{"a", "b", ""}, {"b", "c", ""}}, "ab", "bc");
  expect_all_splits({{"x", "y", ""}, {"yy", "z", ""}}, "xx yy", "yy z");
}

TEST(SubstitutionSemanticsTest, GroupsWholeMatchAndDollars) {
  expect_all_splits({{R"((\w+)@(\w+)\.com)", "$2 at $1", ""}}, "mail bob@ex.com now",
                    "mail ex at bob now");
  expect_all_splits({{"b+", "[$&]", ""}}, "abbbc", "a[bbb]c");
  expect_all_splits({{"usd", "$$", ""}}, "10 usd", "10 $");
  expect_all_splits({{"x", "$x$", ""}}, "x", "$x$");
  expect_all_splits({{"(a)|(b)", "<$1|$2>", ""}}, "ab", "<a|><|b>");
  expect_all_splits({{"(a)(b)(c)(d)(e)(f)(g)(h)(i)", "$9$1", ""}}, "abcdefghi", "ia");
}

TEST(SubstitutionSemanticsTest, CaseInsensitiveFlag) {
  expect_all_splits({{"hello", "bye", "i"}}, "Hello HELLO hello hElLo", "bye bye bye bye");
  expect_all_splits({{"hello", "bye", ""}}, "Hello hello", "Hello bye");
  expect_all_splits({{"(?i)ab|cd", "X", ""}}, "AB CD", "X X");  // (?i) spans the '|'
}

// RE2 20220601 loses "B" from `[ab]|[bB]` (google/re2#467); one rule must not hide another.
TEST(SubstitutionSemanticsTest, RulesDoNotMergeInsideRe2) {
  expect_all_splits({{"[ab]", "Y", ""}, {"b", "<$&>", "i"}}, "aBb", "Y<B>Y");
  expect_all_splits({{"0A", "1", ""}, {"0[aA]", "2", ""}}, "0a0A", "21");
}

// Rules are embedded in joined patterns: an unclosed \Q or a group name used twice must not
// leak into the neighbours.
TEST(SubstitutionSemanticsTest, RulesAreEmbeddedSafely) {
  expect_all_splits({{R"(x{2\Q,4}y)", "Q", ""},
                     {"(?P<n>a)b", "[$1]", ""},
                     {"(?P<n>c)d", "<$1>", ""},
                     {R"(\Qa.b)", "R", ""}},
                    "x{2,4}y ab cd a.b axb", "Q [a] <c> R axb");
  // RE2 reads x(?i){2} as x{2}; the engine refuses the construct rather than guess.
  CompileResult r = RuleSet::compile({{"x(?i){2}", "y", ""}});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("not support"), std::string::npos) << r.errors[0].message;
}

TEST(SubstitutionSemanticsTest, WordBoundariesAcrossChunks) {
  expect_all_splits({{R"(\bcat\b)", "dog", ""}}, "cat concat cats cat", "dog concat cats dog");
  expect_all_splits({{R"(\Bcat)", "X", ""}}, "cat concat", "cat conX");
}

TEST(SubstitutionSemanticsTest, StartAndEndOfBody) {
  expect_all_splits({{"^<a", "S", ""}}, "<a<a", "S<a");
  expect_all_splits({{"end$", "E", ""}}, "end end", "end E");
  expect_all_splits({{"(?m)^x", "L", ""}}, "x\nx x\n", "L\nL x\n");
}

TEST(SubstitutionSemanticsTest, Utf8SplitInsideACharacter) {
  expect_all_splits({{"é+", "e", ""}, {"[^a-z ]", "?", ""}}, "café ééé ñ x", "cafe e ? x");
  expect_all_splits({{"ÉTÉ", "summer", "i"}}, "été", "summer");
}

TEST(SubstitutionStreamTest, MatchesAcrossChunkBoundaries) {
  const Rules rules = {{R"(example\.com)", "clone.org", ""}, {"UA-[0-9]+-[0-9]+", "UA-0-0", ""}};
  expect_all_splits(rules, "<a href=\"https://example.com/x\">UA-1234-56</a> example.co",
                    "<a href=\"https://clone.org/x\">UA-0-0</a> example.co");
}

TEST(SubstitutionStreamTest, ReleasesBytesThatCannotStartAMatch) {
  std::string out;
  SubstitutionStream s(compile_ok({{"world", "W", ""}}), &out);
  s.feed("hello wor");
  EXPECT_EQ(out, "hello ");  // "wor" may still become "world"
  EXPECT_EQ(s.pending_bytes(), 3u);
  s.feed("ld and wxyz");
  EXPECT_EQ(out, "hello W and wxyz");
  EXPECT_EQ(s.pending_bytes(), 0u);
  s.end();
  EXPECT_EQ(out, "hello W and wxyz");
}

TEST(SubstitutionStreamTest, HoldsAnOpenCandidateUntilItResolves) {
  std::string out;
  SubstitutionStream s(compile_ok({{"<a [^>]*>", "<A>", ""}}), &out);
  s.feed("x <a href=");
  EXPECT_EQ(out, "x ");
  s.feed("\"y\" ");
  EXPECT_EQ(out, "x ");
  s.feed("> z");
  EXPECT_EQ(out, "x <A> z");
}

TEST(SubstitutionStreamTest, CandidateLongerThanTheBufferIsReleasedAndCounted) {
  auto set = compile_ok({{"<a [^>]*>", "<A>", ""}});
  const std::string longer = "<a " + std::string(300, 'x') + ">";
  SubstitutionStreamStats stats;
  std::vector<std::string_view> pieces;
  const std::string body = "1 " + longer + " 2 <a b> 3";
  for (size_t i = 0; i < body.size(); i += 10)
    pieces.push_back(std::string_view(body).substr(i, 10));
  const std::string got = run_pieces(set, pieces, {64}, &stats);
  EXPECT_EQ(got, "1 " + longer + " 2 <A> 3");
  EXPECT_GE(stats.forced_releases, 1u);

  // Memory stays bounded while it streams.
  std::string out;
  SubstitutionStream s(set, &out, {64});
  s.feed("<a ");
  for (int i = 0; i < 1000; ++i) {
    s.feed("yyyyyyyyyy");
    EXPECT_LE(s.pending_bytes(), 64u + 10u);
  }
  s.feed("> <a q>");
  s.end();
  EXPECT_EQ(out.substr(out.size() - 4), " <A>");
  EXPECT_GE(s.stats().forced_releases, 1u);

  // With the default buffer the same body is replaced whole, and nothing is counted.
  EXPECT_EQ(run_pieces(set, pieces, {}, &stats), "1 <A> 2 <A> 3");
  EXPECT_EQ(stats.forced_releases, 0u);
}

TEST(SubstitutionStreamTest, ProcessInSlicesForFairness) {
  auto set = compile_ok({{"ab", "X", ""}});
  const std::string body(10000, 'a');
  std::string bodyab;
  for (int i = 0; i < 5000; ++i) bodyab += "ab";
  std::string out;
  SubstitutionStream s(set, &out);
  s.write(bodyab);
  int calls = 0;
  while (s.process(1000)) {
    ++calls;
    EXPECT_LE(out.size(), 1000u * calls);  // work per call is bounded by the slice
  }
  EXPECT_GE(calls, 9);
  EXPECT_FALSE(s.done());
  s.finish();
  EXPECT_FALSE(s.process(1000));
  EXPECT_TRUE(s.done());
  EXPECT_EQ(out, std::string(5000, 'X'));
  EXPECT_EQ(s.stats().replacements, 5000u);
  EXPECT_EQ(s.stats().bytes_in, 10000u);
  EXPECT_EQ(s.stats().bytes_out, 5000u);
}

// Calls past their deadline stop after a replacement and the next call resumes there: many
// calls, the same output.
TEST(SubstitutionStreamTest, DeadlineStopsACallAndTheNextResumes) {
  auto set = compile_ok({{"ab", "X", ""}, {"b(c)", "[$1]", ""}});
  std::string body;
  for (int i = 0; i < 500; ++i) body += "abzbc";
  size_t calls = 0;
  EXPECT_EQ(run_interrupted(set, {body}, 1 << 20, &calls), run_pieces(set, {body}));
  // One replacement per call (clock_check_commits 1), two per 5 bytes of body.
  EXPECT_GE(calls, 999u);
  std::string want;
  for (int i = 0; i < 500; ++i) want += "Xz[c]";
  EXPECT_EQ(run_pieces(set, {body}), want);
}

// The rules `x` and `x[^!]*!` over a run of x: the longest-match search from each x scans to the
// window's end (x[^!]* is alive there), so the flush at the body's end is quadratic: 64 KiB took
// about 4 s of CPU before the budget. Now the stream gives up within twice its budget (50 ms +
// 1 us per byte here, on the monotonic clock, then again in CPU time) and the rest goes out
// unmodified.
TEST(SubstitutionStreamTest, CpuBudgetEndsAQuadraticFlush) {
  auto set = compile_ok({{"x", "y", ""}, {"x[^!]*!", "z", ""}});
  const std::string body(64 * 1024, 'x');
  std::string out;
  SubstitutionStream s(set, &out);
  s.write(body);
  s.finish();
  const SubstitutionStreamOptions defaults;
  const auto budget = defaults.cpu_budget + defaults.cpu_budget_per_byte * 64 * 1024;
  // Calls with a 1 ms deadline, as the proxy makes them (with its 100 us): the budget is spent in
  // many short calls (57-74 here, the longest 5-6 ms: one search over the window is not cut).
  // Without the deadline one call took the whole flush.
  size_t calls = 0;
  for (bool more = true; more; ++calls) {
    more = s.process(1 << 20, std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.stats().abandoned, 1u);
  EXPECT_GT(calls, 10u);
  // A generous bound (sanitizer builds, a busy machine): the budget on the monotonic clock, then
  // as much again in CPU time. Without the budget the flush took seconds, tens under the
  // sanitizers.
  EXPECT_LT(s.stats().engine_time, 2 * budget + std::chrono::milliseconds(500));
  // Some x became y before the budget ran out; the rest went out as it came.
  ASSERT_EQ(out.size(), body.size());
  const size_t replaced = out.find('x');
  ASSERT_NE(replaced, std::string::npos);
  EXPECT_GT(replaced, 0u);
  EXPECT_EQ(out, std::string(replaced, 'y') + std::string(body.size() - replaced, 'x'));
  EXPECT_EQ(s.stats().replacements, replaced);
  EXPECT_EQ(s.stats().bytes_out, body.size());
}

// Past the budget (here zero: the first check makes the stream suspect, the next one finds CPU
// time spent since), what is held and queued goes out unmodified, and so does every later write.
TEST(SubstitutionStreamTest, AbandonedStreamPassesTheRestThrough) {
  auto set = compile_ok({{"ab", "X", ""}});
  SubstitutionStreamOptions options;
  options.cpu_budget = std::chrono::nanoseconds(0);
  options.cpu_budget_per_byte = std::chrono::nanoseconds(0);
  options.clock_check_commits = 1;
  std::string out;
  SubstitutionStream s(set, &out, options);
  std::string body;
  for (int i = 0; i < 1000; ++i) body += "ab";
  s.write(body);
  EXPECT_FALSE(s.process(1 << 20));  // nothing left queued: it gave up, all went out
  EXPECT_TRUE(s.abandoned());
  const size_t r = s.stats().replacements;
  ASSERT_GE(r, 2u);    // the check that made it suspect did not stop it
  ASSERT_LT(r, 100u);  // the CPU clock moves between two reads
  const std::string head = std::string(r, 'X') + body.substr(2 * r);
  EXPECT_EQ(out, head);
  EXPECT_TRUE(s.write_space(16).empty());  // the rest passes through write() alone
  s.write("ab-ab");
  s.finish();
  EXPECT_FALSE(s.process(1 << 20));
  EXPECT_TRUE(s.done());
  EXPECT_EQ(out, head + "ab-ab");
  EXPECT_EQ(s.stats().replacements, r);
  EXPECT_EQ(s.stats().bytes_out, out.size());
  EXPECT_EQ(s.stats().bytes_in, body.size() + 5);
}

// Staged clocks: each read of the monotonic clock moves it by mono_step, each read of the CPU
// clock by cpu_step.
struct StagedClocks {
  static inline std::chrono::steady_clock::time_point mono{};
  static inline std::chrono::nanoseconds cpu{0};
  static inline std::chrono::nanoseconds mono_step{0};
  static inline std::chrono::nanoseconds cpu_step{0};
  static inline int cpu_reads = 0;
  static inline int mono_reads = 0;
  static std::chrono::steady_clock::time_point now() {
    ++mono_reads;
    return mono += mono_step;
  }
  static std::chrono::nanoseconds thread_cpu_time() {
    ++cpu_reads;
    return cpu += cpu_step;
  }
  static SubstitutionStreamOptions options(std::chrono::nanoseconds mono_step,
                                           std::chrono::nanoseconds cpu_step) {
    StagedClocks::mono_step = mono_step;
    StagedClocks::cpu_step = cpu_step;
    cpu_reads = 0;
    mono_reads = 0;
    SubstitutionStreamOptions o;
    o.clock_check_commits = 1;
    o.now = &StagedClocks::now;
    o.thread_cpu_time = &StagedClocks::thread_cpu_time;
    return o;
  }
};

// "ab" x 1000 through the rule ab -> X in one call, under staged clocks; the output in *out.
SubstitutionStreamStats run_staged(std::chrono::nanoseconds mono_step,
                                   std::chrono::nanoseconds cpu_step, std::string* out) {
  auto set = compile_ok({{"ab", "X", ""}});
  std::string body;
  for (int i = 0; i < 1000; ++i) body += "ab";
  SubstitutionStream s(set, out, StagedClocks::options(mono_step, cpu_step));
  s.write(body);
  s.finish();
  EXPECT_FALSE(s.process(1 << 20));
  EXPECT_TRUE(s.done());
  return s.stats();
}

// The thread stalls (a CFS throttle, a busy machine): the monotonic clock runs 1 s per read
// while the engine uses 1 us of CPU per read. The stream becomes suspect (it reads the CPU
// clock) but never gives up: the body gets all its replacements.
TEST(SubstitutionStreamTest, StallsDoNotCountAgainstTheBudget) {
  std::string out;
  const auto stats = run_staged(std::chrono::seconds(1), std::chrono::microseconds(1), &out);
  EXPECT_EQ(stats.abandoned, 0u);
  EXPECT_EQ(out, std::string(1000, 'X'));
  EXPECT_GT(StagedClocks::cpu_reads, 900);  // suspect from the first check on
}

// No stall, but 10 ms of CPU per clock read: suspect at the first check past 50 ms + 2 ms (1 us
// per byte of 2,000 bytes) of monotonic time, abandoned once 50 ms of CPU more have gone by.
TEST(SubstitutionStreamTest, CpuTimeBeyondTheBudgetAbandons) {
  std::string out;
  const auto stats = run_staged(std::chrono::milliseconds(10), std::chrono::milliseconds(10), &out);
  EXPECT_EQ(stats.abandoned, 1u);
  // The monotonic clock is read at the call's start, then at each replacement: at the 6th, 60 ms
  // have gone by (> 52 ms): suspect. The CPU clock is read then and at each replacement after:
  // at the 12th, 60 ms of CPU since (> 50 ms, no bytes received since): abandoned.
  ASSERT_EQ(stats.replacements, 12u);
  std::string rest;
  for (int i = 12; i < 1000; ++i) rest += "ab";
  EXPECT_EQ(out, std::string(12, 'X') + rest);
}

// Reads of the monotonic clock for `body` through `rules` in one window, with the clock read only
// for the bytes searched (clock_check_commits out of reach); *replacements: how many were made.
// With `final`, the window is the body's end; otherwise more may follow.
int clock_reads_for(const Rules& rules, const std::string& body, uint64_t* replacements,
                    bool final = true) {
  SubstitutionStreamOptions o =
      StagedClocks::options(std::chrono::nanoseconds(0), std::chrono::nanoseconds(0));
  o.clock_check_commits = 1000000;
  std::string out;
  SubstitutionStream s(compile_ok(rules), &out, o);
  s.write(body);
  if (final) s.finish();
  while (s.process(body.size())) {
  }
  *replacements = s.stats().replacements;
  return StagedClocks::mono_reads;
}

// Besides every clock_check_commits replacements, the clock is read once the searches of the
// replacements have examined 64 KiB, what bounds their cost. A dense body needs no more reads
// than that: "ab" x 32,768 examines about 3 bytes per match (the clock was read at nearly every
// match when each counted the whole window after it). Rules that make the searches long still
// read it about every 64 KiB searched: at the body's end, each search from an x walks x[^!]* to
// the window's end; before it, each replacement moves the window's viable point.
TEST(SubstitutionStreamTest, ClockReadsFollowTheBytesSearched) {
  uint64_t replacements = 0;
  std::string dense;
  for (int i = 0; i < 32768; ++i) dense += "ab";
  const int dense_reads = clock_reads_for({{"ab", "X", ""}}, dense, &replacements);
  EXPECT_EQ(replacements, 32768u);
  EXPECT_LE(dense_reads, 6);  // the call's start and end, and 32,768 x 3 bytes / 64 KiB
  const std::string xs(16 * 1024, 'x');
  const int quadratic_reads =
      clock_reads_for({{"x", "y", ""}, {"x[^!]*!", "z", ""}}, xs, &replacements);
  EXPECT_EQ(replacements, xs.size());
  // 16 Ki searches of 8 Ki bytes on average: 2,048 times 64 KiB, less what each check's last
  // search examined past 64 KiB (not carried over).
  EXPECT_GE(quadratic_reads, 1700);
  EXPECT_LE(quadratic_reads, 2100);
  // Where more may follow, each b can still grow into b[^!]*!, so each ab replaced ends past the
  // viable point, which is searched for again (backwards from the window's end, over all of it):
  // 4,096 searches of 4 KiB on average, 256 times 64 KiB.
  std::string abs;
  for (int i = 0; i < 4096; ++i) abs += "ab";
  const int regrow_reads =
      clock_reads_for({{"ab", "X", ""}, {"b[^!]*!", "Y", ""}}, abs, &replacements, false);
  EXPECT_EQ(replacements, 4095u);  // the last ab waits: its b may grow
  EXPECT_GE(regrow_reads, 200);
  EXPECT_LE(regrow_reads, 300);
}

// Searches that never find anything to replace still count against the budget. Each x starts a
// candidate for x[a-z]*! that walks to the # ending its run and fails: 16 runs of 64 bytes per
// chunk, about 32 KiB examined per chunk for nothing. No replacement ever happens, so no check
// came after one: the budget was never judged, and each chunk paid its searches unjudged. Now
// the searches count (the step's last one, or a search cut once it has examined enough), and
// the stream gives up: everything goes out unmodified.
TEST(SubstitutionStreamTest, SearchesWithoutReplacementsCountAgainstTheBudget) {
  SubstitutionStreamOptions o =
      StagedClocks::options(std::chrono::milliseconds(10), std::chrono::milliseconds(10));
  std::string out;
  SubstitutionStream s(compile_ok({{"x[a-z]*!", "y", ""}}), &out, o);
  std::string chunk;
  for (int i = 0; i < 16; ++i) chunk.append(63, 'x').push_back('#');
  int chunks = 0;
  while (!s.abandoned() && chunks < 64) {
    s.write(chunk);
    while (s.process(chunk.size())) {
    }
    ++chunks;
  }
  EXPECT_TRUE(s.abandoned());
  // 10 ms of each clock per read against 50 ms + 1 us per byte: suspect after a few chunks,
  // abandoned a few later.
  EXPECT_LT(chunks, 20);
  s.write("x!");
  s.finish();
  EXPECT_FALSE(s.process(1 << 20));
  // Everything went out as it came (the last x! would have been a replacement).
  std::string all;
  for (int i = 0; i < chunks; ++i) all += chunk;
  EXPECT_EQ(out, all + "x!");
  EXPECT_EQ(s.stats().replacements, 0u);
}

// A search whose failing candidates walk far is cut once it has examined 64 KiB, and the clock
// is read there: each x of a run of 1,023 walks x[a-z]*! to the # and fails, about 512 KiB per
// run. Before, the clock was read at the call's start and end and once after the search that
// found nothing, however long it was.
TEST(SubstitutionStreamTest, LongSearchesAreCutForTheClock) {
  std::string body;
  for (int i = 0; i < 4; ++i) body.append(1023, 'x').push_back('#');
  uint64_t replacements = 0;
  const int reads = clock_reads_for({{"x[a-z]*!", "y", ""}}, body, &replacements);
  EXPECT_EQ(replacements, 0u);
  // 4 runs of 1,023 x 1,024 / 2 bytes: 32 times 64 KiB.
  EXPECT_GE(reads, 28);
  EXPECT_LE(reads, 40);
}

// A cut search is where a call can stop at its deadline: the same body under a clock that moves
// 1 ms per read and a time limit of 2 ms takes many calls, each resuming where the last one
// stopped, and the output is the body. Before, the first call ran every search to its end.
TEST(SubstitutionStreamTest, DeadlineStopsALongSearchPartway) {
  SubstitutionStreamOptions o =
      StagedClocks::options(std::chrono::milliseconds(1), std::chrono::nanoseconds(0));
  std::string body;
  for (int i = 0; i < 4; ++i) body.append(1023, 'x').push_back('#');
  body += "xx!";
  std::string out;
  SubstitutionStream s(compile_ok({{"x[a-z]*!", "y", ""}}), &out, o);
  s.write(body);
  s.finish();
  int calls = 1;
  size_t out_after_first = 0;
  bool more = s.process(body.size(), std::chrono::milliseconds(2));
  out_after_first = out.size();
  while (more && calls < 1000) {
    more = s.process(body.size(), std::chrono::milliseconds(2));
    ++calls;
  }
  EXPECT_FALSE(more);
  EXPECT_EQ(s.stats().abandoned, 0u);
  EXPECT_GE(calls, 10);
  EXPECT_LT(out_after_first, 1024u);
  EXPECT_EQ(out.size(), body.size() - 2);
  EXPECT_EQ(out.compare(0, body.size() - 3, body, 0, body.size() - 3), 0);
  EXPECT_EQ(out.back(), 'y');
}

// Where more may follow, a search looks only before the window's viable point (the run's
// limit): a match starting there or later would be held anyway. x[^!]*! over 16 KiB of x with
// the limit at 0, as the stream sets it (every x may still grow): nothing is searched. Before,
// each x walked to the window's end, 128 MiB examined for a search that could commit nothing.
TEST(SubstitutionStreamTest, HeldBytesAreNotSearched) {
  auto set = compile_ok({{"x[^!]*!", "y", ""}});
  const std::string xs(16 * 1024, 'x');
  RuleSet::Run run;
  std::string out;
  run.out = &out;
  run.limit = 0;
  run.end_limit = xs.size();
  EXPECT_EQ(set->replace(xs, &run), RuleSet::RunEnd::kNone);
  EXPECT_EQ(run.from, 0u);
  EXPECT_EQ(out, "");
  EXPECT_LE(run.last_examined, 64u);
  // With the limit halfway, the x before it are searched (each walks to the end: no !), and
  // the search is cut once it has examined the run's window: what it passed goes out.
  run.limit = xs.size() / 2;
  run.window = 64 * 1024;
  EXPECT_EQ(set->replace(xs, &run), RuleSet::RunEnd::kCheck);
  EXPECT_GT(run.from, 0u);
  EXPECT_LE(run.from, 8u);  // 16 KiB walked per x: 4 of them pass 64 KiB
  EXPECT_EQ(out, xs.substr(0, run.from));
}

TEST(SubstitutionStreamTest, NoRulesPassesThrough) {
  std::string out;
  SubstitutionStream s(nullptr, &out);
  EXPECT_TRUE(s.write_space(16).empty());  // nothing is held: write() passes it on
  s.feed("abc");
  s.end();
  EXPECT_EQ(out, "abc");
}

// The window as the proxy uses it: room for a 64 KiB read asked for again and again, a part of
// it filled, all but a few bytes dropped. The bytes survive every move, the end of those kept
// lies on a 64-byte boundary after each drop, and the capacity stays near one read.
TEST(StreamWindowTest, ReadsIntoTheWindowKeepItsSizeAndItsEndAligned) {
  StreamWindow w;
  std::mt19937 rng(7);
  std::string mirror;  // what the window should hold
  for (int i = 0; i < 500; ++i) {
    const size_t want = 64 * 1024;
    const std::span<char> room = w.space(want);
    ASSERT_EQ(room.size(), want);
    const size_t n = 1 + rng() % want;
    for (size_t j = 0; j < n; ++j) room[j] = static_cast<char>('a' + (i + j) % 26);
    mirror.append(room.data(), n);
    w.commit(n);
    ASSERT_EQ(std::string_view(w.data(), w.size()), mirror) << i;
    // Keep up to 200 bytes (a held candidate), as compact() does after a turn.
    const size_t keep = std::min<size_t>(mirror.size(), rng() % 200);
    w.drop_front(mirror.size() - keep);
    mirror.erase(0, mirror.size() - keep);
    ASSERT_EQ(std::string_view(w.data(), w.size()), mirror) << i;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data() + w.size()) % StreamWindow::kAlignment, 0u) << i;
  }
  EXPECT_LE(w.capacity(), 64 * 1024 + 64 * 1024 / 16 + 2 * StreamWindow::kAlignment + 200);
  w.release();
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.capacity(), 0u);
  w.append("again");  // usable after release
  EXPECT_EQ(std::string_view(w.data(), w.size()), "again");
  // Moved, the bytes go along and the source is empty and usable.
  StreamWindow moved(std::move(w));
  EXPECT_EQ(std::string_view(moved.data(), moved.size()), "again");
  EXPECT_EQ(w.size(), 0u);  // NOLINT(bugprone-use-after-move): the state a move leaves
  EXPECT_EQ(w.capacity(), 0u);
  w.append("new");
  EXPECT_EQ(std::string_view(w.data(), w.size()), "new");
}

// Appends that are never dropped grow the window geometrically and keep every byte; a drop that
// leaves no room to align puts the rest at the front.
TEST(StreamWindowTest, AppendsGrowAndDropsStayWithinTheWindow) {
  StreamWindow w;
  std::string mirror;
  size_t reallocations = 0;
  for (int i = 0; i < 20000; ++i) {
    const size_t before = w.capacity();
    const std::string piece(1 + i % 13, static_cast<char>('a' + i % 26));
    w.append(piece);
    mirror += piece;
    if (w.capacity() != before) ++reallocations;
  }
  EXPECT_EQ(std::string_view(w.data(), w.size()), mirror);
  EXPECT_LT(reallocations, 20u);  // 140,000 bytes: doubling from 256 takes about ten
  // Dropping one byte of a full window: the rest cannot move to an aligned start past the front
  // (moved there anyway, it would overrun the allocation: AddressSanitizer's unit run sees that).
  StreamWindow full;
  full.append(std::string(300, 'x'));
  const std::span<char> rest = full.space(full.capacity() - full.size());
  ASSERT_FALSE(rest.empty());
  std::fill(rest.begin(), rest.end(), 'y');
  full.commit(rest.size());
  const std::string want = std::string(299, 'x') + std::string(rest.size(), 'y');
  full.drop_front(1);
  EXPECT_EQ(std::string_view(full.data(), full.size()), want);
}

// Input read in place (write_space, then commit_write) is queued as write() queues it: counted,
// processed in slices, and matched across its boundaries with written pieces. Space asked for
// but not committed is not input.
TEST(SubstitutionStreamTest, InputWrittenInPlaceIsQueuedLikeWrites) {
  auto set = compile_ok({{"abc", "X", ""}});
  std::string out;
  SubstitutionStream s(set, &out);
  s.write("-a");
  std::span<char> space = s.write_space(100);
  ASSERT_EQ(space.size(), 100u);
  std::fill(space.begin(), space.end(), 'c');
  space[0] = 'b';
  s.commit_write(1);  // "b": the rest of the space is not input
  EXPECT_EQ(s.queued_bytes(), 3u);
  EXPECT_FALSE(s.process(1 << 20));
  EXPECT_EQ(out, "-");  // "ab" is held: it may begin "abc"
  space = s.write_space(4096);
  ASSERT_EQ(space.size(), 4096u);
  const std::string tail = "c-abc" + std::string(4000, 'z');
  std::copy(tail.begin(), tail.end(), space.begin());
  s.commit_write(tail.size());
  EXPECT_EQ(s.stats().bytes_in, 3 + tail.size());
  while (s.process(64)) {
  }
  s.finish();
  EXPECT_TRUE(s.write_space(1).empty());  // finished: no more input
  EXPECT_FALSE(s.process(1 << 20));
  EXPECT_TRUE(s.done());
  EXPECT_EQ(out, "-X-X" + std::string(4000, 'z'));
  EXPECT_EQ(s.stats().replacements, 2u);
}

TEST(SubstitutionRulesTest, InvalidRulesAreRejectedWithTheirIndex) {
  const Rules rules = {
      {"ok", "fine", ""},       // 0
      {"(a", "x", ""},          // 1 syntax
      {"(?=a)b", "x", ""},      // 2 lookahead
      {"(a)\\1", "x", ""},      // 3 backreference
      {"a*", "x", ""},          // 4 empty match
      {"\\b", "x", ""},         // 5 empty match in context
      {"x?|y", "x", ""},        // 6 empty match
      {"a", "$2", ""},          // 7 group out of range
      {"a", "x", "g"},          // 8 unknown flag
      {"", "x", ""},            // 9 empty
      {"(?<!a)b", "x", ""},     // 10 lookbehind
      {"fine(r)?", "$1", "i"},  // 11
  };
  CompileResult r = RuleSet::compile(rules);
  ASSERT_NE(r.rules, nullptr);
  ASSERT_EQ(r.rules->size(), 2u);
  EXPECT_EQ(r.rules->rule(0).source_index, 0u);
  EXPECT_EQ(r.rules->rule(1).source_index, 11u);
  std::vector<size_t> indexes;
  for (const auto& e : r.errors) {
    indexes.push_back(e.index);
    EXPECT_NE(e.message.find("rule " + std::to_string(e.index) + " "), std::string::npos)
        << e.message;
  }
  EXPECT_EQ(indexes, (std::vector<size_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  auto message = [&](size_t index) {
    for (const auto& e : r.errors) {
      if (e.index == index) return e.message;
    }
    return std::string();
  };
  EXPECT_NE(message(1).find("missing )"), std::string::npos) << message(1);
  EXPECT_NE(message(2).find("lookahead"), std::string::npos) << message(2);
  EXPECT_NE(message(3).find("backreference"), std::string::npos) << message(3);
  EXPECT_NE(message(4).find("empty string"), std::string::npos) << message(4);
  EXPECT_NE(message(5).find("empty string"), std::string::npos) << message(5);
  EXPECT_NE(message(7).find("$2"), std::string::npos) << message(7);
  EXPECT_NE(message(8).find("flags"), std::string::npos) << message(8);
  EXPECT_NE(message(10).find("lookbehind"), std::string::npos) << message(10);
  EXPECT_FALSE(validate_rule({"ok", "$$", "i"}).has_value());
  EXPECT_TRUE(validate_rule({"a|", "x", ""}).has_value());
  EXPECT_EQ(RuleSet::compile({{"a*", "x", ""}}).rules, nullptr);
}

TEST(SubstitutionRulesTest, OnlyRulesThatUseGroupsComputeThem) {
  auto set = compile_ok({{"(a)b", "x", ""}, {"(c)d", "$1", ""}, {"e", "$&", ""}});
  EXPECT_EQ(set->rule(0).max_group, 0);
  EXPECT_EQ(set->rule(1).max_group, 1);
  EXPECT_EQ(set->rule(2).max_group, 0);
}

TEST(SubstitutionPrefixTest, PrefixPatternsAcceptEveryPrefix) {
  struct Case {
    const char* pattern;
    std::vector<const char*> matches;
  };
  const std::vector<Case> cases = {
      {"abc", {"abc"}},
      {R"(a(b|cd)*e)", {"abcdbe", "ae"}},
      {"x{2,4}y", {"xxxxy", "xxy"}},
      {R"(\Qa.b\E+c)", {"a.bbbc"}},
      {"(?i)ab|cd", {"AB", "Cd"}},
      {R"((?P<n>[^>]*)>)", {"qq>"}},
      {R"(\x{41}\p{L}[[:digit:]\]]é)", {"AZ]é", "Aé9é"}},
      {"a{,2}", {"a{,2}"}},
  };
  for (const auto& c : cases) {
    auto pref = prefix_pattern(c.pattern);
    ASSERT_TRUE(pref.has_value()) << c.pattern;
    RE2 re(*pref);
    ASSERT_TRUE(re.ok()) << c.pattern << " => " << *pref << ": " << re.error();
    RE2 orig(c.pattern);
    for (const std::string m : c.matches) {
      ASSERT_TRUE(RE2::FullMatch(m, orig)) << c.pattern << " " << m;
      for (size_t n = 0; n <= m.size(); ++n) {
        // Prefixes that cut a UTF-8 character are the stream's business, not the pattern's.
        if (n < m.size() && (static_cast<unsigned char>(m[n]) & 0xc0) == 0x80) continue;
        EXPECT_TRUE(RE2::FullMatch(m.substr(0, n), re))
            << c.pattern << " prefix " << m.substr(0, n);
      }
    }
  }
  EXPECT_FALSE(RE2::FullMatch("b", RE2(*prefix_pattern("abc"))));
  EXPECT_FALSE(RE2::FullMatch("abca", RE2(*prefix_pattern("abc"))));
}

// ---- the differential property test ----

std::string random_atom(std::mt19937& rng) {
  static const std::vector<std::string> kAtoms = {
      "a",     "b", "c",     "ab",       "ba",    " ",   "é",     "[ab]", "[^a ]", R"(\w)",
      R"(\s)", ".", "[a-c]", "(?:a|bc)", "(a|b)", "(b)", R"(\.)", "<",    ">",     "[^>]"};
  return kAtoms[rng() % kAtoms.size()];
}

std::string random_pattern(std::mt19937& rng) {
  std::string p;
  if (rng() % 10 == 0) p += R"(\b)";
  if (rng() % 20 == 0) p += "^";
  const int n = 1 + rng() % 4;
  for (int i = 0; i < n; ++i) {
    std::string atom = random_atom(rng);
    switch (rng() % 8) {
      case 0:
        atom += "+";
        break;
      case 1:
        atom += "*";
        break;
      case 2:
        atom += "?";
        break;
      case 3:
        atom += "{1,3}";
        break;
      default:
        break;
    }
    p += atom;
  }
  if (rng() % 6 == 0) p = "(?:" + p + ")|" + random_atom(rng);
  if (rng() % 10 == 0) p += R"(\b)";
  if (rng() % 20 == 0) p += "$";
  return p;
}

SubstitutionRule random_rule(std::mt19937& rng) {
  static const std::vector<std::string> kReplacements = {"X", "$&",   "[$1]", "$$",
                                                         "",  "<$&>", "$1$1", "Y"};
  SubstitutionRule r;
  r.match = random_pattern(rng);
  r.replace = kReplacements[rng() % kReplacements.size()];
  if (rng() % 4 == 0) r.flags = "i";
  if (validate_rule(r).has_value()) r.replace = "X";
  return r;
}

std::string random_body(std::mt19937& rng, size_t max_len) {
  static const std::vector<std::string> kPieces = {"a", "b", "c", "A", "B",  " ",  "é",
                                                   "É", "<", ">", ".", "\n", "ab", "\xff"};
  std::string b;
  const size_t len = rng() % (max_len + 1);
  while (b.size() < len) b += kPieces[rng() % kPieces.size()];
  return b;
}

// Random rule sets from `make_rule`, random bodies, random pieces and (for small bodies) every
// split: the stream must agree with the reference. Returns the number of rule sets tried.
template <typename MakeRule, typename MakeBody = decltype(&random_body)>
size_t differential(uint32_t seed, int rounds, MakeRule make_rule, bool want_prefilter,
                    int max_rules = 4, MakeBody make_body = &random_body) {
  std::mt19937 rng(seed);
  size_t rule_sets = 0;
  // A fixed number of rounds (not a time budget), so the floor the callers check holds on any
  // machine and under the sanitizers.
  for (int round = 0; round < rounds; ++round) {
    Rules rules;
    const int n = 1 + static_cast<int>(rng() % static_cast<uint32_t>(max_rules));
    for (int i = 0; i < n; ++i) {
      SubstitutionRule r = make_rule(rng);
      if (!validate_rule(r).has_value()) rules.push_back(r);
    }
    if (rules.empty()) continue;
    CompileResult compiled = RuleSet::compile(rules);
    EXPECT_NE(compiled.rules, nullptr);
    EXPECT_TRUE(compiled.errors.empty());
    if (!compiled.rules) return rule_sets;
    EXPECT_TRUE(compiled.rules->exact_prefixes());
    if (want_prefilter) {
      EXPECT_TRUE(compiled.rules->prefiltered()) << rules[0].match;
    }
    ++rule_sets;
    std::string description;
    for (const auto& r : rules) description += r.match + " -> " + r.replace + " /" + r.flags + "\n";
    for (int b = 0; b < 4; ++b) {
      // Long bodies reach the prefilter's vector loop (16 and 32 bytes at a time).
      const std::string body = make_body(rng, b == 0 ? 12 : b == 3 ? 400 : 60);
      const std::string want = fuzz::detail::reference_substitute(rules, body);
      std::vector<std::string_view> pieces;
      for (size_t pos = 0; pos < body.size();) {
        const size_t len =
            std::min<size_t>(body.size() - pos, 1 + rng() % (body.size() > 1000  ? 2048
                                                             : body.size() > 100 ? 64
                                                                                 : 8));
        pieces.push_back(std::string_view(body).substr(pos, len));
        pos += len;
      }
      EXPECT_EQ(run_pieces(compiled.rules, pieces), want)
          << description << "body: " << fuzz::escape(body);
      EXPECT_EQ(run_interrupted(compiled.rules, pieces, 1 + rng() % 16), want)
          << description << "body: " << fuzz::escape(body) << " interrupted";
      if (body.size() > 12) continue;
      for (size_t i = 0; i <= body.size(); ++i) {
        EXPECT_EQ(run_pieces(compiled.rules, {std::string_view(body).substr(0, i),
                                              std::string_view(body).substr(i)}),
                  want)
            << description << "body: " << fuzz::escape(body) << " split at " << i;
      }
      std::vector<std::string_view> bytes;
      for (size_t i = 0; i < body.size(); ++i) bytes.push_back(std::string_view(body).substr(i, 1));
      EXPECT_EQ(run_pieces(compiled.rules, bytes), want)
          << description << "body: " << fuzz::escape(body) << " byte by byte";
      if (::testing::Test::HasFailure()) return rule_sets;
    }
  }
  return rule_sets;
}

// Runs `check` with every kind of scan this CPU has (the process uses the best one; the others
// run here), then goes back to the best.
template <typename Check>
void at_every_scan_level(Check check) {
  for (auto level :
       {RuleSet::ScanLevel::kAvx2, RuleSet::ScanLevel::kSsse3, RuleSet::ScanLevel::kScalar}) {
    SCOPED_TRACE(static_cast<int>(RuleSet::limit_scan_level_for_testing(level)));
    check();
  }
  RuleSet::limit_scan_level_for_testing(RuleSet::ScanLevel::kAvx2);
}

TEST(SubstitutionPropertyTest, StreamingEqualsTheReference) {
  EXPECT_GE(differential(20240605, 500, random_rule, false), 200u);
}

// A random rule led by one of `leads`, a random rule after it two times in three. Folded, the
// lead `non_ascii` becomes `ascii` (folded literals are ASCII only).
SubstitutionRule led_rule(std::mt19937& rng, const std::vector<std::string>& leads,
                          std::string_view non_ascii, std::string_view ascii) {
  SubstitutionRule r = random_rule(rng);
  std::string lead = leads[rng() % leads.size()];
  if (lead == non_ascii && r.flags == "i") lead = ascii;
  r.match = lead + (rng() % 3 ? "(?:" + r.match + ")" : std::string());
  if (validate_rule(r).has_value()) r.replace = "X";
  return r;
}

// A random rule that starts with a literal, so that the literal prefilter is the one searching.
SubstitutionRule prefixed_rule(std::mt19937& rng) {
  static const std::vector<std::string> kLiterals = {"a",   "ab",     "b",  "é",     "<a",   "A",
                                                     "\\.", "(?:ab)", "c+", "\\bab", "(?i)b"};
  return led_rule(rng, kLiterals, "é", "a");
}

TEST(SubstitutionPropertyTest, PrefilteredStreamingEqualsTheReference) {
  EXPECT_GE(differential(77, 500, prefixed_rule, true), 200u);
}

// A random rule led by an alternation of literals (no single literal prefix), so that the
// prefilter searches for each branch's literal.
SubstitutionRule alternation_rule(std::mt19937& rng) {
  // Literals rare enough in text for the prefilter to take them (kMaxAlternativesRate): none is
  // a single common letter.
  static const std::vector<std::string> kLeads = {
      "(?:ab|cb)", "(ab|bc)",      "(?:a|b)?cb",    "(?:ab|ba)+", "(?:ab|é)",
      "(?:<a|ab)", "\\b(?:ab|bb)", "(?i)(?:ab|bc)", "(?:a|)bc",   "(?:ab|b)(?:c|b)"};
  return led_rule(rng, kLeads, "(?:ab|é)", "(?:ab|ba)");
}

TEST(SubstitutionPropertyTest, AlternativePrefixesEqualTheReference) {
  at_every_scan_level([] { EXPECT_GE(differential(4711, 300, alternation_rule, true), 150u); });
}

// Rules that start with literals long enough that their fingerprint may lie past their start
// (class=", whose rarest bytes are =" ), and bodies made of those literals.
SubstitutionRule long_literal_rule(std::mt19937& rng) {
  static const std::vector<std::string> kLiterals = {
      "class=\"", "<code>", "href=\"", "abcab", "b<a", "ab", "a", "(?i)class", "\\bid="};
  SubstitutionRule r;
  const std::string& literal = kLiterals[rng() % kLiterals.size()];
  r.match = literal + (rng() % 2 ? "(?:" + random_pattern(rng) + ")" : std::string());
  r.replace = "#";
  if (validate_rule(r).has_value()) r.match = literal;
  return r;
}

std::string literal_pieces_body(std::mt19937& rng, size_t max_len) {
  static const std::vector<std::string> kPieces = {
      "class=\"", "<code>", "href=\"", "abcab", "id=", "a",     "b", "c",
      " ",        "<",      ">",       "\"",    "=",   "CLASS", "é"};
  std::string body;
  for (size_t len = rng() % (max_len + 1); body.size() < len;) {
    body += kPieces[rng() % kPieces.size()];
  }
  return body;
}

TEST(SubstitutionPropertyTest, LongLiteralPrefixesStreamEqualTheReference) {
  at_every_scan_level([] {
    EXPECT_GE(differential(1207, 150, long_literal_rule, true, 4, literal_pieces_body), 100u);
  });
}

// A run commits exactly the matches that start before its limit, and the prefiltered search
// stops looking there (its scan ends at the limit plus the fingerprints' offset): for random
// prefiltered rule sets and bodies, at every scan level, a run with each limit from 0 to past
// the end against the matches of an unlimited run. Replacements are one '#', so that each
// match's start is known from the output of a run that commits it alone.
TEST(SubstitutionPropertyTest, RunsCommitExactlyTheMatchesBeforeTheirLimit) {
  std::mt19937 rng(1207);
  size_t checked = 0;
  at_every_scan_level([&] {
    for (int round = 0; round < 150; ++round) {
      Rules rules;
      for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n; ++i) {
        rules.push_back(long_literal_rule(rng));
      }
      CompileResult compiled = RuleSet::compile(rules);
      if (!compiled.rules || !compiled.rules->prefiltered() || !compiled.errors.empty()) continue;
      const RuleSet& set = *compiled.rules;
      const std::string body = literal_pieces_body(rng, 300);
      // The matches one by one: [start, end) each.
      std::vector<std::pair<size_t, size_t>> matches;
      std::string all;
      RuleSet::Run one;
      one.out = &all;
      for (;;) {
        one.commits = 1;
        const size_t from = one.from, out_before = all.size();
        if (set.replace(body, &one) == RuleSet::RunEnd::kNone) break;
        matches.emplace_back(from + (all.size() - out_before - 1), one.from);
      }
      for (size_t limit = 0; limit <= body.size() + 1; ++limit) {
        std::string out;
        RuleSet::Run run;
        run.out = &out;
        run.limit = limit;
        run.commits = 1u << 30;
        RuleSet::RunEnd ended;
        do {
          // A match that starts before the limit and ends past it ends the run (kRegrow: the
          // stream learns its limit anew); the same limit goes on here.
          ended = set.replace(body, &run);
        } while (ended == RuleSet::RunEnd::kRegrow);
        size_t before = 0;  // the matches that start before the limit
        while (before < matches.size() && matches[before].first < limit) ++before;
        ASSERT_EQ(run.replacements, before)
            << "limit " << limit << " body " << fuzz::escape(body) << " rule " << rules[0].match;
        ASSERT_EQ(run.from, before == 0 ? 0 : matches[before - 1].second) << "limit " << limit;
        ASSERT_EQ(out, all.substr(0, out.size()));
        ASSERT_TRUE(ended == RuleSet::RunEnd::kNone || ended == RuleSet::RunEnd::kHeld);
        if (ended == RuleSet::RunEnd::kHeld) {
          ASSERT_GE(run.held_start, limit);
        }
      }
      ++checked;
    }
  });
  EXPECT_GE(checked, 300u);
}

// Many literal rules (more than the prefilter's 8 buckets, so that buckets are shared), most of
// them nothing but a literal (matched without RE2 where their bytes are), folded or not, over
// bodies with KELVIN SIGN and LONG S, which RE2 folds to k and s but a byte comparison cannot.
TEST(SubstitutionPropertyTest, ManyLiteralRulesEqualTheReference) {
  auto literal_rule = [](std::mt19937& rng) {
    static const std::vector<std::string> kTails = {"", "", "", "+", "\\b", "[kc]"};
    SubstitutionRule r;
    r.match = std::string(1, "abc"[rng() % 3]);
    if (rng() % 6 == 0) r.match = "(?:(?i)" + r.match + ")";  // folding that ends with its group
    const size_t len = rng() % 5;
    for (size_t i = 0; i < len; ++i) r.match += "abcks"[rng() % 5];
    r.match += kTails[rng() % kTails.size()];
    if (rng() % 3 == 0) r.flags = "i";
    r.replace = rng() % 2 ? "<$&>" : "#";
    return r;
  };
  auto body = [](std::mt19937& rng, size_t max_len) {
    static const std::vector<std::string> kPieces = {
        "a", "b", "c", "k", "s", "K", "S", "A", " ", "ab", "abc", "\u212A", "\u017F", "cab"};
    std::string b;
    const size_t len = rng() % (max_len * 4 + 1);
    while (b.size() < len) b += kPieces[rng() % kPieces.size()];
    return b;
  };
  at_every_scan_level(
      [&] { EXPECT_GE(differential(4242, 120, literal_rule, false, 24, body), 100u); });
}

// Long bodies (up to 4 KB) in pieces up to 2 KiB, so that one step searches a window of many
// candidates: prefixes whose fingerprint lies inside them (`aaaaaqz`: 4 bytes in, beside `aa`
// at the same start), matches that run far past their start (`ab[^!]*!`), candidates at every
// distance. Every kind of scan.
TEST(SubstitutionPropertyTest, LongBodiesInLargePiecesEqualTheReference) {
  auto rule = [](std::mt19937& rng) {
    static const std::vector<std::string> kRules = {
        "the",      "\\bthe\\b", "class=\"[a-z-]+\"",
        "<code>",   "aqz",       "lorem ipsum",
        "ab[^!]*!", "(?i)QZ",    "[Cc]argo",
        "x[yz]+",   "aaaaaqz",   "aa"};  // a fingerprint 4 bytes in; a rule at the same start
    SubstitutionRule r;
    r.match = kRules[rng() % kRules.size()];
    r.replace = rng() % 2 ? "<$&>" : "#";
    return r;
  };
  auto body = [](std::mt19937& rng, size_t max_len) {
    static const std::vector<std::string> kPieces = {
        "the ",    "class=\"x-y\" ", "<code>", "aqz", "lorem ipsum ", "ab", "!",  "Cargo ",
        "cargo.",  "xyzzy",          "qZ",     "   ", "\n",           "é",  "th", "e",
        "aaaaaqz", "aaaaaqz",        "aa"};
    std::string b;
    const size_t len = rng() % (max_len * 10 + 1);
    while (b.size() < len) b += kPieces[rng() % kPieces.size()];
    return b;
  };
  at_every_scan_level([&] { EXPECT_GE(differential(5150, 120, rule, true, 6, body), 100u); });
}

// The memo's claim (docs/substitutions.md, "The memo"): with leftmost, then longest, then
// earliest-rule wins, the rules that never won a match over a body can be left out without
// changing the output. Random rule sets (literal-led and not, so that the full set and its
// subsets take the DFA or the prefilter path in every combination), random bodies in random
// pieces: the stream names exactly the rules that won (the reference's winners), and the rule set
// of only those rules — or of those plus any others — gives the same output and names the same
// winners. Leaving out a rule that won does change the output in some cases, which shows the
// comparison can tell.
TEST(SubstitutionPropertyTest, RulesThatNeverWonCanBeLeftOut) {
  std::mt19937 rng(51);
  auto make_rule = [](std::mt19937& rng) {
    SubstitutionRule r = random_rule(rng);
    if (rng() % 2 == 0) {
      static const std::vector<std::string> kLiterals = {"a", "ab", "b", "<a", "\\.", "c+"};
      r.match = kLiterals[rng() % kLiterals.size()] + (rng() % 3 ? "(?:" + r.match + ")" : "");
      if (validate_rule(r).has_value()) r.replace = "X";
    }
    return r;
  };
  auto random_pieces = [&rng](std::string_view body) {
    std::vector<std::string_view> pieces;
    for (size_t pos = 0; pos < body.size();) {
      const size_t len = std::min<size_t>(body.size() - pos, 1 + rng() % 16);
      pieces.push_back(body.substr(pos, len));
      pos += len;
    }
    return pieces;
  };
  // A fixed number of rounds from a fixed seed (not a time budget): the same cases on every
  // machine and under the sanitizers, so the floors below cannot fail from slowness.
  size_t strict_subsets = 0, supersets = 0, winner_left_out_changed = 0, cases = 0;
  for (int round = 0; round < 260; ++round) {
    Rules rules;
    const int n = 2 + rng() % 5;
    for (int i = 0; i < n; ++i) {
      SubstitutionRule r = make_rule(rng);
      if (!validate_rule(r).has_value()) rules.push_back(r);
    }
    if (rules.size() < 2) continue;
    CompileResult compiled = RuleSet::compile(rules);
    ASSERT_NE(compiled.rules, nullptr);
    ASSERT_TRUE(compiled.errors.empty());
    const auto& all = compiled.rules;
    std::string description;
    for (const auto& r : rules) description += r.match + " -> " + r.replace + " /" + r.flags + "\n";
    for (int b = 0; b < 3; ++b) {
      const std::string body = random_body(rng, b == 2 ? 300 : 40);
      uint64_t winners = 0;
      const std::string want = fuzz::detail::reference_substitute(rules, body, &winners);
      const std::string context = description + "body: " + fuzz::escape(body);
      ++cases;
      SubstitutionStreamStats stats;
      ASSERT_EQ(run_pieces(all, random_pieces(body), {}, &stats), want) << context;
      ASSERT_EQ(stats.rules_matched, winners) << context;
      const auto subset = all->subset(winners);
      if (winners == 0) {
        EXPECT_EQ(subset, nullptr);
        EXPECT_EQ(want, body) << context;
        continue;
      }
      ASSERT_NE(subset, nullptr) << context;
      ASSERT_EQ(subset->all_rules(), winners);
      if (winners != all->all_rules()) ++strict_subsets;
      SubstitutionStreamStats subset_stats;
      ASSERT_EQ(run_pieces(subset, random_pieces(body), {}, &subset_stats), want)
          << context << "\nwinners " << winners;
      ASSERT_EQ(subset_stats.rules_matched, winners) << context;
      // Any superset of the winners: the same.
      const RuleBits more = winners | (static_cast<RuleBits>(rng()) & all->all_rules());
      if (more != winners && more != all->all_rules()) {
        ++supersets;
        ASSERT_EQ(run_pieces(all->subset(more), random_pieces(body)), want)
            << context << "\nsuperset " << more;
      }
      // Leaving out a winner is another matter (the comparison above is not vacuous).
      const RuleBits lowest = winners & (~winners + 1);
      const auto without = all->subset(winners & ~lowest);
      const std::string changed = without ? run_pieces(without, {body}) : body;
      if (changed != want) ++winner_left_out_changed;
    }
  }
  EXPECT_GE(cases, 600u);
  EXPECT_GE(strict_subsets, 100u) << "too few cases where some rule never won";
  EXPECT_GE(supersets, 50u);
  EXPECT_GE(winner_left_out_changed, 100u);
}

// ---- pages dense with matches (issue #18) ----

// Rules of the shapes the linear matcher takes (linear_rule.h), and some it refuses: literals,
// classes (negated, folded, with k and s), repeats, groups, \b at either end, (?i).
SubstitutionRule random_linear_rule(std::mt19937& rng) {
  static const std::vector<std::string> kAtoms = {"a",
                                                  "b",
                                                  "c",
                                                  "k",
                                                  "s",
                                                  "<",
                                                  ">",
                                                  "=",
                                                  "\"",
                                                  "-",
                                                  "é",
                                                  "[a-z]",
                                                  "[a-z-]",
                                                  "[^\"]",
                                                  "[^<>]",
                                                  "[0-9]",
                                                  R"(\d)",
                                                  R"(\w)",
                                                  R"(\s)",
                                                  "[ab]",
                                                  "[Cc]",
                                                  "[^a]",
                                                  ".",
                                                  R"(\W)",
                                                  R"(\.)",
                                                  R"(\x41)",
                                                  "[k]",
                                                  "[[:alpha:]]",
                                                  "[^[:alpha:]]",
                                                  "[é-]",
                                                  R"([\]a])"};
  static const std::vector<std::string> kRepeats = {"",  "",      "",    "*",     "+",
                                                    "?", "{1,3}", "{2}", "{0,2}", "{2,}"};
  std::vector<std::string> atoms;
  const int n = 1 + static_cast<int>(rng() % 5);
  for (int i = 0; i < n; ++i) {
    std::string atom = kAtoms[rng() % kAtoms.size()];
    if (atom != "é") atom += kRepeats[rng() % kRepeats.size()];
    atoms.push_back(atom);
  }
  // A group around a run of atoms, capturing or not.
  if (rng() % 2 == 0) {
    const size_t first = rng() % atoms.size();
    const size_t last = first + rng() % (atoms.size() - first);
    atoms[first] = (rng() % 3 ? "(" : "(?:") + atoms[first];
    atoms[last] += ")";
  }
  SubstitutionRule r;
  if (rng() % 4 == 0) r.match += R"(\b)";
  for (const auto& a : atoms) r.match += a;
  if (rng() % 4 == 0) r.match += R"(\b)";
  if (rng() % 6 == 0) r.match = "(?i)" + r.match;
  if (rng() % 5 == 0) r.flags = "i";
  static const std::vector<std::string> kReplacements = {"X", "$&", "[$1]", "<$1|$&>", ""};
  r.replace = kReplacements[rng() % kReplacements.size()];
  if (validate_rule(r).has_value()) r.replace = "X";
  return r;
}

// Bodies where such rules match every few bytes, with the bytes that matter to them: word and
// non-word bytes, quotes, non-ASCII characters (KELVIN SIGN and LONG S fold to k and s), an
// invalid UTF-8 byte.
std::string dense_body(std::mt19937& rng, size_t max_len) {
  static const std::vector<std::string> kPieces = {
      "a",    "b",  "c",   "k",        "K",          "s",     "S",  "C", "<",      ">",
      "=",    "\"", "-",   "1",        "42",         " ",     "\n", "é", "\u212A", "\u017F",
      "\xff", "ab", "cab", "class=\"", "<a href=\"", "Cargo", "A",  "_"};
  std::string b;
  const size_t len = rng() % (max_len * 2 + 1);
  while (b.size() < len) b += kPieces[rng() % kPieces.size()];
  return b;
}

// The linear matcher against RE2 itself, position by position: the same longest match, the
// same groups, wherever it does not answer "unknown" (and it must answer at most positions).
// Every other round's bodies are long (up to 400 bytes), so that repeated steps take runs of 16
// bytes and more: the vector walk (linear_rule.h), and with the vector scans off, the byte loop.
void linear_rules_agree_with_re2(unsigned seed) {
  std::mt19937 rng(seed);
  size_t linear_rules = 0, refused = 0, positions = 0, unknown = 0, matches = 0;
  for (int round = 0; round < 1500; ++round) {
    const SubstitutionRule rule = random_linear_rule(rng);
    if (validate_rule(rule).has_value()) continue;
    const auto linear = LinearRule::compile(rule.match, rule.flags == "i");
    if (!linear) {
      ++refused;
      continue;
    }
    ++linear_rules;
    RE2::Options o;
    o.set_longest_match(true);
    o.set_log_errors(false);
    o.set_case_sensitive(rule.flags != "i");
    const RE2 re(rule.match, o);
    ASSERT_TRUE(re.ok()) << rule.match;
    const int ngroups = std::min(9, re.NumberOfCapturingGroups());
    for (int b = 0; b < 3; ++b) {
      const std::string body = dense_body(rng, round % 2 == 0 ? 40 : 200);
      for (size_t at = 0; at <= body.size(); ++at) {
        ++positions;
        size_t end = 0;
        GroupSpans spans;
        const auto got = linear->match(body, at, &end, &spans);
        if (got == LinearRule::Result::kUnknown) {
          ++unknown;
          continue;
        }
        re2::StringPiece m[10];
        const bool want = re.Match(body, at, body.size(), RE2::ANCHOR_START, m, ngroups + 1);
        const std::string where = rule.match + " /" + rule.flags + " at " + std::to_string(at) +
                                  " of " + fuzz::escape(body);
        ASSERT_EQ(got == LinearRule::Result::kMatch, want) << where;
        if (!want) continue;
        ++matches;
        ASSERT_EQ(end, at + m[0].size()) << where;
        for (int g = 1; g <= ngroups; ++g) {
          ASSERT_NE(m[g].data(), nullptr) << where << " group " << g;
          EXPECT_EQ(spans.begin[g], static_cast<size_t>(m[g].data() - body.data()))
              << where << " group " << g;
          EXPECT_EQ(spans.end[g] - spans.begin[g], m[g].size()) << where << " group " << g;
        }
      }
    }
  }
  EXPECT_GE(linear_rules, 400u) << "too few rules of the linear shape";
  EXPECT_GE(refused, 100u) << "the generator should also produce rules the matcher refuses";
  EXPECT_GE(matches, 3000u);
  EXPECT_LT(unknown * 5, positions) << "the matcher should decide most positions itself";
}

TEST(SubstitutionLinearRuleTest, AgreesWithRe2AtEveryPosition) {
  at_every_scan_level([] { linear_rules_agree_with_re2(1812); });
}

TEST(SubstitutionLinearRuleTest, ShapesTakenAndRefused) {
  for (const char* p : {R"(class="[a-z-]+")", R"(UA-[0-9]+-[0-9]+)", R"(\bcrate\b)", "[Cc]argo",
                        R"re(href="http://([^"]*)")re", R"(https://github\.com/([a-z0-9-]+))",
                        "<code>", R"(\b[a-z]+\b)", "éx", R"((?i)registry)"}) {
    EXPECT_NE(LinearRule::compile(p, false), nullptr) << p;
  }
  // Repeats whose bytes can start what follows (the greedy walk would not be the longest
  // match), alternatives, repeated groups, anchors, assertions inside, lazy repeats.
  for (const char* p : {"[a-z]*a", R"(\d+\d)", "a|b", "(ab)+", "^a", "a$", R"(a\bb)", "a+?",
                        R"([a-z-]+\b)", R"(\Bx)", R"(x\pL)", "é+"}) {
    EXPECT_EQ(LinearRule::compile(p, false), nullptr) << p;
  }
  EXPECT_EQ(LinearRule::compile(R"([a-z]+\b)", false)->prefix().size(), 1u);
  EXPECT_EQ(LinearRule::compile(R"(class="[a-z-]+")", false)->prefix().size(), 8u);
  // Folded k and s may be KELVIN SIGN and LONG S: the prefix stops before them.
  EXPECT_EQ(LinearRule::compile("ask", true)->prefix().size(), 1u);
}

// A rule whose prefix is all of it (every step exact, of a fixed count, within 16 bytes) has a
// fixed length: the engine then matches it where the prefilter compared its prefix, once its \b
// hold, without the walk. At the edges (16 and 17 bytes, a repeat that fits or not, a variable
// step, folded s, a group) the engine agrees with the reference at every scan level.
TEST(SubstitutionLinearRuleTest, FixedLengthWhenThePrefixIsTheWholeRule) {
  auto fixed = [](const char* pattern, bool fold = false) {
    const auto rule = LinearRule::compile(pattern, fold);
    EXPECT_NE(rule, nullptr) << pattern;
    return rule ? rule->fixed_length() : size_t{99};
  };
  EXPECT_EQ(fixed("<code>"), 6u);
  EXPECT_EQ(fixed(R"(\bcrate\b)"), 5u);
  EXPECT_EQ(fixed("[Cc]argo"), 5u);
  EXPECT_EQ(fixed("abcdefghijklmnop"), 16u);
  EXPECT_EQ(fixed("abcdefghijklmnopq"), 0u);  // past the 16 bytes of a prefix: walked
  EXPECT_EQ(fixed("xa{15}"), 16u);
  EXPECT_EQ(fixed("xa{16}"), 0u);
  EXPECT_EQ(fixed("ab+"), 0u);
  EXPECT_EQ(fixed("ask", true), 0u);  // folded s may be LONG S: not exact
  EXPECT_EQ(fixed("qz", true), 2u);
  EXPECT_EQ(fixed("(ab)c"), 3u);  // the rule set walks it anyway when the replacement names $1

  const std::vector<SubstitutionRule> rules = {
      {"abcdefghijklmnop", "<16>", ""},
      {"abcdefghijklmnopq", "<17>", ""},
      {"xa{15}", "<xa15>", ""},
      {R"(\bqz\b)", "<qz>", "i"},
      {"(ab)c", "[$1]", ""},
      {"[Cc]argo", "<cargo>", ""},
      {R"(\bcrate\b)", "<crate>", ""},
      {"ab+", "<ab+>", ""},
  };
  const auto compiled = RuleSet::compile(rules);
  ASSERT_TRUE(compiled.errors.empty());
  ASSERT_TRUE(compiled.rules->prefiltered());
  std::mt19937 rng(23);
  const std::vector<std::string> kPieces = {"abcdefghijklmnop",
                                            "abcdefghijklmnopq",
                                            "abcdefghijklmno",
                                            "x",
                                            "a",
                                            "xaaaaaaaaaaaaaaa",
                                            " qz ",
                                            "Qz",
                                            "qzq",
                                            "abc",
                                            "ab",
                                            "Cargo",
                                            "crate",
                                            " crate ",
                                            "crates",
                                            "_",
                                            "é",
                                            "\xff"};
  at_every_scan_level([&] {
    for (int round = 0; round < 20; ++round) {
      std::string body;
      while (body.size() < 3000) body += kPieces[rng() % kPieces.size()];
      const std::string want = fuzz::detail::reference_substitute(rules, body);
      std::vector<std::string_view> pieces;
      for (size_t pos = 0; pos < body.size();) {
        const size_t n = 1 + rng() % 40;
        pieces.push_back(std::string_view(body).substr(pos, n));
        pos += n;
      }
      EXPECT_EQ(run_pieces(compiled.rules, pieces), want);
      EXPECT_EQ(run_interrupted(compiled.rules, pieces, 1 + rng() % 64), want);
    }
  });
}

// The stream with linear rules (and others) over bodies dense with matches, against the
// reference: the prefilter's candidates, the matcher's groups and its unknowns, RE2 where it
// refuses, all streamed in random pieces and interrupted calls.
TEST(SubstitutionPropertyTest, DenseMatchesEqualTheReference) {
  size_t prefiltered = 0;
  auto rule = [&](std::mt19937& rng) { return random_linear_rule(rng); };
  EXPECT_GE(differential(1803, 400, rule, false, 6, &dense_body), 300u);
  // The same rules led by a literal, so that the prefilter runs them at its candidates.
  auto led = [&](std::mt19937& rng) {
    SubstitutionRule r = random_linear_rule(rng);
    static const std::vector<std::string> kLeads = {"c", "<", "ab", "\"", "[Cc]", "k", "=\""};
    r.match = kLeads[rng() % kLeads.size()] + r.match;
    if (r.match.find("(?i)") != std::string::npos) r.flags = "i";
    if (validate_rule(r).has_value()) r.replace = "X";
    ++prefiltered;
    return r;
  };
  EXPECT_GE(differential(1804, 400, led, false, 6, &dense_body), 300u);
  EXPECT_GT(prefiltered, 0u);
}

// The benchmark's dense rules over a dense page: the engine, with the linear matcher and the
// prefilter, equals the reference (pieces of the proxy's 16 KiB and odd sizes).
TEST(SubstitutionPropertyTest, DenseBenchmarkRulesEqualTheReference) {
  const Rules rules = dense_benchmark_rules();
  auto set = compile_ok(rules);
  ASSERT_NE(set, nullptr);
  EXPECT_TRUE(set->prefiltered());
  for (size_t i = 0; i < set->size(); ++i) EXPECT_NE(set->linear(i), nullptr) << rules[i].match;
  std::mt19937 rng(18);
  static const std::vector<std::string> kPieces = {"<p class=\"hljs-string\">",
                                                   "Cargo ",
                                                   "cargo",
                                                   "crate ",
                                                   "crates ",
                                                   "a crate.",
                                                   "dependency",
                                                   "REGISTRY ",
                                                   "Registry",
                                                   "<code>",
                                                   "</code>",
                                                   "UA-1234-5 ",
                                                   "<a href=\"http://example.org/caf\u00e9\">",
                                                   "<a href=\"https://github.com/rust-lang/x\">",
                                                   "https://doc.rust-lang.org/std ",
                                                   "class=\"\"",
                                                   "class=\"a_b\"",
                                                   "\u212Aelvin ",
                                                   "\xff",
                                                   "text with words ",
                                                   "\n"};
  std::string body;
  while (body.size() < 200000) body += kPieces[rng() % kPieces.size()];
  const std::string want = fuzz::detail::reference_substitute(rules, body);
  for (size_t piece : {size_t{16384}, size_t{1000}, size_t{77}}) {
    std::vector<std::string_view> pieces;
    for (size_t pos = 0; pos < body.size(); pos += piece) {
      pieces.push_back(std::string_view(body).substr(pos, piece));
    }
    EXPECT_EQ(run_pieces(set, pieces), want) << "pieces of " << piece;
  }
}

TEST(SubstitutionPrefixTest, LiteralPrefixes) {
  EXPECT_EQ(literal_prefix(R"(example\.com)", false).bytes, "example.com");
  EXPECT_EQ(literal_prefix(R"(\bcat\b)", false).bytes, "cat");
  EXPECT_EQ(literal_prefix("UA-[0-9]+", false).bytes, "UA-");
  EXPECT_EQ(literal_prefix("ab+c", false).bytes, "ab");
  EXPECT_EQ(literal_prefix("(?:ab)c", false).bytes, "abc");
  EXPECT_EQ(literal_prefix("javascript", true).bytes, "java");  // s folds to U+017F
  EXPECT_TRUE(literal_prefix("(?i)abc", false).fold);
  EXPECT_EQ(literal_prefix("a|b", false).bytes, "");
  EXPECT_EQ(literal_prefix("[ab]c", false).bytes, "");
  EXPECT_EQ(literal_prefix("a?b", false).bytes, "");
  EXPECT_EQ(literal_prefix("k", true).bytes, "");  // k folds to KELVIN SIGN
  EXPECT_EQ(literal_prefix("ab(?i)c", false).bytes, "ab");
  // The whole pattern as a literal, when it is one: folded k and s kept (a byte comparison
  // accepts their ASCII forms; RE2 decides elsewhere), no assertion, no repeat.
  EXPECT_EQ(literal_prefix(R"(example\.com)", false).whole, "example.com");
  EXPECT_EQ(literal_prefix("javascript", true).whole, "javascript");
  EXPECT_EQ(literal_prefix("(?i)(?:ab)c", false).whole, "abc");
  EXPECT_EQ(literal_prefix("é", false).whole, "é");
  EXPECT_EQ(literal_prefix("é", true).whole, "");
  EXPECT_EQ(literal_prefix(R"(\bcat\b)", false).whole, "");
  EXPECT_EQ(literal_prefix("ab+", false).whole, "");
  EXPECT_EQ(literal_prefix("ab|c", false).whole, "");
  EXPECT_EQ(literal_prefix("a(b)", false).whole, "ab");  // its groups come from RE2 in expand()
  // (?i) inside a group folds that group only: the whole literal cannot say so.
  EXPECT_EQ(literal_prefix("(?:(?i)a)bc", false).whole, "");
  EXPECT_EQ(literal_prefix("((?i)a)bc", false).whole, "");
}

// The literals one of which begins every match, for rules without a single literal prefix.
TEST(SubstitutionPrefixTest, LiteralAlternatives) {
  using Set = std::vector<std::string>;
  auto literals = [](std::string_view pattern, bool fold = false) {
    Set out = literal_alternatives(pattern, fold, 16, 16).literals;
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::vector<std::pair<std::string, Set>> table = {
      {R"((www\.)?example\.com)", {"example.com", "www.example.com"}},
      {R"((?:http|ftp)s?://)", {"ftp://", "ftps://", "http://", "https://"}},
      {"cat|dog", {"cat", "dog"}},
      {R"(\bfoo\b|bar)", {"bar", "foo"}},
      {"(a|b)+c", {"a", "b"}},  // a non-empty match of (a|b)+ begins with a or b
      {"x*foo", {"foo", "x"}},  // x* may take nothing
      {"(?:a|b){0}c", {"c"}},   // {0} matches only the empty string
      {"ab(c|d)", {"abc", "abd"}},
      {"(?:ab|a)c", {"abc", "ac"}},
      {"(?:a|ab)", {"a"}},     // "ab" begins with "a": the shorter covers it
      {"(|a)b", {"ab", "b"}},  // an empty branch
      {"(aaaaaaaaaaaaaaaaaaaa|b)", {"aaaaaaaaaaaaaaaa", "b"}},  // cut at 16 bytes
      // None: a class or `.` may begin a match, the pattern may match nothing, or a fold starts
      // inside it.
      {"(a|[bc])d", {}},
      {".foo|bar", {}},
      {"a?", {}},
      {"(?:a|b)*", {}},
      {"a(?i)b|c", {}},
      {"(?i:a|b)c", {}},
      {"[ab]c", {}},
      // A leading (?i) reaches every branch (the parser carries it); one inside a branch, a flag
      // group or \n leaves a match's beginning unknown.
      {"(?:(?i)a|b)c", {}},
      {"(?s:ab)|c", {}},
      {"\\n|a", {}},
      {"\\Qa.b\\E|c", {"a.b", "c"}},
      {"a{2,3}|b", {"a", "b"}},
      {R"((?:www\.)?doc\.rust-lang\.org)", {"doc.rust-lang.or", "www.doc.rust-lan"}},
  };
  for (const auto& [pattern, want] : table) EXPECT_EQ(literals(pattern), want) << pattern;
  // Folded: ASCII only, and a literal stops before k and s (RE2 folds them to KELVIN SIGN and
  // LONG S).
  EXPECT_EQ(literals("(colou?r)", true), (Set{"color", "colour"}));
  EXPECT_EQ(literals("(?:ask|bar)", true), (Set{"a", "bar"}));
  EXPECT_EQ(literals("(?:é|a)b", true), Set{});
  EXPECT_EQ(literals("(?:é|a)b", false), (Set{"ab", "éb"}));
  EXPECT_TRUE(literal_alternatives("(?i)(a|b)", false, 16, 16).fold);
  EXPECT_FALSE(literal_alternatives("(a|b)", false, 16, 16).fold);
  EXPECT_EQ(literals("(?i)(a|b)c"), (Set{"ac", "bc"}));
  EXPECT_EQ(literals("(?i)a|b"), (Set{"a", "b"}));
  EXPECT_TRUE(literal_alternatives("(?i)a|b", false, 16, 16).fold);
  EXPECT_EQ(literals("(?:ssl|tls)", true), Set{});  // s begins a branch
  EXPECT_EQ(literals("(?:a|Ab)", true), Set{"a"});  // Ab begins with a, folded
  // More than the cap: the product stops growing where it would pass it.
  EXPECT_EQ(literals("(a|b)(c|d)(e|f)(g|h)(i|j)").size(), 16u);
  EXPECT_EQ(literal_alternatives("a|b|c", false, 2, 16).literals, Set{});
}

TEST(SubstitutionPrefixTest, RulesWithAlternativesKeepThePrefilter) {
  // Until the alternatives, one such rule turned the prefilter off for the whole set.
  auto set = compile_ok({{R"((www\.)?example\.com)", "X", ""},
                         {"(?:cat|dog)s?", "pet", "i"},
                         {"[Cc]argo", "Freight", ""}});
  ASSERT_NE(set, nullptr);
  EXPECT_TRUE(set->prefiltered());
  expect_all_splits({{R"((www\.)?example\.com)", "X", ""}, {"(?:cat|dog)s?", "pet", "i"}},
                    "www.example.com example.com wwwexample.com CATS Dog bobcat",
                    "X X wwwX pet pet bobpet");
  // A rule whose matches may begin anywhere still turns it off.
  auto any = compile_ok({{R"((www\.)?example\.com)", "X", ""}, {"(?:.x|y)", "Y", ""}});
  ASSERT_NE(any, nullptr);
  EXPECT_FALSE(any->prefiltered());
  // So do more prefixes than the buckets hold (8 rules of 16 literals each).
  Rules many;
  for (char c = 'a'; c < 'i'; ++c) {
    many.push_back({std::string("(a|b)(c|d)(e|f)(g|h)") + c, "X", ""});
  }
  auto full = compile_ok(many);
  ASSERT_NE(full, nullptr);
  EXPECT_FALSE(full->prefiltered());
  EXPECT_EQ(run_pieces(full, {"adegb bcfhh"}), "X X");
  // Exactly as many as the buckets hold (4 rules of 16), then one more.
  many.resize(4);
  auto at_cap = compile_ok(many);
  ASSERT_NE(at_cap, nullptr);
  EXPECT_TRUE(at_cap->prefiltered());
  EXPECT_EQ(run_pieces(at_cap, {"adega bcfhd bdfhe"}), "X X bdfhe");
  many.push_back({"zzz", "Z", ""});
  auto past_cap = compile_ok(many);
  ASSERT_NE(past_cap, nullptr);
  EXPECT_FALSE(past_cap->prefiltered());
  EXPECT_EQ(run_pieces(past_cap, {"adega zzz bcfhd"}), "X Z X");
  // Literals that are common single letters would make a candidate of most bytes, each an RE2
  // call: the joined DFA is cheaper then.
  auto common = compile_ok({{"(a|b)+c", "X", ""}, {"<code>", "<c>", ""}});
  ASSERT_NE(common, nullptr);
  EXPECT_FALSE(common->prefiltered());
  EXPECT_EQ(run_pieces(common, {"abac <code> ca"}), "X <c> ca");
}

// A rule led by a common class makes a candidate of most bytes (every letter for \w+@...): ten
// times slower than the joined DFA on the dense page, so such a set goes to the DFA.
TEST(SubstitutionPrefixTest, CommonFingerprintsLeaveTheSetToTheDfa) {
  const Rules email = {{R"(\w+@example\.com)", "[email]", ""}, {"<code>", "<c>", ""}};
  auto common = compile_ok(email);
  ASSERT_NE(common, nullptr);
  EXPECT_FALSE(common->prefiltered());
  expect_all_splits(email, "<code>mail ann.lee@example.com or bob@example.org</code>",
                    "<c>mail ann.[email] or bob@example.org</code>");
  // A rule RE2 runs, whose single literal is common (a quote: a candidate at every attribute),
  // looks for the literals through its alternation instead; a rare single literal stays.
  auto quoted = compile_ok({{R"re("(?:foo|bar)")re", "Q", ""}});
  ASSERT_NE(quoted, nullptr);
  EXPECT_EQ(quoted->prefix_count(), 2u);
  EXPECT_EQ(run_pieces(quoted, {R"(a="foo" b="x" c="bar" "foo)"}), R"(a=Q b="x" c=Q "foo)");
  auto long_literal = compile_ok({{R"re("foo(?:a|b)")re", "Q", ""}});
  ASSERT_NE(long_literal, nullptr);
  EXPECT_EQ(long_literal->prefix_count(), 1u);
  // Digits are rare enough: a walk at each is cheaper than the DFA.
  auto digits = compile_ok({{"[0-9]+px", "Npx", ""}, {"<code>", "<c>", ""}});
  ASSERT_NE(digits, nullptr);
  EXPECT_TRUE(digits->prefiltered());
  EXPECT_EQ(run_pieces(digits, {"<code>12px 3 4px</code>"}), "<c>Npx 3 Npx</code>");
}

// Every anchored match of a random pattern, at every position of random bodies, begins with one
// of the literals literal_alternatives gives (compared folded when they are): what the prefilter
// relies on, checked against RE2 directly rather than through the engine's output.
TEST(SubstitutionPrefixTest, EveryMatchBeginsWithAnAlternative) {
  std::mt19937 rng(2026);
  size_t patterns = 0, matches = 0;
  for (int round = 0; round < 3000; ++round) {
    SubstitutionRule r = rng() % 2 ? random_rule(rng) : alternation_rule(rng);
    if (validate_rule(r).has_value()) continue;
    const bool fold = r.flags == "i";
    const auto alternatives = literal_alternatives(r.match, fold, 16, 16);
    if (alternatives.literals.empty()) continue;
    ++patterns;
    RE2::Options options;
    options.set_longest_match(true);
    options.set_case_sensitive(!fold);
    options.set_log_errors(false);
    const RE2 re(r.match, options);
    ASSERT_TRUE(re.ok()) << r.match;
    auto begins = [&](std::string_view text, size_t at, const std::string& literal) {
      if (literal.size() > text.size() - at) return false;
      for (size_t i = 0; i < literal.size(); ++i) {
        const auto a = static_cast<unsigned char>(text[at + i]);
        const auto b = static_cast<unsigned char>(literal[i]);
        if (a != b && !(alternatives.fold && a < 0x80 && std::tolower(a) == std::tolower(b))) {
          return false;
        }
      }
      return true;
    };
    for (int b = 0; b < 3; ++b) {
      const std::string body = random_body(rng, 40);
      for (size_t at = 0; at < body.size(); ++at) {
        re2::StringPiece m;
        if (!re.Match(body, at, body.size(), RE2::ANCHOR_START, &m, 1) || m.empty()) continue;
        ++matches;
        bool found = false;
        for (const auto& literal : alternatives.literals)
          found = found || begins(body, at, literal);
        ASSERT_TRUE(found) << r.match << " /" << r.flags << " matches \"" << std::string(m)
                           << "\" at " << at << " of " << fuzz::escape(body);
      }
    }
  }
  EXPECT_GE(patterns, 500u);
  EXPECT_GE(matches, 2000u);
}

TEST(SubstitutionSemanticsTest, CaseFoldingInsideAGroupEndsWithTheGroup) {
  expect_all_splits({{"(?:(?i)a)bc", "X", ""}}, "aBC Abc abC ABC abc", "aBC X abC ABC X");
  expect_all_splits({{"((?i)a)bc", "[$1]", ""}}, "aBC Abc", "aBC [A]");
}

TEST(SubstitutionSemanticsTest, PrefilterKeepsUnicodeFolding) {
  // (?i)k matches KELVIN SIGN (U+212A) and (?i)s LONG S (U+017F) in RE2: a byte prefilter on
  // ASCII letters must not skip them.
  expect_all_splits({{"kelvin", "K", "i"}, {"sun", "S", "i"}}, "\u212Aelvin \u017Fun", "K S");
}

// Seeds for the fuzz target are replayed by tests/fuzz_replay_test.cc too; this keeps the
// substitution seeds checked even when that file's target list changes.
TEST(SubstitutionFuzzSeedsTest, CorpusPasses) {
  namespace fs = std::filesystem;
  size_t files = 0;
  for (const auto& entry :
       fs::directory_iterator(fs::path(TIDEGATE_SOURCE_DIR) / "fuzz" / "corpus" / "substitution")) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(fuzz::run_substitution(reinterpret_cast<const uint8_t*>(input.data()), input.size()),
              "")
        << entry.path();
    ++files;
  }
  EXPECT_GE(files, 10u);
}

}  // namespace
}  // namespace tidegate::dataplane::filters
