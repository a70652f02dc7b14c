#include "filters/substitution/rule_set.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <type_traits>
#include <utility>

#include "substitution/prefix_regex.h"

namespace tidegate::dataplane::filters {
namespace {

// Rough frequencies of bytes in HTML and English text, in tenths of a percent: the prefilter
// looks for each literal's least likely three bytes, so that few positions need a closer look.
int byte_weight(unsigned char c) {
  static constexpr int kLower[26] = {82, 15, 28, 43, 127, 22, 20, 61, 70, 2,  8, 40, 24,
                                     67, 75, 19, 1,  60,  63, 91, 28, 10, 24, 2, 20, 1};
  if (c >= 'a' && c <= 'z') return kLower[c - 'a'];
  if (c >= 'A' && c <= 'Z') return kLower[c - 'A'] / 8 + 1;
  if (c >= '0' && c <= '9') return 8;
  switch (c) {
    case ' ':
    case '\n':
      return 150;
    case '<':
    case '>':
    case '"':
    case '=':
    case '/':
      return 30;
    case '.':
    case '-':
    case ':':
    case '_':
    case '#':
    case ';':
    case ',':
      return 10;
    default:
      return c >= 0x80 ? 2 : 3;
  }
}

unsigned char other_case(unsigned char c) {
  if (c >= 'a' && c <= 'z') return static_cast<unsigned char>(c - 'a' + 'A');
  if (c >= 'A' && c <= 'Z') return static_cast<unsigned char>(c - 'A' + 'a');
  return c;
}

// Whether the byte sets lie at `pos` in `text` (the caller checked that they fit).
bool prefix_at(std::string_view text, size_t pos, const std::vector<ByteSet>& sets) {
  for (size_t i = 0; i < sets.size(); ++i) {
    if (!sets[i].has(static_cast<unsigned char>(text[pos + i]))) return false;
  }
  return true;
}

}  // namespace

// The caller checked that the sets fit in `text` from `pos`.
[[gnu::always_inline]] inline bool RuleSet::Prefix::at(std::string_view text, size_t pos) const {
  static_assert(LinearRule::kMaxPrefix <= 16, "two words of mask and value");
  static_assert(std::endian::native == std::endian::little, "byte i is bits 8i..8i+7");
  if (pos + 16 > text.size()) return prefix_at(text, pos, sets);
  uint64_t w[2];
  std::memcpy(w, text.data() + pos, sizeof w);
  if (((w[0] & mask[0]) ^ value[0]) | ((w[1] & mask[1]) ^ value[1])) return false;
  for (uint32_t o = others; o != 0; o &= o - 1) {
    const auto i = static_cast<size_t>(__builtin_ctz(o));
    if (!sets[i].has(static_cast<unsigned char>(text[pos + i]))) return false;
  }
  return true;
}

namespace {

// How likely a byte of `set` is, by byte_weight.
double set_weight(const ByteSet& set) {
  double w = 0;
  for (int c = 0; c < 256; ++c) {
    if (set.has(static_cast<unsigned char>(c))) w += byte_weight(static_cast<unsigned char>(c));
  }
  return w;
}

// Clang (the fuzz build, fuzz/run.sh) refuses the AVX2 instance: it checks the vector ABI of
// scan_vector's calls before inlining them into the avx2 function. It scans with SSSE3 then.
#if defined(__clang__) && !defined(__AVX2__)
#define TIDEGATE_NO_AVX2_SCAN 1
#endif

RuleSet::ScanLevel cpu_scan_level() {
#if defined(__x86_64__)
#ifndef TIDEGATE_NO_AVX2_SCAN
  if (__builtin_cpu_supports("avx2")) return RuleSet::ScanLevel::kAvx2;
#endif
  if (__builtin_cpu_supports("ssse3")) return RuleSet::ScanLevel::kSsse3;
#endif
  return RuleSet::ScanLevel::kScalar;
}

std::atomic<RuleSet::ScanLevel> scan_level{cpu_scan_level()};

}  // namespace

RuleSet::ScanLevel RuleSet::limit_scan_level_for_testing(ScanLevel most) {
  const ScanLevel level = std::min(most, cpu_scan_level());
  scan_level.store(level);
  // The linear matcher's vector walk goes with the vector scans.
  LinearRule::limit_vector_walk_for_testing(level != ScanLevel::kScalar);
  return level;
}

CompileResult RuleSet::compile(const std::vector<SubstitutionRule>& rules) {
  substitution::CompiledRules compiled = substitution::compile_rules(rules);
  CompileResult result;
  result.errors = std::move(compiled.errors);
  if (compiled.rules.empty()) return result;
  std::shared_ptr<RuleSet> set(new RuleSet());
  for (size_t i = 0; i < compiled.rules.size(); ++i) {
    set->sources_.push_back(rules[compiled.rules[i].source_index]);
    set->origin_.push_back(static_cast<uint8_t>(i));
    set->all_rules_ |= RuleBits{1} << i;
    const SubstitutionRule& source = set->sources_.back();
    set->linear_.push_back(LinearRule::compile(source.match, source.flags == "i"));
  }
  set->rules_ = std::move(compiled.rules);
  if (auto error = set->build(compiled)) {
    result.errors.push_back({0, *error, *error});
    return result;
  }
  result.rules = std::move(set);
  return result;
}

std::shared_ptr<const RuleSet> RuleSet::subset(RuleBits rules) const {
  std::shared_ptr<RuleSet> set(new RuleSet());
  for (size_t i = 0; i < rules_.size(); ++i) {
    if ((rules & origin_bit(i)) == 0) continue;
    set->rules_.push_back(rules_[i]);  // shares the rule's RE2
    set->sources_.push_back(sources_[i]);
    set->origin_.push_back(origin_[i]);
    set->linear_.push_back(linear_[i]);
    set->all_rules_ |= origin_bit(i);
  }
  if (set->rules_.empty()) return nullptr;
  substitution::CompiledRules joined;
  substitution::join_rules(set->rules_, &joined);
  // The prefix closures of this set's rules cover the subset's: share them (compiling them is
  // most of the cost of a rule set, and their DFA is already warm).
  joined.exact_prefixes = exact_prefixes_;
  if (set->build(joined, viable_tail_)) return nullptr;
  return set;
}

std::optional<std::string> RuleSet::build(const substitution::CompiledRules& joined,
                                          std::shared_ptr<const RE2> viable_tail) {
  exact_prefixes_ = joined.exact_prefixes;
  combined_ = std::make_unique<RE2>(joined.combined, substitution::joined_options());
  viable_tail_ = viable_tail ? std::move(viable_tail)
                             : std::make_shared<const RE2>("(?:" + joined.viable + ")\\z",
                                                           substitution::joined_options());
  if (!combined_->ok() || !viable_tail_->ok()) {
    // Each rule compiled alone, so only the size of the union can fail here.
    return "the rules together are too large to compile: " + combined_->error() +
           viable_tail_->error();
  }
  build_prefilter(sources_);
  return std::nullopt;
}

void RuleSet::build_prefilter(const std::vector<SubstitutionRule>& valid) {
  fixed_length_.assign(rules_.size(), 0);  // read only with a prefilter; sized either way
  std::vector<Prefix> prefixes;
  std::vector<RuleBits> prefix_rules;
  // Adds `prefix` (its sets filled) for rule r, or gives rule r the same prefix already there.
  auto add_prefix = [&](Prefix prefix, size_t r) {
    // The fingerprint: the window of up to three sets least likely in a page (the product of
    // their bytes' rough frequencies).
    prefix.length = prefix.sets.size();
    prefix.width = std::min(kFingerprint, prefix.sets.size());
    double best = 0;
    for (size_t at = 0; at + prefix.width <= prefix.sets.size(); ++at) {
      double likely = 1;
      for (size_t k = 0; k < prefix.width; ++k) likely *= set_weight(prefix.sets[at + k]);
      if (at == 0 || likely < best) {
        best = likely;
        prefix.offset = at;
      }
    }
    for (size_t i = 0; i < prefix.sets.size(); ++i) {
      const ByteSet& set = prefix.sets[i];
      int members = 0;
      unsigned char first = 0;
      for (int c = 255; c >= 0; --c) {
        if (set.has(static_cast<unsigned char>(c))) {
          ++members;
          first = static_cast<unsigned char>(c);
        }
      }
      uint64_t mask = 0, value = 0;
      if (members == 1) {
        mask = 0xff;
        value = first;
      } else if (members == 2 && set.has(static_cast<unsigned char>(first ^ 0x20)) &&
                 (first ^ 0x20) > first) {
        mask = 0xdf;
        value = first & 0xdf;
      } else {
        prefix.others |= uint32_t{1} << i;
      }
      prefix.mask[i / 8] |= mask << (8 * (i % 8));
      prefix.value[i / 8] |= value << (8 * (i % 8));
    }
    size_t index = 0;
    while (index < prefixes.size() && prefixes[index].sets != prefix.sets) ++index;
    if (index == prefixes.size()) {
      prefixes.push_back(std::move(prefix));
      prefix_rules.push_back(0);
    }
    prefix_rules[index] |= RuleBits{1} << r;
  };
  auto literal_sets = [](std::string_view bytes, bool fold) {
    std::vector<ByteSet> sets;
    for (size_t i = 0; i < bytes.size() && i < LinearRule::kMaxPrefix; ++i) {
      const auto c = static_cast<unsigned char>(bytes[i]);
      ByteSet set;
      set.add(c);
      if (fold) set.add(other_case(c));
      sets.push_back(set);
    }
    return sets;
  };
  // Expected candidates per byte of a prefix, by its bytes' rough frequencies.
  auto rate_of = [](const std::vector<ByteSet>& sets) {
    double p = 1;
    for (const ByteSet& set : sets) p *= set_weight(set) / 1000;
    return p;
  };
  for (size_t r = 0; r < valid.size(); ++r) {
    Prefix prefix;
    const bool linear_prefix = linear_[r] != nullptr && !linear_[r]->prefix().empty();
    if (linear_prefix) {
      prefix.sets = linear_[r]->prefix();
    } else {
      const substitution::LiteralPrefix literal =
          substitution::literal_prefix(valid[r].match, valid[r].flags == "i");
      prefix.sets = literal_sets(literal.bytes, literal.fold);
    }
    // No single prefix, or one so common that its candidates' RE2 calls would cost more than
    // the joined DFA (a quote before an alternation: "(foo|bar)"): the literals one of which
    // begins each match (the branches of an alternation, what an optional part leaves), each a
    // prefix of its own owned by the rule, when they are rare enough ((a|b)+c gives single
    // common letters: no).
    if (!linear_prefix && (prefix.sets.empty() || rate_of(prefix.sets) > kMaxAlternativesRate)) {
      const substitution::LiteralAlternatives alternatives = substitution::literal_alternatives(
          valid[r].match, valid[r].flags == "i", kMaxAlternatives, LinearRule::kMaxPrefix);
      double rate = 0;
      std::vector<std::vector<ByteSet>> literal_prefixes;
      for (const std::string& literal : alternatives.literals) {
        literal_prefixes.push_back(literal_sets(literal, alternatives.fold));
        rate += rate_of(literal_prefixes.back());
      }
      if (!literal_prefixes.empty() && rate <= kMaxAlternativesRate &&
          (prefix.sets.empty() || rate < rate_of(prefix.sets))) {
        for (auto& sets : literal_prefixes) {
          Prefix alternative;
          alternative.sets = std::move(sets);
          add_prefix(std::move(alternative), r);
        }
        continue;
      }
    }
    if (prefix.sets.empty()) return;  // no prefix: the DFA scans everything
    add_prefix(std::move(prefix), r);
  }
  // A prefix set per bucket: at most 8 in each, and one bit each in a search's candidates.
  if (prefixes.size() > kMaxPrefixes) return;
  // Fingerprints that most bytes have (a rule led by a common class: \w+@example\.com) make a
  // candidate of most positions, each a prefix comparison and a rule's walk or RE2 call: slower
  // than the joined DFA's scan, by ten times on the dense page. Leave such a set to the DFA.
  double rate = 0;  // expected fingerprint hits per byte, by the bytes' rough frequencies
  for (const Prefix& l : prefixes) {
    double p = 1;
    for (size_t k = 0; k < l.width; ++k) p *= set_weight(l.sets[l.offset + k]) / 1000;
    rate += p;
  }
  if (rate > kMaxFingerprintRate) return;
  prefixes_ = std::move(prefixes);
  prefix_rules_ = std::move(prefix_rules);
  for (size_t k = 0; k < prefixes_.size(); ++k) {
    const Prefix& l = prefixes_[k];
    const size_t bucket = k % kBuckets;
    const auto bit = static_cast<uint8_t>(1u << bucket);
    bucket_prefixes_[bucket][bucket_size_[bucket]++] = static_cast<uint8_t>(k);
    for (size_t i = 0; i < kFingerprint; ++i) {
      auto allow = [&](unsigned char c) {
        byte_buckets_[i][c] |= bit;
        for (size_t lane = 0; lane < 32; lane += 16) {
          nibbles_[i].lo[lane + (c & 15)] |= bit;
          nibbles_[i].hi[lane + (c >> 4)] |= bit;
        }
      };
      for (int c = 0; c < 256; ++c) {
        if (i >= l.width || l.sets[l.offset + i].has(static_cast<unsigned char>(c))) {
          allow(static_cast<unsigned char>(c));
        }
      }
    }
    max_offset_ = std::max(max_offset_, l.offset);
  }
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (linear_[i] != nullptr && rules_[i].max_group == 0) {
      fixed_length_[i] = linear_[i]->fixed_length();
    }
  }
}

