#pragma once
// Substitution rules for response bodies (issue #5), compiled once per configuration snapshot.
//
// A RuleSet is immutable after compile() and shared across worker threads through
// std::shared_ptr<const RuleSet>; each response gets its own SubstitutionStream (stream.h).
// Semantics and limits: docs/substitutions.md.

#include <re2/re2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "filters/substitution/linear_rule.h"
#include "substitution/rule.h"

namespace tidegate::dataplane::filters {

// Rules, their limits and their validation live in lib/substitution/rule.h, shared with the
// controller so that both sides agree on which rules are valid.
using SubstitutionRule = substitution::Rule;
using RuleError = substitution::RuleError;
using substitution::validate_rule;
inline constexpr size_t kMaxSubstitutionRules = substitution::kMaxRules;
inline constexpr size_t kMaxPatternBytes = substitution::kMaxPatternBytes;
inline constexpr size_t kMaxReplacementBytes = substitution::kMaxReplacementBytes;
// A set of rules is a bitmap (bit i: rule i of the rule set compiled from the annotation's list):
// the memo of the rules that matched a resource, and RuleSet::subset().
using RuleBits = uint64_t;
static_assert(kMaxSubstitutionRules <= 64, "a RuleBits bitmap holds one bit per rule");

class RuleSet;

struct CompileResult {
  // The valid rules, in their original order; null when no rule is valid.
  std::shared_ptr<const RuleSet> rules;
  // One entry per rejected rule, in order. Rejected rules are left out; the others still apply.
  std::vector<RuleError> errors;
};

class RuleSet {
 public:
  static CompileResult compile(const std::vector<SubstitutionRule>& rules);

  using Piece = substitution::Piece;
  using Rule = substitution::CompiledRule;

  size_t size() const { return rules_.size(); }
  const Rule& rule(size_t i) const { return rules_[i]; }

  // Rule i of this set is rule origin(i) of the set compiled by compile() (the root) — itself
  // unless this set is a subset. Bitmaps (RuleBits) always use the root's numbering, so that a
  // match found through a subset is recorded against the right rule.
  size_t origin(size_t i) const { return origin_[i]; }
  RuleBits origin_bit(size_t i) const { return RuleBits{1} << origin_[i]; }
  // The bits of every rule of this set.
  RuleBits all_rules() const { return all_rules_; }

  // A rule set of only the rules whose bits are in `rules`, in the same order, with the same
  // replacements and origins: its matches and output are what compile() would give for that
  // list. Null when `rules` selects none of them (or, never seen, when the subset's joined
  // pattern would not compile: run this set instead). Compiles one RE2 pattern, the subset's
  // joined rules (tens of microseconds per rule); the rules' own RE2 objects and this set's
  // viable_tail() are shared. The shared viable_tail() is the union of more prefix closures
  // than the subset needs, which is safe (holding back bytes never changes the output; the
  // closures are supersets anyway) and holds back what this set would. Callers cache the
  // result (RuleSubsetCache).
  //
  // Why running a subset is exact (docs/substitutions.md, "The memo"): with leftmost, then
  // longest, then earliest-rule wins, leaving out rules that never won a match over a body
  // changes no winner on that body.
  std::shared_ptr<const RuleSet> subset(RuleBits rules) const;

  // Every rule joined by '|', leftmost-longest: finds where the next match starts and ends.
  const RE2& combined() const { return *combined_; }
  // The union of the rules' prefix closures (prefix_regex.h) followed by \z, searched
  // unanchored: the leftmost position whose text up to the window's end can still grow into a
  // match once more bytes arrive. RE2 runs this backwards from the end.
  const RE2& viable_tail() const { return *viable_tail_; }
  // False when some rule's prefix closure could not be derived; the stream then treats every
  // held position as possibly growing (correct, but bytes wait for the end or the buffer limit).
  bool exact_prefixes() const { return exact_prefixes_; }

  // A match: [start, end) of rule `rule`; `spans` holds its groups when `spans_known` (the
  // linear matcher found them), else expand() asks RE2.
  struct Match {
    size_t start = 0;
    size_t end = 0;
    size_t rule = 0;
    // The bytes the search that found the match examined, what it cost: those scanned from where
    // it began to the match, plus what each rule tried at a candidate read (a walk up to the
    // byte that stopped it, RE2 to the window's end). Set also by a search that found nothing.
    size_t examined = 0;
    bool spans_known = false;
    GroupSpans spans;  // not initialized: read only when spans_known
  };

  bool prefiltered() const { return !prefixes_.empty(); }
  // The prefixes the prefilter looks for (for tests).
  size_t prefix_count() const { return prefixes_.size(); }

