#pragma once
// A rule whose longest match a byte loop finds without RE2 (issue #18: pages dense with matches).
//
// Most rules people write are a row of byte classes, each repeated a fixed or bounded number of
// times: `class="[a-z-]+"`, `UA-[0-9]+-[0-9]+`, `\bcrate\b`, `[Cc]argo`,
// `href="http://([^"]*)"`. When each repeated class cannot also start what follows it (`[a-z-]+`
// then `"`), a match can take only one way through the pattern: each class takes all the bytes
// it can, up to its maximum. The longest match anchored at a position, and its groups, are then
// what that greedy walk finds, and it costs a few nanoseconds where an RE2 call costs a few
// hundred (a search's setup, its cache lock). RE2 stays the definition: whatever this matcher
// cannot decide exactly it answers kUnknown, and the caller asks RE2.
//
// The shape accepted (anything else: compile() returns null and RE2 runs the rule):
//   - atoms: ASCII characters and escaped punctuation, \n \t \r \f \v \a, \xHH below 0x80, \d \w \s
//     \D \W \S, `.`, classes [...] (negated too); a literal non-ASCII character (UTF-8, without
//     case folding) becomes one step per byte;
//   - each atom repeated by *, +, ?, {n}, {n,}, {n,m} (not lazy), or once;
//   - groups, capturing or not, that are not repeated (they only mark where $1..$9 lie);
//   - \b at the very start and at the very end; case folding for the whole rule (the flag, or a
//     leading (?i));
//   - and the condition that makes the greedy walk exact: a repeated step's bytes are disjoint
//     from the bytes that can follow it (the next steps up to the first one that must take a
//     byte); a final \b after a step of variable count needs that step to take at least one byte
//     and to be all word or all non-word bytes, so that only its greedy end can be a boundary.
//
// Each step's set of ASCII bytes is computed by RE2 itself (the atom matched against each byte),
// so classes, escapes and case folding keep RE2's meaning. A step is `exact` when it can match no
// character outside ASCII (a positive class written in ASCII; folded k and s are not: RE2 folds
// them to KELVIN SIGN and LONG S); where a non-exact step meets a byte >= 0x80 the answer is
// kUnknown. Invalid UTF-8 bytes are never matched by RE2's classes, and never by an exact step.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace tidegate::dataplane::filters {

// A set of bytes.
struct ByteSet {
  uint64_t words[4] = {0, 0, 0, 0};
  bool has(unsigned char c) const { return (words[c >> 6] >> (c & 63)) & 1; }
  void add(unsigned char c) { words[c >> 6] |= uint64_t{1} << (c & 63); }
  bool intersects(const ByteSet& o) const {
    return ((words[0] & o.words[0]) | (words[1] & o.words[1]) | (words[2] & o.words[2]) |
            (words[3] & o.words[3])) != 0;
  }
  void merge(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
  }
  bool operator==(const ByteSet&) const = default;
};

// Where a match's groups lie: group g (1..9) is [begin[g], end[g]); group 0 is the match.
// Left uninitialized (it sits on the per-match path); only what match() wrote is read.
struct GroupSpans {
  size_t begin[10];
  size_t end[10];
};

class LinearRule {
 public:
  // Null when `pattern` (with `fold`: the rule's "i" flag) is not of the shape above.
  static std::unique_ptr<const LinearRule> compile(std::string_view pattern, bool fold);

  enum class Result { kNoMatch, kMatch, kUnknown };
  // The longest match anchored at `at` in `text` (bytes before `at` are the context of a leading
  // \b; the end of `text` ends the match as it would RE2's): kMatch with *end and, when `groups`
  // is not null, the groups' spans (group 0 too); kNoMatch; or kUnknown where a non-ASCII byte
  // meets a step that is not exact (ask RE2).
  // With `prefix_known`, the caller has checked that prefix() lies at `at` (the prefilter
  // does): the steps it covers are not walked again.
  // On kNoMatch, *end is where the walk stopped (the bytes a search walked are its cost:
  // RuleSet::Match::examined).
  Result match(std::string_view text, size_t at, size_t* end, GroupSpans* groups,
               bool prefix_known = false) const;

  // The byte sets every match begins with, one per byte (the leading exact steps of count one,
  // those of a fixed count repeated, then the first set of a step of variable count if it takes
  // at least one byte): what the prefilter looks for. At most kMaxPrefix; may be empty.
  static constexpr size_t kMaxPrefix = 16;
  const std::vector<ByteSet>& prefix() const { return prefix_; }
  // When prefix() is the whole rule (every step exact and of a fixed count): the length of every
  // match; 0 otherwise. Such a rule matches where its prefix lies and its \b hold.
  size_t fixed_length() const { return prefix_steps_ == steps_.size() ? prefix_bytes_ : 0; }
  bool lead_boundary() const { return lead_boundary_; }
  bool trail_boundary() const { return trail_boundary_; }
  // A byte of \w ([0-9A-Za-z_]).
  static bool word_byte(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  // RE2's \b at `pos`: a word byte on exactly one side (the text's ends count as non-word).
  static bool word_boundary(std::string_view text, size_t pos) {
    const bool before = pos > 0 && word_byte(static_cast<unsigned char>(text[pos - 1]));
    const bool after = pos < text.size() && word_byte(static_cast<unsigned char>(text[pos]));
    return before != after;
  }

  struct Step {
    ByteSet set;
    bool exact = true;
    uint32_t min = 1;
    uint32_t max = 1;  // kUnbounded: no maximum
    // A repeated step of ASCII bytes is walked 16 bytes at a time where the CPU can (SSSE3):
    // bit h of nibbles[l] when byte (h << 4 | l) is in `set`.
    bool vector = false;
    uint8_t nibbles[16] = {};
  };
  static constexpr uint32_t kUnbounded = UINT32_MAX;

  // Whether repeated steps are walked with vectors (the CPU has SSSE3); tests turn it off to
  // check the byte loop too (RuleSet::limit_scan_level_for_testing does). Returns the setting
  // now in use.
  static bool limit_vector_walk_for_testing(bool allow);

 private:
  LinearRule() = default;
  std::vector<Step> steps_;
  // Capturing group g is the steps [group_first_[g], group_last_[g]); index 0 unused.
  std::vector<uint32_t> group_first_, group_last_;
  // The same by step (steps_.size() + 1 entries): bit g of opens_[i] (closes_[i]) when group g
  // begins (ends) before step i.
  std::vector<uint16_t> opens_, closes_;
  bool lead_boundary_ = false;
  bool trail_boundary_ = false;
  std::vector<ByteSet> prefix_;
  // The leading steps that prefix() covers whole (exact, of a fixed count), and their bytes.
  size_t prefix_steps_ = 0;
  size_t prefix_bytes_ = 0;
  std::vector<uint32_t> prefix_offsets_;  // the byte offset of each of those steps, and the next
};

}  // namespace tidegate::dataplane::filters