// The prefixes of `buckets` whose fingerprint may be at `pos`: those that start at or after
// `from`, lie whole inside `text`, start at or before `best` and are there move `best` to their
// start, and are added to `at_best`, the prefixes there (bit k: prefix k).
[[gnu::always_inline]] inline void RuleSet::check_hit(std::string_view text, size_t from,
                                                      size_t pos, unsigned buckets, size_t* best,
                                                      uint64_t* at_best) const {
  while (buckets != 0) {
    const auto bucket = static_cast<size_t>(__builtin_ctz(buckets));
    buckets &= buckets - 1;
    for (size_t n = 0; n < bucket_size_[bucket]; ++n) {
      const size_t k = bucket_prefixes_[bucket][n];
      const Prefix& l = prefixes_[k];
      if (pos < from + l.offset) continue;
      const size_t start = pos - l.offset;
      if (start > *best || start + l.length > text.size()) continue;
      if (!l.at(text, start)) continue;
      if (start < *best) {
        *best = start;
        *at_best = 0;
      }
      *at_best |= uint64_t{1} << k;
    }
  }
}

#if defined(__x86_64__)
// The vector fingerprint test, 16 (SSSE3) or 32 (AVX2) positions at a time. Hits are rare, so
// the branch is almost never taken.
//
// GCC warns that passing AVX vectors by value changes the ABI when AVX is off; these helpers are
// only ever inlined into replace_ssse3 and replace_avx2, which have their instruction sets on, so
// no call with that ABI exists.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
struct Ssse3 {
  using V = __m128i;
  static constexpr size_t kWidth = 16;
  __attribute__((target("ssse3"))) static V load(const void* p) {
    return _mm_loadu_si128(static_cast<const V*>(p));
  }
  __attribute__((target("ssse3"))) static V loada(const void* p) {
    return _mm_load_si128(static_cast<const V*>(p));
  }
  __attribute__((target("ssse3"))) static V splat(char c) { return _mm_set1_epi8(c); }
  __attribute__((target("ssse3"))) static V shr4(V a) { return _mm_srli_epi16(a, 4); }
  __attribute__((target("ssse3"))) static V lookup(V table, V index) {
    return _mm_shuffle_epi8(table, index);
  }
  __attribute__((target("ssse3"))) static V band(V a, V b) { return _mm_and_si128(a, b); }
  __attribute__((target("ssse3"))) static uint32_t nonzero(V a) {
    return ~static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(a, _mm_setzero_si128()))) &
           0xffffu;
  }
  __attribute__((target("ssse3"))) static void store(void* p, V a) {
    _mm_storeu_si128(static_cast<V*>(p), a);
  }
};

