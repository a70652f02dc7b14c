#include "filters/substitution/rule_set.h"

#include <algorithm>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <utility>

#include "substitution/prefix_regex.h"

namespace tidegate::dataplane::filters {
namespace {

// Rough frequencies of bytes in HTML and English text, in tenths of a percent: the prefilter
// looks for each literal's rarest byte, so that few positions need a closer look.
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

bool literal_at(std::string_view text, size_t pos, std::string_view literal, bool fold) {
  if (!fold) return text.compare(pos, literal.size(), literal) == 0;
  for (size_t i = 0; i < literal.size(); ++i) {
    const auto a = static_cast<unsigned char>(text[pos + i]);
    const auto b = static_cast<unsigned char>(literal[i]);
    if (a != b && a != other_case(b)) return false;
  }
  return true;
}

}  // namespace

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
  std::vector<Literal> literals;
  std::vector<uint16_t> rule_literal;
  for (const auto& r : valid) {
    substitution::LiteralPrefix prefix = substitution::literal_prefix(r.match, r.flags == "i");
    if (prefix.bytes.empty()) return;  // one rule without a literal: the DFA scans everything
    Literal lit{std::move(prefix.bytes), prefix.fold, 0};
    // The rarest byte that has a next byte in the literal: the scan checks the pair.
    int best = 1 << 30;
    const size_t last = lit.bytes.size() > 1 ? lit.bytes.size() - 1 : 1;
    for (size_t i = 0; i < last; ++i) {
      const auto c = static_cast<unsigned char>(lit.bytes[i]);
      const int w =
          byte_weight(c) + (lit.fold && other_case(c) != c ? byte_weight(other_case(c)) : 0);
      if (w < best) {
        best = w;
        lit.offset = i;
      }
    }
    size_t index = 0;
    while (index < literals.size() &&
           !(literals[index].bytes == lit.bytes && literals[index].fold == lit.fold)) {
      ++index;
    }
    if (index == literals.size()) literals.push_back(std::move(lit));
    rule_literal.push_back(static_cast<uint16_t>(index));
  }
  literals_ = std::move(literals);
  rule_literal_ = std::move(rule_literal);
  for (size_t k = 0; k < literals_.size(); ++k) {
    const Literal& l = literals_[k];
    const auto c = static_cast<unsigned char>(l.bytes[l.offset]);
    for (unsigned char x : {c, l.fold ? other_case(c) : c}) {
      if (by_byte_[x].empty() || by_byte_[x].back() != k) {
        by_byte_[x].push_back(static_cast<uint16_t>(k));
      }
      scan_[x] = true;
    }
    Probe p;
    const bool single = l.bytes.size() == 1;
    const auto next = single ? c : static_cast<unsigned char>(l.bytes[l.offset + 1]);
    const bool fold0 = l.fold && other_case(c) != c;
    const bool fold1 = l.fold && other_case(next) != next;
    std::memset(p.c0, fold0 ? (c | 0x20) : c, 32);
    std::memset(p.or0, fold0 ? 0x20 : 0, 32);
    std::memset(p.c1, single ? 0xff : fold1 ? (next | 0x20) : next, 32);
    std::memset(p.or1, single ? 0xff : fold1 ? 0x20 : 0, 32);
    probes_.push_back(p);
    max_offset_ = std::max(max_offset_, l.offset);
  }
}

// Whether a literal whose rare byte is at `i` can start at or after `from`, lie whole inside
// `text`, and start before `best`; if it does, `best` moves there.
void RuleSet::check_hit(std::string_view text, size_t from, size_t i, size_t* best) const {
  for (uint16_t k : by_byte_[static_cast<unsigned char>(text[i])]) {
    const Literal& l = literals_[k];
    if (i < from + l.offset) continue;
    const size_t start = i - l.offset;
    if (start >= *best || start + l.bytes.size() > text.size()) continue;
    if (literal_at(text, start, l.bytes, l.fold)) *best = start;
  }
}

#if defined(__x86_64__)
// The vector scan, for 16 (SSE2, always there on x86-64) or 32 (AVX2) positions at a time: a
// position is a hit when some literal's rare byte and the byte after it are there. Hits are
// rare, so the branch is almost never taken.
struct Sse2 {
  using V = __m128i;
  static constexpr size_t kWidth = 16;
  static V load(const void* p) { return _mm_loadu_si128(static_cast<const V*>(p)); }
  static V loada(const void* p) { return _mm_load_si128(static_cast<const V*>(p)); }
  static V zero() { return _mm_setzero_si128(); }
  static V eq(V a, V b) { return _mm_cmpeq_epi8(a, b); }
  static V bor(V a, V b) { return _mm_or_si128(a, b); }
  static V band(V a, V b) { return _mm_and_si128(a, b); }
  static uint32_t mask(V a) { return static_cast<uint32_t>(_mm_movemask_epi8(a)); }
};

// GCC warns that passing AVX vectors by value changes the ABI when AVX is off; these helpers are
// only ever inlined into scan_avx2, which has AVX2 on, so no call with that ABI exists.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
struct Avx2 {
  using V = __m256i;
  static constexpr size_t kWidth = 32;
  __attribute__((target("avx2"))) static V load(const void* p) {
    return _mm256_loadu_si256(static_cast<const V*>(p));
  }
  __attribute__((target("avx2"))) static V loada(const void* p) {
    return _mm256_load_si256(static_cast<const V*>(p));
  }
  __attribute__((target("avx2"))) static V zero() { return _mm256_setzero_si256(); }
  __attribute__((target("avx2"))) static V eq(V a, V b) { return _mm256_cmpeq_epi8(a, b); }
  __attribute__((target("avx2"))) static V bor(V a, V b) { return _mm256_or_si256(a, b); }
  __attribute__((target("avx2"))) static V band(V a, V b) { return _mm256_and_si256(a, b); }
  __attribute__((target("avx2"))) static uint32_t mask(V a) {
    return static_cast<uint32_t>(_mm256_movemask_epi8(a));
  }
};

