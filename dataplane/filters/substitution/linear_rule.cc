#include "filters/substitution/linear_rule.h"

#include <re2/re2.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <utility>

namespace tidegate::dataplane::filters {
namespace {

bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The ASCII bytes the atom matches, as RE2 says (the atom alone, with the rule's folding).
std::optional<ByteSet> ascii_members(std::string_view atom, bool fold) {
  RE2::Options options;
  options.set_case_sensitive(!fold);
  options.set_log_errors(false);
  const RE2 re(std::string("(?:") + std::string(atom) + ")", options);
  if (!re.ok()) return std::nullopt;
  ByteSet set;
  for (int c = 0; c < 0x80; ++c) {
    const char byte = static_cast<char>(c);
    if (RE2::FullMatch(std::string_view(&byte, 1), re)) set.add(static_cast<unsigned char>(c));
  }
  return set;
}

class Parser {
 public:
  Parser(std::string_view p, bool fold) : p_(p), fold_(fold) {}

  // The steps, the groups and the boundaries; false when the pattern is not linear.
  bool parse(std::vector<LinearRule::Step>* steps, std::vector<uint32_t>* first,
             std::vector<uint32_t>* last, bool* lead, bool* trail) {
    if (p_.substr(0, 4) == "(?i)") {
      fold_ = true;
      i_ = 4;
    }
    first->assign(1, 0);
    last->assign(1, 0);
    struct Open {
      bool capturing;
      size_t group;
    };
    std::vector<Open> open;
    while (i_ < p_.size()) {
      const char c = p_[i_];
      if (c == '\\' && peek(1) == 'b') {
        i_ += 2;
        if (steps->empty() && !*lead) {
          *lead = true;
          continue;
        }
        // Only at the very end (closing parentheses may follow).
        size_t j = i_;
        while (j < p_.size() && p_[j] == ')') ++j;
        if (j != p_.size() || *trail) return false;
        *trail = true;
        continue;
      }
      if (*trail) {
        if (c != ')') return false;
      }
      if (c == '(') {
        if (p_.substr(i_, 3) == "(?:") {
          i_ += 3;
          open.push_back({false, 0});
        } else if (p_.substr(i_, 4) == "(?P<") {
          const size_t close = p_.find('>', i_);
          if (close == std::string_view::npos) return false;
          i_ = close + 1;
          open.push_back({true, first->size()});
          first->push_back(static_cast<uint32_t>(steps->size()));
          last->push_back(0);
        } else if (peek(1) == '?') {
          return false;  // flags and other group forms
        } else {
          ++i_;
          open.push_back({true, first->size()});
          first->push_back(static_cast<uint32_t>(steps->size()));
          last->push_back(0);
        }
        continue;
      }
      if (c == ')') {
        if (open.empty()) return false;
        ++i_;
        if (i_ < p_.size() && is_quantifier_start(p_[i_])) return false;  // a repeated group
        if (open.back().capturing) {
          (*last)[open.back().group] = static_cast<uint32_t>(steps->size());
        }
        open.pop_back();
        continue;
      }
      if (c == '|' || c == '^' || c == '$' || is_quantifier_start(c)) return false;
      if (static_cast<unsigned char>(c) >= 0x80) {
        // A literal character in UTF-8: one exact step per byte, unrepeated, not folded.
        if (fold_) return false;
        size_t n = 1;
        while (i_ + n < p_.size() && (static_cast<unsigned char>(p_[i_ + n]) & 0xc0) == 0x80) ++n;
        for (size_t k = 0; k < n; ++k) {
          LinearRule::Step s;
          s.set.add(static_cast<unsigned char>(p_[i_ + k]));
          steps->push_back(s);
        }
        i_ += n;
        if (i_ < p_.size() && is_quantifier_start(p_[i_])) return false;
        continue;
      }
      LinearRule::Step s;
      if (!parse_atom(&s)) return false;
      if (!parse_quantifier(&s.min, &s.max)) return false;
      if (s.max == 0) return false;
      steps->push_back(s);
    }
    return open.empty() && !steps->empty();
  }

 private:
  char peek(size_t ahead) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : '\0'; }
  static bool is_quantifier_start(char c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

  bool literal(unsigned char c, LinearRule::Step* s) {
    s->set.add(c);
    if (fold_ && is_alpha(c)) {
      s->set.add(static_cast<unsigned char>(c ^ 0x20));
      // RE2 folds k to KELVIN SIGN and s to LONG S: not ASCII.
      const unsigned char lower = static_cast<unsigned char>(c | 0x20);
      if (lower == 'k' || lower == 's') s->exact = false;
    }
    return true;
  }

  bool class_atom(size_t begin, bool exact, LinearRule::Step* s) {
    auto set = ascii_members(p_.substr(begin, i_ - begin), fold_);
    if (!set) return false;
    s->set = *set;
    s->exact = exact;
    if (fold_ && (s->set.has('k') || s->set.has('K') || s->set.has('s') || s->set.has('S'))) {
      s->exact = false;
    }
    return true;
  }

  bool parse_atom(LinearRule::Step* s) {
    const size_t begin = i_;
    const auto c = static_cast<unsigned char>(p_[i_]);
    if (c == '.') {
      ++i_;
      return class_atom(begin, false, s);
    }
    if (c == '[') return parse_class(s);
    if (c != '\\') {
      ++i_;
      return literal(c, s);
    }
    const auto e = static_cast<unsigned char>(peek(1));
    i_ += 2;
    switch (e) {
      case 'd':
      case 's':
      case 'w':
        return class_atom(begin, true, s);
      case 'D':
      case 'S':
      case 'W':
        return class_atom(begin, false, s);
      case 'n':
        return literal('\n', s);
      case 't':
        return literal('\t', s);
      case 'r':
        return literal('\r', s);
      case 'f':
        return literal('\f', s);
      case 'v':
        return literal('\v', s);
      case 'a':
        return literal('\a', s);
      case 'x': {
        auto hex = [](char h) -> int {
          if (h >= '0' && h <= '9') return h - '0';
          if (h >= 'a' && h <= 'f') return h - 'a' + 10;
          if (h >= 'A' && h <= 'F') return h - 'A' + 10;
          return -1;
        };
        const int hi = hex(peek(0)), lo = hex(peek(1));
        if (hi < 0 || lo < 0 || hi >= 8) return false;  // \x{...} and non-ASCII: RE2 decides
        i_ += 2;
        return literal(static_cast<unsigned char>(hi * 16 + lo), s);
      }
      default:
        // Escaped punctuation is the character itself; letters and digits are other syntax.
        if (e == 0 || e >= 0x80 || LinearRule::word_byte(e)) return false;
        return literal(e, s);
    }
  }

  // A class: its extent by RE2's rules (a ']' first is a member, escapes take the next byte),
  // its members from RE2. Exact when positive and written in ASCII without a negated or
  // Unicode escape inside.
  bool parse_class(LinearRule::Step* s) {
    const size_t begin = i_;
    ++i_;
    bool exact = true;
    if (peek(0) == '^') {
      exact = false;
      ++i_;
    }
    if (peek(0) == ']') ++i_;
    while (i_ < p_.size() && p_[i_] != ']') {
      const auto c = static_cast<unsigned char>(p_[i_]);
      if (c >= 0x80) exact = false;
      if (c == '[' && peek(1) == ':') {
        // [:alpha:] (ASCII) or [:^alpha:] (negated); RE2 checks the name.
        const size_t close = p_.find(":]", i_ + 2);
        if (close == std::string_view::npos) return false;
        if (peek(2) == '^') exact = false;
        i_ = close + 2;
        continue;
      }
      if (c == '\\') {
        const auto e = static_cast<unsigned char>(peek(1));
        if (e == 0) return false;
        // Only escapes that name ASCII characters keep the class exact.
        if (LinearRule::word_byte(e) && e != 'd' && e != 's' && e != 'w' && e != 'n' && e != 't' &&
            e != 'r' && e != 'f' && e != 'v' && e != 'a') {
          exact = false;
        }
        if (e == 'x' && peek(2) == '{') {
          const size_t close = p_.find('}', i_);
          if (close == std::string_view::npos) return false;
          i_ = close + 1;
          continue;
        }
        if (e == 'p' || e == 'P') {
          if (peek(2) == '{') {
            const size_t close = p_.find('}', i_);
            if (close == std::string_view::npos) return false;
            i_ = close + 1;
          } else {
            i_ += 3;
          }
          continue;
        }
        i_ += 2;
        continue;
      }
      ++i_;
    }
    if (i_ >= p_.size()) return false;
    ++i_;  // ']'
    return class_atom(begin, exact, s);
  }

  bool parse_number(uint32_t* n) {
    const size_t begin = i_;
    uint64_t v = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(p_[i_] - '0');
      if (v > 100000) return false;
      ++i_;
    }
    *n = static_cast<uint32_t>(v);
    return i_ > begin;
  }

  bool parse_quantifier(uint32_t* min, uint32_t* max) {
    *min = *max = 1;
    if (i_ >= p_.size()) return true;
    const char c = p_[i_];
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : LinearRule::kUnbounded;
    } else if (c == '{') {
      ++i_;
      if (!parse_number(min)) return false;
      *max = *min;
      if (peek(0) == ',') {
        ++i_;
        *max = LinearRule::kUnbounded;
        if (peek(0) != '}' && !parse_number(max)) return false;
      }
      if (peek(0) != '}' || *max < *min) return false;
      ++i_;
    } else {
      return true;
    }
    // Lazy or doubled quantifiers: leave them to RE2.
    return !(i_ < p_.size() && is_quantifier_start(p_[i_]));
  }