#ifndef TIDEGATE_NO_AVX2_SCAN
struct Avx2 {
  using V = __m256i;
  static constexpr size_t kWidth = 32;
  __attribute__((target("avx2"))) static V load(const void* p) {
    return _mm256_loadu_si256(static_cast<const V*>(p));
  }
  __attribute__((target("avx2"))) static V loada(const void* p) {
    return _mm256_load_si256(static_cast<const V*>(p));
  }
  __attribute__((target("avx2"))) static V splat(char c) { return _mm256_set1_epi8(c); }
  __attribute__((target("avx2"))) static V shr4(V a) { return _mm256_srli_epi16(a, 4); }
  __attribute__((target("avx2"))) static V lookup(V table, V index) {
    return _mm256_shuffle_epi8(table, index);
  }
  __attribute__((target("avx2"))) static V band(V a, V b) { return _mm256_and_si256(a, b); }
  __attribute__((target("avx2"))) static uint32_t nonzero(V a) {
    return ~static_cast<uint32_t>(
        _mm256_movemask_epi8(_mm256_cmpeq_epi8(a, _mm256_setzero_si256())));
  }
  __attribute__((target("avx2"))) static void store(void* p, V a) {
    _mm256_storeu_si256(static_cast<V*>(p), a);
  }
};
#endif

