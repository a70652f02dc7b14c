#pragma once
// The prefix closure of an RE2 pattern, as another RE2 pattern.
//
// The streaming engine must know whether the bytes from a position p to the end of what has
// arrived could still grow into a match once more bytes come. RE2 answers "does this text match",
// never "could this text be the start of a match", so we rewrite each rule into a pattern whose
// language contains every prefix of every string the rule matches, and ask RE2 about that one.
//
// The rewrite walks the pattern's structure (alternation, concatenation, groups, repetition) and
// copies atoms (literals, classes, escapes, `.`) verbatim, so RE2 keeps its own meaning for them:
//   Pref(atom)      = atom?
//   Pref(x y)       = Pref(x) | x Pref(y)
//   Pref(x | y)     = Pref(x) | Pref(y)
//   Pref(x{m,n})    = x{0,n-1} Pref(x)        (x* and x+: x* Pref(x))
//   Pref((x))       = (?:Pref(x)),  flag groups keep their flags
// Empty-width assertions (^ $ \A \z \b \B) become empty: the result is a superset of the exact
// prefix language, which only makes the engine hold bytes a little longer, never lose a match.
// Capturing groups become non-capturing; alternatives get capturing groups nobody reads (RE2
// 20220601 merges character classes across `|` wrongly, google/re2#467, but never merges groups).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidegate::substitution {

// Returns the prefix pattern of `pattern` (which must already compile with RE2), or nullopt when
// the pattern uses syntax this rewrite does not understand (the caller then holds conservatively).
std::optional<std::string> prefix_pattern(std::string_view pattern);

// `pattern` rewritten so that it can sit inside a larger pattern: groups non-capturing (rules may
// reuse group names), \Q...\E expanded (an unclosed \Q would swallow what follows). Nullopt when
// the pattern uses syntax the rewrite does not understand.
std::optional<std::string> embeddable_pattern(std::string_view pattern);

// The literal that every match of `pattern` begins with (leading assertions skipped), for the
// prefilter that skips bytes no rule can start at; empty when there is none. `fold` says whether
// the rule is case-insensitive (its flag, or a leading (?i)); folded literals are ASCII only and
// stop before k and s, which RE2 also folds to non-ASCII characters (KELVIN SIGN, LONG S).
struct LiteralPrefix {
  std::string bytes;
  bool fold = false;
  // The whole pattern, when it is nothing but a literal (no assertion, no repeat, no
  // alternative; folded: ASCII only), else empty. Its k and s are kept: where these bytes are
  // (folded: in either ASCII case), the pattern matches exactly them, since a literal can match
  // only one way at a given start; elsewhere (a KELVIN SIGN for k, say) only RE2 can tell.
  std::string whole;
};
LiteralPrefix literal_prefix(std::string_view pattern, bool fold);

// Literals one of which begins every match of `pattern`, for rules without one literal prefix:
// the beginnings of an alternation's branches and of what optional parts leave
// (`(www\.)?example\.com`: "www.example.com" and "example.com"; `(http|ftp)s?://`: "http://",
// "https://", "ftp://", "ftps://"), leading assertions skipped, literals joined through
// concatenation, alternation, `?`, `{0}` and plain groups, a repeat of one or more giving its
// first iteration. At most `max_count` literals of at most `max_length` bytes: longer ones are
// cut, and a product that would pass the count stops growing (its literals stay shorter).
// Folded as literal_prefix (`fold`: the rule's flag; a leading (?i) sets it too): ASCII only, and
// a literal stops before k and s. None when some match may begin otherwise: a class, `.`, an
// escape such as \n, a group with flags or a fold that starts or ends inside the pattern, a
// folded branch beginning with k, s or a non-ASCII character, more than max_count literals at
// one point; nor when the pattern can match the empty string.
struct LiteralAlternatives {
  std::vector<std::string> literals;
  bool fold = false;
};
LiteralAlternatives literal_alternatives(std::string_view pattern, bool fold, size_t max_count,
                                         size_t max_length);

}  // namespace tidegate::substitution