  // Matches replaced one after another, the stream's inner loop (SubstitutionStream::step), in
  // one function with the scan, so that a dense page pays no call and no scan set-up per match.
  // Each match is the leftmost-longest of any rule in text[from, size) (bytes before `from` are
  // context; the earliest rule wins a tie). With a prefilter (every rule starts with a run of
  // known byte sets), only the rules whose prefix is at a candidate position run there,
  // anchored (linear rules without RE2, linear_rule.h); otherwise the joined pattern searches
  // the whole range and rule_for() names the rule.
  // From `from`, each match that starts before `limit` and ends before `end_limit` has the bytes
  // before it and its replacement appended to *out, and `from` moves past it. The run ends:
  //   kNone   when no match is left in the text that starts before `limit` (nothing after
  //           `from` was emitted);
  //   kHeld   at a match it may not commit (it starts at `held_start`);
  //   kCheck  after `commits` replacements, or once the searches of its replacements examined
  //           `window` bytes (Match::examined), whichever comes first: the stream reads its
  //           clock (a window of 0: after the first replacement); also when one search examined
  //           `window` bytes without finding a match (a prefilter's search is cut there: the
  //           bytes it passed are emitted, and the next run resumes after them);
  //   kRegrow after a replacement that ends past `limit` (the caller learns its limit anew).
  struct Run {
    std::string* out = nullptr;
    size_t from = 0;
    size_t limit = std::string_view::npos;
    size_t end_limit = std::string_view::npos;
    unsigned commits = 1;                    // at least 1; counts down
    size_t window = std::string_view::npos;  // counts down
    uint64_t replacements = 0;
    RuleBits matched = 0;  // origin_bit() of each rule replaced
    size_t held_start = 0;
    // kNone, kHeld: the bytes examined by the search that ended the run (Match::examined).
    size_t last_examined = 0;
  };
  enum class RunEnd { kNone, kHeld, kCheck, kRegrow };
  RunEnd replace(std::string_view text, Run* run) const;
  // Rule i's linear matcher, or null when RE2 runs it (for tests).
  const LinearRule* linear(size_t i) const { return linear_[i].get(); }

  // The prefilter's scan: vectors of 32 bytes (AVX2) or 16 (SSSE3), or a byte at a time; the
  // best the CPU has. Tests lower it (process-wide) to check every kind on one machine; returns
  // the level now in use.
  enum class ScanLevel { kScalar, kSsse3, kAvx2 };
  static ScanLevel limit_scan_level_for_testing(ScanLevel most);

  // Which rule produced the match [m->start, m->end): the earliest one that matches exactly
  // there; sets m->rule (and its groups when a linear matcher found them).
  void rule_for(std::string_view text, Match* m) const;

 private:
  RuleSet() = default;
  // Compiles the joined patterns and the prefilter of rules_ (and sources_); the reason when
  // the joined patterns do not compile. A non-null `viable_tail` is used instead of compiling
  // joined.viable (a subset shares its parent's).
  std::optional<std::string> build(const substitution::CompiledRules& joined,
                                   std::shared_ptr<const RE2> viable_tail = nullptr);
  void build_prefilter(const std::vector<SubstitutionRule>& valid);
  // The next match with the prefilter, and replace() with it: compiled once per scan level
  // (Scan: Avx2, Ssse3, or void for a byte at a time) so that the scan, its hits, the rules'
  // dispatch and the replacements make one function, without a call per candidate or match.
  // replace_each<JoinedPattern> finds each match with find_joined() instead.
  //
  // find_prefiltered looks only at candidates before `stop` (a run's limit: a match starting
  // there or later would be held anyway), and gives up on the search once it has examined
  // `budget` bytes without a match (kCut): no match starts in [from, m->start), so those bytes
  // are final, and the search resumes at m->start after the stream has read its clock.
  enum class Search { kFound, kNone, kCut };
  template <typename Scan>
  Search find_prefiltered(std::string_view text, size_t from, size_t stop, size_t budget,
                          Match* m) const;
  struct JoinedPattern;
  template <typename Scan>
  RunEnd replace_each(std::string_view text, Run* run) const;
  // Appends the replacement for `m` in `text` (bytes before its start and after its end are the
  // context for assertions such as \b); expand_with_re2 when RE2 must find its groups.
  void expand(const Match& m, std::string_view text, std::string* out) const;
  void expand_with_re2(const Match& m, std::string_view text, std::string* out) const;
  // Commits `m` to `run`, or holds it; how the run ends after it, or nothing if it goes on.
  std::optional<RunEnd> commit(std::string_view text, const Match& m, Run* run) const;
  // The joined pattern's search, for a set without a prefilter.
  bool find_joined(std::string_view text, size_t from, Match* m) const;
#if defined(__x86_64__)
  RunEnd replace_avx2(std::string_view text, Run* run) const;
  RunEnd replace_ssse3(std::string_view text, Run* run) const;
#endif
  RunEnd replace_scalar(std::string_view text, Run* run) const;
  template <typename Scan>
  size_t next_candidate(std::string_view text, size_t from, size_t scan_end,
                        uint64_t* at_best) const;
  void check_hit(std::string_view text, size_t from, size_t pos, unsigned buckets, size_t* best,
                 uint64_t* at_best) const;
  // Rule i's longest match anchored at `at` (its end; `at` itself: none) and its groups when
  // known. With `prefix_known`, a prefix of rule i is known to be at `at`. *examined grows by the
  // bytes the rule read (Match::examined).
  size_t anchored(size_t i, std::string_view text, size_t at, bool prefix_known, GroupSpans* spans,
                  bool* spans_known, size_t* examined) const;