// Scans from *i while a full vector (plus the two bytes after it) fits and *i is before
// scan_end; returns the answer when it is known, else npos with *i where the scalar tail must go
// on.
template <typename Scan>
[[gnu::always_inline]] inline size_t RuleSet::scan_vector(std::string_view text, size_t from,
                                                          size_t scan_end, size_t* i, size_t* best,
                                                          uint64_t* at_best) const {
  using V = typename Scan::V;
  const size_t size = text.size();
  const char* bytes = text.data();
  const V low_half = Scan::splat(0x0f);
  const V lo0 = Scan::loada(nibbles_[0].lo), hi0 = Scan::loada(nibbles_[0].hi);
  const V lo1 = Scan::loada(nibbles_[1].lo), hi1 = Scan::loada(nibbles_[1].hi);
  const V lo2 = Scan::loada(nibbles_[2].lo), hi2 = Scan::loada(nibbles_[2].hi);
  for (; *i + Scan::kWidth + kFingerprint - 1 <= size && *i < scan_end; *i += Scan::kWidth) {
    if (*best != std::string_view::npos && *i > *best + max_offset_) return *best;
    const char* p = bytes + *i;
    // Byte p + k looked up in the tables of index k, by its low and its high half.
    const V v0 = Scan::load(p), v1 = Scan::load(p + 1), v2 = Scan::load(p + 2);
    const V a0 = Scan::band(Scan::lookup(lo0, Scan::band(v0, low_half)),
                            Scan::lookup(hi0, Scan::band(Scan::shr4(v0), low_half)));
    const V a1 = Scan::band(Scan::lookup(lo1, Scan::band(v1, low_half)),
                            Scan::lookup(hi1, Scan::band(Scan::shr4(v1), low_half)));
    const V a2 = Scan::band(Scan::lookup(lo2, Scan::band(v2, low_half)),
                            Scan::lookup(hi2, Scan::band(Scan::shr4(v2), low_half)));
    const V hits = Scan::band(Scan::band(a0, a1), a2);
    uint32_t m = Scan::nonzero(hits);
    if (m == 0) continue;
    alignas(32) uint8_t buckets[32];
    Scan::store(buckets, hits);
    while (m != 0) {
      const auto lane = static_cast<size_t>(__builtin_ctz(m));
      m &= m - 1;
      const size_t j = *i + lane;
      if (*best != std::string_view::npos && j > *best + max_offset_) return *best;
      check_hit(text, from, j, buckets[lane], best, at_best);
    }
  }
  return std::string_view::npos;
}