// Scans from *i while a full vector (plus the byte after it) fits; returns the answer when it is
// known, else npos with *i where the scalar tail must go on.
template <typename Scan>
[[gnu::always_inline]] inline size_t RuleSet::scan_vector(std::string_view text, size_t from,
                                                          size_t* i, size_t* best) const {
  using V = typename Scan::V;
  const size_t size = text.size();
  const char* bytes = text.data();
  for (; *i + Scan::kWidth + 1 <= size; *i += Scan::kWidth) {
    if (*best != std::string_view::npos && *i > *best + max_offset_) return *best;
    const V v0 = Scan::load(bytes + *i);
    const V v1 = Scan::load(bytes + *i + 1);
    V hits = Scan::zero();
    for (const Probe& p : probes_) {
      const V a = Scan::eq(Scan::bor(v0, Scan::loada(p.or0)), Scan::loada(p.c0));
      const V b = Scan::eq(Scan::bor(v1, Scan::loada(p.or1)), Scan::loada(p.c1));
      hits = Scan::bor(hits, Scan::band(a, b));
    }
    uint32_t m = Scan::mask(hits);
    while (m != 0) {
      const size_t j = *i + static_cast<size_t>(__builtin_ctz(m));
      m &= m - 1;
      if (*best != std::string_view::npos && j > *best + max_offset_) return *best;
      check_hit(text, from, j, best);
    }
  }
  return std::string_view::npos;
}

#pragma GCC diagnostic pop

// One instance per instruction set; the AVX2 one runs only where the CPU has it.
size_t RuleSet::scan_sse2(std::string_view text, size_t from, size_t* i, size_t* best) const {
  return scan_vector<Sse2>(text, from, i, best);
}

__attribute__((target("avx2"))) size_t RuleSet::scan_avx2(std::string_view text, size_t from,
                                                          size_t* i, size_t* best) const {
  return scan_vector<Avx2>(text, from, i, best);
}
#endif

// The leftmost position >= from where some rule's literal lies whole inside `text`, or npos.
size_t RuleSet::next_candidate(std::string_view text, size_t from) const {
  const size_t size = text.size();
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t best = std::string_view::npos;
  size_t i = from;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  const size_t found = avx2 ? scan_avx2(text, from, &i, &best) : scan_sse2(text, from, &i, &best);
  if (found != std::string_view::npos) return found;
#endif
  for (; i < size; ++i) {
    if (!scan_[bytes[i]]) continue;
    if (best != std::string_view::npos && i > best + max_offset_) break;
    check_hit(text, from, i, &best);
  }
  return best;
}

bool RuleSet::find(std::string_view text, size_t from, size_t* start, size_t* end) const {
  re2::StringPiece m;
  if (literals_.empty()) {
    if (!combined_->Match(text, from, text.size(), RE2::UNANCHORED, &m, 1)) return false;
    *start = static_cast<size_t>(m.data() - text.data());
    *end = *start + m.size();
    return true;
  }
  // Every match starts with its rule's literal, so only candidates can start one; RE2 checks
  // each, anchored there, for the longest match of any rule.
  for (size_t at = from;;) {
    const size_t c = next_candidate(text, at);
    if (c == std::string_view::npos) return false;
    if (combined_->Match(text, c, text.size(), RE2::ANCHOR_START, &m, 1)) {
      *start = c;
      *end = c + m.size();
      return true;
    }
    at = c + 1;
  }
}

size_t RuleSet::rule_for(std::string_view text, size_t start, size_t end) const {
  if (rules_.size() == 1) return 0;
  for (size_t i = 0; i < rules_.size(); ++i) {
    // A rule whose literal is not there cannot have matched: skip its RE2 call.
    if (!rule_literal_.empty()) {
      const Literal& l = literals_[rule_literal_[i]];
      if (l.bytes.size() > end - start || !literal_at(text, start, l.bytes, l.fold)) continue;
    }
    if (rules_[i].re->Match(text, start, end, RE2::ANCHOR_BOTH, nullptr, 0)) return i;
  }
  return 0;  // unreachable: the combined pattern matched there, so some rule does
}

void RuleSet::expand(size_t index, std::string_view text, size_t start, size_t end,
                     std::string* out) const {
  const Rule& r = rules_[index];
  const std::string_view whole = text.substr(start, end - start);
  if (r.max_group == 0) {
    for (const Piece& p : r.replacement) {
      if (p.group < 0) {
        out->append(p.literal);
      } else {
        out->append(whole);
      }
    }
    return;
  }
  // Groups are computed only here, for rules whose replacement uses them.
  re2::StringPiece groups[10];
  const int n = r.max_group + 1;
  if (!r.re->Match(text, start, end, RE2::ANCHOR_BOTH, groups, n)) groups[0] = whole;
  for (const Piece& p : r.replacement) {
    if (p.group < 0) {
      out->append(p.literal);
    } else if (groups[p.group].data() != nullptr) {
      out->append(groups[p.group].data(), groups[p.group].size());
    }
  }
}

}  // namespace tidegate::dataplane::filters