  // Byte sets a match of a rule may begin with (its literal prefix, its linear steps', or one of
  // its literal alternatives), and its fingerprint: the `width` (1 to 3) sets at `offset` that the
  // scan looks for, chosen rare in HTML and English text.
  struct Prefix {
    std::vector<ByteSet> sets;
    size_t length = 0;  // sets.size(), kept where the hit test reads it
    size_t offset = 0;
    size_t width = 0;
    // The same test 16 bytes at a time: byte i of the text is allowed when (byte & mask) ==
    // value (a single byte: mask 0xff; a letter in both cases: 0xdf); a set that this cannot
    // say has mask 0 and its bit in `others`, tested on `sets`.
    uint64_t mask[2] = {0, 0};
    uint64_t value[2] = {0, 0};
    uint32_t others = 0;
    bool at(std::string_view text, size_t pos) const;
  };

  std::vector<Rule> rules_;
  std::vector<SubstitutionRule> sources_;  // rules_ as written (the prefilter reads them)
  std::vector<uint8_t> origin_;            // see origin()
  RuleBits all_rules_ = 0;
  std::unique_ptr<RE2> combined_;
  std::shared_ptr<const RE2> viable_tail_;  // shared with the subsets of this set
  bool exact_prefixes_ = true;
  // Each rule's linear matcher (null: RE2 only), shared with the subsets of this set.
  std::vector<std::shared_ptr<const LinearRule>> linear_;
  // Each rule has one prefix, or several literals when no single one begins all its matches
  // (substitution::literal_alternatives: an alternation's branches); rules share equal ones.
  std::vector<Prefix> prefixes_;        // empty: no prefilter
  std::vector<RuleBits> prefix_rules_;  // the rules (bit i: rule i of this set) of each prefix
  // Per rule: LinearRule::fixed_length() when it has a linear matcher and no group is needed for
  // its replacement (a match is then its prefix and its \b), else 0.
  std::vector<size_t> fixed_length_;

  // The prefilter is a fingerprint scan in the manner of Hyperscan's Teddy: prefix k is in
  // bucket k % 8; position p is a candidate for bucket b when byte p + i is one that bucket b's
  // fingerprints allow at index i, for i = 0, 1, 2 (an index past a fingerprint's width allows
  // every byte). With at most 8 prefixes of single bytes or folded letters the test is exact on
  // the fingerprint's bytes; otherwise a superset, which check_hit() resolves.
  static constexpr size_t kBuckets = 8;
  static constexpr size_t kFingerprint = 3;
  // The prefixes in each bucket: at most kMaxPrefixes in all (past it: no prefilter), so at most
  // 8 each.
  static constexpr size_t kMaxPrefixes = 8 * kBuckets;
  static_assert(kMaxPrefixes <= 64, "a search's prefixes are the bits of a uint64_t");
  // The most literals one rule's alternatives may add, and how often, by byte_weight's rough
  // (not normalized) weights, their candidates may come (per byte) for them to be used: a
  // conservative limit, since each candidate costs an RE2 call (about 60 ns measured).
  static constexpr size_t kMaxAlternatives = 16;
  static constexpr double kMaxAlternativesRate = 1.0 / 200;
  // How often, summed over the set's prefixes, fingerprints may be expected (per byte) for the
  // prefilter to be used: past one in four bytes the joined DFA is cheaper.
  static constexpr double kMaxFingerprintRate = 0.25;
  uint8_t bucket_prefixes_[kBuckets][8] = {};
  uint8_t bucket_size_[kBuckets] = {};
  uint8_t byte_buckets_[kFingerprint][256] = {};  // the scalar test: buckets allowing a byte
  // The vector test looks the two halves of each byte up apart (pshufb): byte c is allowed for
  // bucket b at index i when bit b is in nibbles_[i].lo[c & 15] and in nibbles_[i].hi[c >> 4]. A
  // bucket of one literal loses nothing by the split, a case-folded letter included (its two
  // cases differ in the high half only). Each table is written twice, for both AVX2 lanes.
  struct alignas(32) NibbleTable {
    unsigned char lo[32], hi[32];
  };
  NibbleTable nibbles_[kFingerprint] = {};
  size_t max_offset_ = 0;
  template <typename Scan>
  size_t scan_vector(std::string_view text, size_t from, size_t scan_end, size_t* i, size_t* best,
                     uint64_t* at_best) const;
};

}  // namespace tidegate::dataplane::filters