#pragma GCC diagnostic pop

#endif

// The leftmost position >= from where some rule's prefix lies whole inside `text`, or npos;
// *at_best: the prefixes there. Only fingerprints before scan_end are looked for (a candidate
// found may still start at or after scan_end - max_offset_).
template <typename Scan>
[[gnu::always_inline]] inline size_t RuleSet::next_candidate(std::string_view text, size_t from,
                                                             size_t scan_end,
                                                             uint64_t* at_best) const {
  const size_t size = text.size();
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t best = std::string_view::npos;
  *at_best = 0;
  size_t i = from;
#if defined(__x86_64__)
  if constexpr (!std::is_void_v<Scan>) {
    const size_t found = scan_vector<Scan>(text, from, scan_end, &i, &best, at_best);
    if (found != std::string_view::npos) return found;
  }
#endif
  // The scalar test, for the tail (and CPUs without SSSE3). An index past the end allows every
  // byte: check_hit knows a prefix that does not fit.
  for (const size_t last = std::min(size, scan_end); i < last; ++i) {
    if (best != std::string_view::npos && i > best + max_offset_) break;
    unsigned m = byte_buckets_[0][bytes[i]];
    if (i + 1 < size) m &= byte_buckets_[1][bytes[i + 1]];
    if (i + 2 < size) m &= byte_buckets_[2][bytes[i + 2]];
    if (m != 0) check_hit(text, from, i, m, &best, at_best);
  }
  return best;
}