  std::string_view p_;
  bool fold_;
  size_t i_ = 0;
};

bool all_word(const ByteSet& set, bool want) {
  for (int c = 0; c < 256; ++c) {
    if (set.has(static_cast<unsigned char>(c)) &&
        LinearRule::word_byte(static_cast<unsigned char>(c)) != want) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<const LinearRule> LinearRule::compile(std::string_view pattern, bool fold) {
  std::unique_ptr<LinearRule> rule(new LinearRule());
  Parser parser(pattern, fold);
  if (!parser.parse(&rule->steps_, &rule->group_first_, &rule->group_last_, &rule->lead_boundary_,
                    &rule->trail_boundary_)) {
    return nullptr;
  }
  const std::vector<Step>& steps = rule->steps_;
  if (rule->group_first_.size() > 10) return nullptr;
  // The greedy walk is exact when a repeated step's bytes cannot start what follows it.
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].min == steps[i].max) continue;
    ByteSet follow;
    for (size_t j = i + 1; j < steps.size(); ++j) {
      follow.merge(steps[j].set);
      if (steps[j].min > 0) break;
    }
    if (steps[i].set.intersects(follow)) return nullptr;
  }
  if (rule->trail_boundary_) {
    // Every match ends with a byte of the last step (it takes at least one), so the walk
    // decides the steps before it; if its count varies, its shorter ends have one of its bytes
    // on both sides, the same kind, so none is a boundary: only the greedy end can be.
    const Step& tail = steps.back();
    if (tail.min == 0) return nullptr;
    if (tail.min != tail.max && !all_word(tail.set, true) && !all_word(tail.set, false)) {
      return nullptr;
    }
  }
  for (Step& s : rule->steps_) {
    s.vector = s.max > 1 && s.set.words[2] == 0 && s.set.words[3] == 0;
    for (unsigned c = 0; c < 0x80; ++c) {
      if (s.set.has(static_cast<unsigned char>(c))) s.nibbles[c & 15] |= uint8_t(1u << (c >> 4));
    }
  }
  rule->opens_.assign(steps.size() + 1, 0);
  rule->closes_.assign(steps.size() + 1, 0);
  for (size_t g = 1; g < rule->group_first_.size(); ++g) {
    rule->opens_[rule->group_first_[g]] |= static_cast<uint16_t>(1u << g);
    rule->closes_[rule->group_last_[g]] |= static_cast<uint16_t>(1u << g);
  }
  rule->prefix_offsets_.push_back(0);
  for (const Step& s : steps) {
    if (!s.exact || rule->prefix_.size() >= kMaxPrefix) break;
    if (s.min == 0) break;
    if (s.min == s.max && rule->prefix_.size() + s.min <= kMaxPrefix) {
      rule->prefix_.insert(rule->prefix_.end(), s.min, s.set);
      ++rule->prefix_steps_;
      rule->prefix_bytes_ += s.min;
      rule->prefix_offsets_.push_back(static_cast<uint32_t>(rule->prefix_bytes_));
      continue;
    }
    rule->prefix_.push_back(s.set);  // the first byte of a longer or variable step
    break;
  }
  return rule;
}