[[gnu::always_inline]] inline size_t RuleSet::anchored(size_t i, std::string_view text, size_t at,
                                                       bool prefix_known, GroupSpans* spans,
                                                       bool* spans_known, size_t* examined) const {
  *spans_known = false;
  if (prefix_known && fixed_length_[i] != 0) {
    // The prefilter compared the whole rule: only its \b are left to check.
    const LinearRule& linear = *linear_[i];
    const size_t end = at + fixed_length_[i];
    *examined += fixed_length_[i] + 1;  // a trailing \b reads the byte after the match
    if (linear.lead_boundary() && !LinearRule::word_boundary(text, at)) return at;
    if (linear.trail_boundary() && !LinearRule::word_boundary(text, end)) return at;
    return end;
  }
  if (const LinearRule* linear = linear_[i].get()) {
    size_t end = at;
    const bool want_spans = rules_[i].max_group > 0;
    const auto result = linear->match(text, at, &end, want_spans ? spans : nullptr, prefix_known);
    if (result != LinearRule::Result::kUnknown) {
      // The walk read up to the byte that stopped it.
      *examined += end + 1 - at;
      if (result == LinearRule::Result::kNoMatch) return at;
      *spans_known = want_spans;
      return end;
    }
  }
  *examined += text.size() - at;  // RE2 may read to the end before it knows the longest match
  re2::StringPiece m;
  if (!rules_[i].re->Match(text, at, text.size(), RE2::ANCHOR_START, &m, 1)) return at;
  return at + m.size();
}

bool RuleSet::find_joined(std::string_view text, size_t from, Match* m) const {
  re2::StringPiece found;
  m->examined = text.size() - from;
  if (!combined_->Match(text, from, text.size(), RE2::UNANCHORED, &found, 1)) return false;
  m->start = static_cast<size_t>(found.data() - text.data());
  m->end = m->start + found.size();
  rule_for(text, m);
  return true;
}

// Every match starts with one of its rule's prefixes, so only candidates can start one. At a
// candidate, each rule with a prefix there runs anchored (longest match); the longest wins, the
// earlier rule on a tie. A linear rule (linear_rule.h) needs no RE2 call, and its groups come with
// it; one RE2 call per rule otherwise. Either way the rule is known without the second pass the
// joined pattern would need.
//
// A failing candidate may walk far (x[a-z]*! at each x of a long run of them, to the byte that
// ends the run), so a search over a window can be quadratic in it: past `budget` bytes examined
// it stops after the candidate it tried, and says where to resume (kCut).
template <typename Scan>
[[gnu::always_inline]] inline RuleSet::Search RuleSet::find_prefiltered(std::string_view text,
                                                                        size_t from, size_t stop,
                                                                        size_t budget,
                                                                        Match* m) const {
  GroupSpans spans[2];
  size_t examined = 0;  // by the rules at candidates
  // A fingerprint at or past stop + max_offset_ belongs to a candidate at or past stop.
  const size_t scan_end =
      stop < std::string_view::npos - max_offset_ ? stop + max_offset_ : std::string_view::npos;
  for (size_t at = from;;) {
    uint64_t here = 0;
    const size_t c = next_candidate<Scan>(text, at, scan_end, &here);
    if (c >= stop) {
      const size_t scanned = c != std::string_view::npos ? c : std::min(text.size(), scan_end);
      m->examined = examined + (scanned > from ? scanned - from : 0);
      return Search::kNone;
    }
    size_t best_end = c;
    int best_spans = 0;
    RuleBits candidates = 0;
    for (uint64_t k = here; k != 0; k &= k - 1) {
      candidates |= prefix_rules_[static_cast<size_t>(__builtin_ctzll(k))];
    }
    for (; candidates != 0; candidates &= candidates - 1) {
      const auto i = static_cast<size_t>(__builtin_ctzll(candidates));
      bool known = false;
      // The rule's own prefix is there: check_hit compared it. (A rule with several prefixes,
      // its alternatives, has none of its linear steps in a prefix: prefix_known skips nothing.)
      const size_t e = anchored(i, text, c, true, &spans[1 - best_spans], &known, &examined);
      if (e > best_end) {
        best_end = e;
        m->rule = i;
        m->spans_known = known;
        best_spans = 1 - best_spans;
      }
    }
    if (best_end > c) {
      m->start = c;
      m->end = best_end;
      m->examined = examined + (c - from);
      if (m->spans_known) m->spans = spans[best_spans];
      return Search::kFound;
    }
    at = c + 1;
    if (examined + (at - from) >= budget) {
      m->start = at;
      m->examined = examined + (at - from);
      return Search::kCut;
    }
  }
}

[[gnu::always_inline]] inline std::optional<RuleSet::RunEnd> RuleSet::commit(std::string_view text,
                                                                             const Match& m,
                                                                             Run* run) const {
  if (m.start >= run->limit || m.end >= run->end_limit) {
    run->held_start = m.start;
    run->last_examined = m.examined;
    return RunEnd::kHeld;
  }
  run->window -= std::min(run->window, m.examined);
  run->out->append(text.data() + run->from, m.start - run->from);
  expand(m, text, run->out);
  run->from = m.end;
  ++run->replacements;
  run->matched |= origin_bit(m.rule);
  if (--run->commits == 0 || run->window == 0) return RunEnd::kCheck;
  if (run->from > run->limit) return RunEnd::kRegrow;
  return std::nullopt;
}

template <typename Scan>
[[gnu::always_inline]] inline RuleSet::RunEnd RuleSet::replace_each(std::string_view text,
                                                                    Run* run) const {
  for (;;) {
    Match m;
    Search found;
    if constexpr (std::is_same_v<Scan, JoinedPattern>) {
      found = find_joined(text, run->from, &m) ? Search::kFound : Search::kNone;
    } else {
      found = find_prefiltered<Scan>(text, run->from, run->limit, run->window, &m);
    }
    if (found == Search::kNone) {
      run->last_examined = m.examined;
      return RunEnd::kNone;
    }
    if (found == Search::kCut) {
      // No match starts before m.start, which is before the limit: the bytes up to it are final.
      run->out->append(text.data() + run->from, m.start - run->from);
      run->from = m.start;
      run->window = 0;
      return RunEnd::kCheck;
    }
    if (const std::optional<RunEnd> ended = commit(text, m, run)) return *ended;
  }
}