namespace {

bool cpu_has_vector_walk() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("ssse3");
#else
  return false;
#endif
}

std::atomic<bool> vector_walk{cpu_has_vector_walk()};

#if defined(__x86_64__)
// How many bytes from *pos step `s` takes, 16 at a time while 16 fit, up to `room` (its maximum
// less what it took): stops at the first byte not in the set (*pos then points at it; the byte
// loop decides it, a non-ASCII one included) or where fewer than 16 bytes are left. The set's
// membership is looked up by each byte's two halves (pshufb): the low half selects the byte of
// `nibbles` whose bits are the high halves in the set; high halves of 8 and more (non-ASCII
// bytes) select no bit.
__attribute__((target("ssse3"))) uint32_t walk_vector(const LinearRule::Step& s,
                                                      const unsigned char* bytes, size_t size,
                                                      size_t* pos, uint32_t room) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.nibbles));
  const __m128i bit_of_high =
      _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, static_cast<char>(128), 0, 0, 0, 0, 0, 0, 0, 0);
  const __m128i low_half = _mm_set1_epi8(0x0f);
  size_t p = *pos;
  uint32_t n = 0;
  while (p + 16 <= size && n < room) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + p));
    const __m128i in_low = _mm_shuffle_epi8(table, _mm_and_si128(v, low_half));
    const __m128i high =
        _mm_shuffle_epi8(bit_of_high, _mm_and_si128(_mm_srli_epi16(v, 4), low_half));
    const auto outside = static_cast<uint32_t>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(in_low, high), _mm_setzero_si128())));
    uint32_t take = outside == 0 ? 16 : static_cast<uint32_t>(__builtin_ctz(outside));
    take = std::min(take, room - n);
    p += take;
    n += take;
    if (take < 16) break;
  }
  *pos = p;
  return n;
}
#endif

// Records, for the groups in `opens` and `closes`, that they begin or end at `pos`.
void mark(GroupSpans* groups, unsigned opens, unsigned closes, size_t pos) {
  for (; opens != 0; opens &= opens - 1) groups->begin[__builtin_ctz(opens)] = pos;
  for (; closes != 0; closes &= closes - 1) groups->end[__builtin_ctz(closes)] = pos;
}

}  // namespace

bool LinearRule::limit_vector_walk_for_testing(bool allow) {
  vector_walk.store(allow && cpu_has_vector_walk());
  return vector_walk.load();
}

LinearRule::Result LinearRule::match(std::string_view text, size_t at, size_t* end,
                                     GroupSpans* groups, bool prefix_known) const {
  if (lead_boundary_ && !word_boundary(text, at)) {
    *end = at;
    return Result::kNoMatch;
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t p = at;
  size_t i = 0;
  if (prefix_known) {
    // The prefix's steps all take their fixed count: they are where the prefilter saw them.
    i = prefix_steps_;
    p = at + prefix_bytes_;
    if (groups != nullptr) {
      for (size_t k = 0; k < prefix_steps_; ++k) {
        if ((opens_[k] | closes_[k]) != 0)
          mark(groups, opens_[k], closes_[k], at + prefix_offsets_[k]);
      }
    }
  }
  for (; i < steps_.size(); ++i) {
    if (groups != nullptr && (opens_[i] | closes_[i]) != 0) mark(groups, opens_[i], closes_[i], p);
    const Step& s = steps_[i];
    uint32_t n = 0;
#if defined(__x86_64__)
    if (s.vector && vector_walk.load(std::memory_order_relaxed)) {
      n = walk_vector(s, bytes, size, &p, s.max);
    }
#endif
    while (n < s.max && p < size) {
      const unsigned char c = bytes[p];
      if (!s.set.has(c)) {
        if (c >= 0x80 && !s.exact) return Result::kUnknown;
        break;
      }
      ++p;
      ++n;
    }
    if (n < s.min) {
      *end = p;
      return Result::kNoMatch;
    }
  }
  if (trail_boundary_ && !word_boundary(text, p)) {
    *end = p;
    return Result::kNoMatch;
  }
  if (groups != nullptr) {
    mark(groups, opens_[i], closes_[i], p);
    groups->begin[0] = at;
    groups->end[0] = p;
  }
  *end = p;
  return Result::kMatch;
}

}  // namespace tidegate::dataplane::filters