RuleSet::RunEnd RuleSet::replace(std::string_view text, Run* run) const {
  if (prefixes_.empty()) return replace_each<JoinedPattern>(text, run);
#if defined(__x86_64__)
  switch (scan_level.load(std::memory_order_relaxed)) {
    case ScanLevel::kAvx2:
      return replace_avx2(text, run);
    case ScanLevel::kSsse3:
      return replace_ssse3(text, run);
    case ScanLevel::kScalar:
      break;
  }
#endif
  return replace_scalar(text, run);
}

RuleSet::RunEnd RuleSet::replace_scalar(std::string_view text, Run* run) const {
  return replace_each<void>(text, run);
}

#if defined(__x86_64__)
// One instance per instruction set; each runs only where the CPU has it.
__attribute__((target("ssse3"))) RuleSet::RunEnd RuleSet::replace_ssse3(std::string_view text,
                                                                        Run* run) const {
  return replace_each<Ssse3>(text, run);
}

__attribute__((target("avx2"))) RuleSet::RunEnd RuleSet::replace_avx2(std::string_view text,
                                                                      Run* run) const {
#ifndef TIDEGATE_NO_AVX2_SCAN
  return replace_each<Avx2>(text, run);
#else
  return replace_ssse3(text, run);
#endif
}
#endif

void RuleSet::rule_for(std::string_view text, Match* m) const {
  m->rule = 0;
  m->spans_known = false;
  if (rules_.size() == 1) return;
  const size_t start = m->start, end = m->end;
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (const LinearRule* linear = linear_[i].get()) {
      // The joined pattern's match is the longest of all rules' at its start: a linear rule
      // produced it exactly when its own longest match there ends at the same byte.
      size_t e = start;
      const bool want_spans = rules_[i].max_group > 0;
      const auto r = linear->match(text, start, &e, want_spans ? &m->spans : nullptr);
      if (r == LinearRule::Result::kNoMatch) continue;
      if (r == LinearRule::Result::kMatch) {
        if (e != end) continue;
        m->rule = i;
        m->spans_known = want_spans;
        return;
      }
    }
    if (rules_[i].re->Match(text, start, end, RE2::ANCHOR_BOTH, nullptr, 0)) {
      m->rule = i;
      return;
    }
  }
  // Unreachable: the combined pattern matched there, so some rule does.
}

[[gnu::always_inline]] inline void RuleSet::expand(const Match& m, std::string_view text,
                                                   std::string* out) const {
  const Rule& r = rules_[m.rule];
  if (r.max_group != 0 && !m.spans_known) {
    expand_with_re2(m, text, out);
    return;
  }
  // $0 is the match; other groups are in m.spans (only rules with groups use them).
  for (const Piece& p : r.replacement) {
    if (p.group < 0) {
      out->append(p.literal);
    } else if (p.group == 0) {
      out->append(text.data() + m.start, m.end - m.start);
    } else {
      out->append(text.data() + m.spans.begin[p.group],
                  m.spans.end[p.group] - m.spans.begin[p.group]);
    }
  }
}

// Groups are computed only here, for rules whose replacement uses them and whose matcher did not
// find them (RE2 runs the rule).
void RuleSet::expand_with_re2(const Match& m, std::string_view text, std::string* out) const {
  const Rule& r = rules_[m.rule];
  re2::StringPiece groups[10];
  const int n = r.max_group + 1;
  if (!r.re->Match(text, m.start, m.end, RE2::ANCHOR_BOTH, groups, n)) {
    groups[0] = text.substr(m.start, m.end - m.start);
  }
  for (const Piece& p : r.replacement) {
    if (p.group < 0) {
      out->append(p.literal);
    } else if (groups[p.group].data() != nullptr) {
      out->append(groups[p.group].data(), groups[p.group].size());
    }
  }
}

}  // namespace tidegate::dataplane::filters
