#include "substitution/prefix_regex.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <utility>
#include <vector>

namespace tidegate::substitution {
namespace {

// Only as much structure as the rewrite needs; atoms stay as the user wrote them.
struct Node {
  enum class Kind { kAtom, kAssert, kFlags, kConcat, kAlt, kRepeat, kGroup };
  Kind kind = Kind::kAtom;
  std::string text;  // kAtom: verbatim; kFlags: "(?i)"; kGroup: its non-capturing opener
  std::vector<Node> kids;
  int min = 0;
  int max = -1;  // -1: unbounded
};

Node make(Node::Kind kind) {
  Node n;
  n.kind = kind;
  return n;
}

// Patterns nest deeper than this only in tests of parsers; RE2 would refuse the rewrite anyway.
constexpr int kMaxDepth = 100;

size_t utf8_length(unsigned char lead) {
  if (lead < 0xc0) return 1;
  if (lead < 0xe0) return 2;
  if (lead < 0xf0) return 3;
  return 4;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  std::optional<Node> parse() {
    Node n = parse_alt();
    if (!ok_ || i_ != s_.size()) return std::nullopt;
    return n;
  }

 private:
  bool at_end() const { return i_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }

  Node parse_alt() {
    Node alt = make(Node::Kind::kAlt);
    // A standalone (?i) lasts to the end of its group, across '|': later branches inherit it.
    std::vector<Node> carried;
    while (ok_) {
      Node seq = make(Node::Kind::kConcat);
      seq.kids = carried;
      while (ok_ && !at_end() && peek() != '|' && peek() != ')') {
        std::vector<Node> atoms;
        parse_atoms(&atoms);
        if (!ok_ || atoms.empty()) break;
        if (atoms.size() == 1 && atoms[0].kind == Node::Kind::kFlags) {
          // RE2 lets `x(?i){2}` repeat the x; rather than mimic that, refuse it.
          const size_t here = i_;
          int min = 0, max = 0;
          if (parse_quantifier(&min, &max)) {
            ok_ = false;
            i_ = here;
            break;
          }
          carried.push_back(atoms[0]);
          seq.kids.push_back(std::move(atoms[0]));
          continue;
        }
        for (size_t k = 0; k + 1 < atoms.size(); ++k) seq.kids.push_back(std::move(atoms[k]));
        Node last = std::move(atoms.back());
        int min = 0, max = 0;
        while (ok_ && parse_quantifier(&min, &max)) {
          Node rep = make(Node::Kind::kRepeat);
          rep.min = min;
          rep.max = max;
          rep.kids.push_back(std::move(last));
          last = std::move(rep);
        }
        seq.kids.push_back(std::move(last));
      }
      alt.kids.push_back(std::move(seq));
      if (!at_end() && peek() == '|') {
        ++i_;
        continue;
      }
      break;
    }
    return alt;
  }

  // Parses `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` (and a trailing non-greedy `?`, which does not
  // change the language). A `{` that does not form a repetition is a literal, as in RE2.
  bool parse_quantifier(int* min, int* max) {
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : -1;
      ++i_;
    } else if (c == '{') {
      size_t j = i_ + 1;
      auto number = [&](int* out) {
        const size_t start = j;
        int64_t v = 0;
        while (j < s_.size() && is_digit(s_[j]) && j - start < 6) v = v * 10 + (s_[j++] - '0');
        *out = static_cast<int>(v);
        return j > start;
      };
      int lo = 0, hi = 0;
      if (!number(&lo)) return false;
      if (j < s_.size() && s_[j] == ',') {
        ++j;
        if (!number(&hi)) hi = -1;
      } else {
        hi = lo;
      }
      if (j >= s_.size() || s_[j] != '}') return false;
      i_ = j + 1;
      *min = lo;
      *max = hi;
    } else {
      return false;
    }
    if (peek() == '?') ++i_;
    return true;
  }

  void parse_atoms(std::vector<Node>* out) {
    const char c = peek();
    if (c == '(') {
      parse_group(out);
    } else if (c == '[') {
      const size_t start = i_;
      skip_class();
      if (ok_) out->push_back(atom(s_.substr(start, i_ - start)));
    } else if (c == '\\') {
      parse_escape(out);
    } else if (c == '^' || c == '$') {
      ++i_;
      Node a = make(Node::Kind::kAssert);
      a.text = std::string(1, c);
      out->push_back(std::move(a));
    } else if (c == '*' || c == '+' || c == '?') {
      ok_ = false;  // RE2 rejects a repetition without an argument; we never see valid ones here
    } else if (c == '{') {
      ++i_;
      out->push_back(atom("\\{"));
    } else {
      const size_t n = utf8_length(static_cast<unsigned char>(c));
      if (i_ + n > s_.size()) {
        ok_ = false;
        return;
      }
      out->push_back(atom(s_.substr(i_, n)));
      i_ += n;
    }
  }

  static Node atom(std::string_view text) {
    Node n = make(Node::Kind::kAtom);
    n.text = std::string(text);
    return n;
  }

  void parse_group(std::vector<Node>* out) {
    ++i_;  // '('
    std::string opener = "(?:";
    if (peek() == '?') {
      if (peek(1) == 'P' || peek(1) == '<') {
        const size_t close = s_.find('>', i_);
        if (close == std::string_view::npos) {
          ok_ = false;
          return;
        }
        i_ = close + 1;
      } else {
        size_t j = i_ + 1;
        while (j < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[j])) || s_[j] == '-')) {
          ++j;
        }
        if (j >= s_.size()) {
          ok_ = false;
          return;
        }
        const std::string flags(s_.substr(i_ + 1, j - i_ - 1));
        if (s_[j] == ')') {
          Node f = make(Node::Kind::kFlags);
          f.text = "(?" + flags + ")";
          i_ = j + 1;
          out->push_back(std::move(f));
          return;
        }
        if (s_[j] != ':') {
          ok_ = false;
          return;
        }
        opener = "(?" + flags + ":";
        i_ = j + 1;
      }
    }
    if (++depth_ > kMaxDepth) {
      ok_ = false;
      return;
    }
    Node inner = parse_alt();
    --depth_;
    if (!ok_ || peek() != ')') {
      ok_ = false;
      return;
    }
    ++i_;
    Node g = make(Node::Kind::kGroup);
    g.text = std::move(opener);
    g.kids.push_back(std::move(inner));
    out->push_back(std::move(g));
  }

  // Skips `{...}` after \x or \p when present, else `single` characters.
  void skip_braced_or(size_t single) {
    if (peek() == '{') {
      const size_t close = s_.find('}', i_);
      if (close == std::string_view::npos) {
        ok_ = false;
        return;
      }
      i_ = close + 1;
    } else {
      i_ = std::min(s_.size(), i_ + single);
    }
  }

  // Moves past one escape sequence (inside or outside a class), the backslash included.
  void skip_escape() {
    ++i_;  // '\'
    if (at_end()) {
      ok_ = false;
      return;
    }
    const char c = peek();
    ++i_;
    if (c == 'x') {
      skip_braced_or(2);
    } else if (c == 'p' || c == 'P') {
      skip_braced_or(1);
    } else if (c >= '0' && c <= '7') {
      for (int k = 0; k < 2 && peek() >= '0' && peek() <= '7'; ++k) ++i_;
    } else {
      i_ += utf8_length(static_cast<unsigned char>(c)) - 1;
    }
  }

  void skip_class() {
    ++i_;  // '['
    if (peek() == '^') ++i_;
    if (peek() == ']') ++i_;  // a leading ']' is a literal
    while (ok_) {
      if (at_end()) {
        ok_ = false;
        return;
      }
      const char c = peek();
      if (c == ']') {
        ++i_;
        return;
      }
      if (c == '\\') {
        skip_escape();
      } else if (c == '[' && peek(1) == ':') {
        const size_t close = s_.find(":]", i_ + 2);
        i_ = close == std::string_view::npos ? i_ + 1 : close + 2;
      } else {
        ++i_;
      }
    }
  }

  void parse_escape(std::vector<Node>* out) {
    const char c = peek(1);
    if (c == 'b' || c == 'B' || c == 'A' || c == 'z') {
      Node a = make(Node::Kind::kAssert);
      a.text = std::string(s_.substr(i_, 2));
      i_ += 2;
      out->push_back(std::move(a));
      return;
    }
    if (c == 'Q') {
      // \Q...\E quotes literally; each character becomes its own (escaped) atom.
      i_ += 2;
      const size_t end = s_.find("\\E", i_);
      const size_t stop = end == std::string_view::npos ? s_.size() : end;
      while (i_ < stop) {
        const unsigned char ch = static_cast<unsigned char>(s_[i_]);
        const size_t n = std::min(utf8_length(ch), stop - i_);
        std::string text(s_.substr(i_, n));
        if (n == 1 && !std::isalnum(ch) && ch >= 0x20 && ch < 0x7f) text.insert(0, "\\");
        if (n == 1 && (ch < 0x20 || ch == 0x7f)) {
          static constexpr char kHex[] = "0123456789abcdef";
          text = std::string("\\x") + kHex[ch >> 4] + kHex[ch & 0xf];
        }
        out->push_back(atom(text));
        i_ += n;
      }
      i_ = end == std::string_view::npos ? s_.size() : end + 2;
      return;
    }
    const size_t start = i_;
    skip_escape();
    if (ok_) out->push_back(atom(s_.substr(start, i_ - start)));
  }

  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
  bool ok_ = true;
};

bool zero_width(const Node& n) {
  return n.kind == Node::Kind::kAssert || n.kind == Node::Kind::kFlags;
}

std::string quantifier(int min, int max) {
  if (max < 0) {
    if (min == 0) return "*";
    if (min == 1) return "+";
    return "{" + std::to_string(min) + ",}";
  }
  return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

// Each alternative goes in a capturing group: RE2 20220601 merges character classes across '|'
// wrongly (google/re2#467), which here would lose prefixes; it never merges groups. Nobody reads
// these groups.
template <typename Emit>
std::string join_alternatives(const Node& n, Emit emit) {
  if (n.kids.size() == 1) return "(?:" + emit(n.kids[0]) + ")";
  std::string out = "(?:";
  for (size_t k = 0; k < n.kids.size(); ++k) {
    if (k) out += '|';
    out += "(" + emit(n.kids[k]) + ")";
  }
  return out + ")";
}

std::string prefix(const Node& n);

// The node's own language, assertions dropped and groups non-capturing.
std::string full(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kAtom:
    case Node::Kind::kFlags:
      return n.text;
    case Node::Kind::kAssert:
      return "";
    case Node::Kind::kConcat: {
      std::string out;
      for (const auto& k : n.kids) out += full(k);
      return out;
    }
    case Node::Kind::kAlt:
      return join_alternatives(n, full);
    case Node::Kind::kRepeat: {
      const std::string inner = full(n.kids[0]);
      if (inner.empty()) return "";
      return "(?:" + inner + ")" + quantifier(n.min, n.max);
    }
    case Node::Kind::kGroup:
      return n.text + full(n.kids[0]) + ")";
  }
  return "";
}

// The node's own language with its assertions: the rule as written, groups non-capturing.
std::string exact(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kAtom:
    case Node::Kind::kFlags:
    case Node::Kind::kAssert:
      return n.text;
    case Node::Kind::kConcat: {
      std::string out;
      for (const auto& k : n.kids) out += exact(k);
      return out;
    }
    case Node::Kind::kAlt: {
      // Non-capturing, unlike join_alternatives: RE2 must see the rule as the rule's own RE2
      // does (including its factoring), or the joined search and the rule would disagree.
      std::string out = "(?:";
      for (size_t k = 0; k < n.kids.size(); ++k) {
        if (k) out += '|';
        out += exact(n.kids[k]);
      }
      return out + ")";
    }
    case Node::Kind::kRepeat: {
      const std::string inner = exact(n.kids[0]);
      if (full(n.kids[0]).empty()) return n.min == 0 ? "" : inner;  // repeated assertion
      return "(?:" + inner + ")" + quantifier(n.min, n.max);
    }
    case Node::Kind::kGroup:
      return n.text + exact(n.kids[0]) + ")";
  }
  return "";
}

std::string prefix(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kAtom:
      return "(?:" + n.text + ")?";
    case Node::Kind::kFlags:
      return n.text;
    case Node::Kind::kAssert:
      return "";
    case Node::Kind::kConcat: {
      // Built from the right: Pref(x rest) = Pref(x) | x Pref(rest), nested so that the size
      // stays linear in the pattern.
      std::string p;
      for (size_t k = n.kids.size(); k-- > 0;) {
        const Node& x = n.kids[k];
        if (zero_width(x)) {
          p = full(x) + p;
        } else if (p.empty()) {
          p = prefix(x);
        } else {
          p = "(?:" + prefix(x) + "|" + full(x) + p + ")";
        }
      }
      return p;
    }
    case Node::Kind::kAlt:
      return join_alternatives(n, prefix);
    case Node::Kind::kRepeat: {
      const std::string f = full(n.kids[0]);
      if (n.max == 0 || f.empty()) return "";
      const std::string p = prefix(n.kids[0]);
      if (n.max < 0) return "(?:" + f + ")*" + p;
      if (n.max == 1) return p;
      return "(?:" + f + "){0," + std::to_string(n.max - 1) + "}" + p;
    }
    case Node::Kind::kGroup:
      return n.text + prefix(n.kids[0]) + ")";
  }
  return "";
}

// The character a literal atom stands for, or nullopt when the atom is not a plain literal.
std::optional<std::string> literal_char(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const auto first = static_cast<unsigned char>(text[0]);
  if (first >= 0x80) return text;  // a UTF-8 character
  if (text.size() == 1) {
    if (std::isalnum(first) ||
        std::string_view(" !\"#%&',-/:;<=>@_`~").find(text[0]) != std::string_view::npos) {
      return text;
    }
    return std::nullopt;
  }
  if (text.size() == 2 && text[0] == '\\' && std::ispunct(static_cast<unsigned char>(text[1]))) {
    return text.substr(1);
  }
  return std::nullopt;
}

// Appends what `n` contributes to the literal prefix; false when the literal ends inside `n`.
// With `whole`, the literal must be all of `n` (no assertion, no repeat) and a folded k or s is
// kept (see LiteralPrefix::whole).
bool collect_literal(const Node& n, bool whole, std::string* bytes, bool* fold, int depth = 0) {
  switch (n.kind) {
    case Node::Kind::kAlt:
      return n.kids.size() == 1 && collect_literal(n.kids[0], whole, bytes, fold, depth);
    case Node::Kind::kConcat:
      for (const auto& k : n.kids) {
        if (!collect_literal(k, whole, bytes, fold, depth)) return false;
      }
      return true;
    case Node::Kind::kAssert:
      return !whole;
    case Node::Kind::kFlags: {
      const bool touches_i = n.text.find('i') != std::string::npos;
      if (!touches_i) return true;
      // A (?i) inside a group lasts to the group's end only: one fold flag for the whole literal
      // cannot say that, so the whole literal stops there (the prefix may fold too much: that
      // only adds candidates).
      if (bytes->empty() && n.text == "(?i)" && (!whole || depth == 0)) {
        *fold = true;
        return true;
      }
      return false;
    }
    case Node::Kind::kGroup:
      return n.text == "(?:" && collect_literal(n.kids[0], whole, bytes, fold, depth + 1);
    case Node::Kind::kRepeat:
      if (!whole && n.min >= 1 && n.kids[0].kind == Node::Kind::kAtom) {
        collect_literal(n.kids[0], whole, bytes, fold);
      }
      return false;
    case Node::Kind::kAtom: {
      std::optional<std::string> c = literal_char(n.text);
      if (!c) return false;
      if (*fold) {
        const auto b = static_cast<unsigned char>((*c)[0]);
        if (b >= 0x80) return false;
        if (!whole && std::string_view("kKsS").find((*c)[0]) != std::string_view::npos) {
          return false;
        }
      }
      *bytes += *c;
      return true;
    }
  }
  return false;
}

// Literal sets for literal_alternatives(): for a node, the strings it can match when they are a
// few literals, and the literals every non-empty match of it begins with.
struct Literals {
  // Every string the node matches, when that is a finite set of literals (at most the cap, none
  // longer than the length cap; "" when it can match empty).
  std::optional<std::vector<std::string>> exact;
  // When known: every non-empty match begins with one of these (each non-empty, at most the
  // length cap). Empty: the node has no non-empty match.
  std::optional<std::vector<std::string>> starts;
  bool nullable = true;  // unknown nodes say true: it only makes the caller look further
};

class LiteralSets {
 public:
  LiteralSets(bool fold, size_t max_count, size_t max_length)
      : fold_(fold), max_count_(max_count), max_length_(max_length) {}

  bool fold() const { return fold_; }
  void set_fold() { fold_ = true; }

  Literals of(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kAssert:
        return from_exact({""});
      case Node::Kind::kFlags:
        // A fold that starts inside the pattern cannot be said by one flag for the whole rule
        // (only a leading one, see literal_alternatives); other flags leave literals alone.
        if (n.text.find('i') == std::string::npos || (fold_ && n.text == "(?i)")) {
          return from_exact({""});
        }
        return {};
      case Node::Kind::kAtom: {
        std::optional<std::string> c = literal_char(n.text);
        if (!c) return {};
        if (fold_) {
          // Folded literals are ASCII, and not k or s (RE2 folds them to non-ASCII characters).
          const auto b = static_cast<unsigned char>((*c)[0]);
          if (b >= 0x80 || std::string_view("kKsS").find((*c)[0]) != std::string_view::npos) {
            return {};
          }
        }
        return from_exact({*c});
      }
      case Node::Kind::kGroup:
        if (n.text != "(?:") return {};  // a group with flags
        return of(n.kids[0]);
      case Node::Kind::kAlt:
        return alternation(n.kids);
      case Node::Kind::kConcat:
        return concatenation(n.kids);
      case Node::Kind::kRepeat:
        return repeat(n);
    }
    return {};
  }

 private:
  using Set = std::vector<std::string>;

  static void add(Set* set, std::string s) {
    if (std::find(set->begin(), set->end(), s) == set->end()) set->push_back(std::move(s));
  }

  Literals from_exact(Set exact) {
    Literals l;
    l.nullable = std::find(exact.begin(), exact.end(), "") != exact.end();
    Set starts;
    for (const auto& s : exact) {
      if (!s.empty()) add(&starts, s.substr(0, max_length_));
    }
    l.starts = std::move(starts);
    l.exact = std::move(exact);
    return l;
  }

  // Each of `a` followed by each of `b`: nullopt past the count cap, or past the length cap
  // unless `truncate` (then cut there: still a prefix of what follows).
  std::optional<Set> product(const Set& a, const Set& b, bool truncate) const {
    if (a.size() * b.size() > max_count_) return std::nullopt;
    Set out;
    for (const auto& x : a) {
      for (const auto& y : b) {
        std::string s = x + y;
        if (s.size() > max_length_) {
          if (!truncate) return std::nullopt;
          s.resize(max_length_);
        }
        add(&out, std::move(s));
      }
    }
    return out;
  }

  Literals alternation(const std::vector<Node>& kids) {
    Set exact, starts;
    bool exact_known = true, starts_known = true, nullable = false;
    for (const Node& k : kids) {
      Literals l = of(k);
      nullable = nullable || l.nullable;
      if (l.exact && exact_known) {
        for (auto& s : *l.exact) add(&exact, std::move(s));
      } else {
        exact_known = false;
      }
      if (l.starts && starts_known) {
        for (auto& s : *l.starts) add(&starts, std::move(s));
      } else {
        starts_known = false;
      }
    }
    if (exact_known && exact.size() <= max_count_) return from_exact(std::move(exact));
    Literals l;
    l.nullable = nullable;
    if (starts_known && starts.size() <= max_count_) l.starts = std::move(starts);
    return l;
  }

  Literals concatenation(const std::vector<Node>& kids) {
    // `heads`: what the kids so far matched (cut at the length cap), while they all matched
    // known literals; `found`: the beginnings of matches whose first non-empty piece came from a
    // kid that did not.
    Set heads = {""}, found;
    std::optional<Set> exact = Set{""};
    // Every match begins with a head (then all must be non-empty) or with one of `found`.
    auto finish = [&]() -> std::optional<Set> {
      for (const auto& h : heads) {
        if (h.empty()) return std::nullopt;
      }
      Set out = found;
      for (const auto& h : heads) add(&out, h);
      if (out.size() > max_count_) return std::nullopt;
      return out;
    };
    Literals result;
    result.nullable = false;
    bool walking = true;
    for (const Node& k : kids) {
      Literals l = of(k);
      if (exact) exact = l.exact ? product(*exact, *l.exact, false) : std::nullopt;
      if (!walking) continue;
      if (l.exact) {
        // Heads are only ever prefixes of what follows: cut at the length cap, they stay so.
        if (std::optional<Set> longer = product(heads, *l.exact, true)) {
          heads = std::move(*longer);
          continue;
        }
      }
      std::optional<Set> begun = l.starts ? product(heads, *l.starts, true) : std::nullopt;
      if (!begun) {
        result.starts = finish();
        walking = false;
        continue;
      }
      for (auto& s : *begun) add(&found, std::move(s));
      if (!l.nullable) {
        result.starts = found.size() <= max_count_ ? std::optional<Set>(found) : std::nullopt;
        walking = false;
      }
      // A kid that may match empty: the heads go on past it too.
    }
    if (exact && exact->size() <= max_count_) return from_exact(std::move(*exact));
    if (walking) {
      // Every kid may have matched empty or a known literal.
      result.starts = finish();
      result.nullable = std::find(heads.begin(), heads.end(), "") != heads.end();
    }
    return result;
  }

  Literals repeat(const Node& n) {
    Literals x = of(n.kids[0]);
    if (n.max == 0) return from_exact({""});
    if (x.exact && n.min <= 1 && n.max == 1) {
      Set exact = *x.exact;
      if (n.min == 0) add(&exact, "");
      return from_exact(std::move(exact));
    }
    Literals l;
    // A non-empty match of x{m,n} begins with a non-empty match of x.
    l.starts = std::move(x.starts);
    l.nullable = n.min == 0 || x.nullable;
    return l;
  }

  bool fold_;
  size_t max_count_;
  size_t max_length_;
};

}  // namespace

LiteralPrefix literal_prefix(std::string_view pattern, bool fold) {
  LiteralPrefix out;
  out.fold = fold;
  Parser parser(pattern);
  std::optional<Node> root = parser.parse();
  if (!root) return out;
  collect_literal(*root, false, &out.bytes, &out.fold);
  std::string whole;
  bool whole_fold = fold;
  if (collect_literal(*root, true, &whole, &whole_fold) && !whole.empty()) {
    out.whole = std::move(whole);
  }
  return out;
}

LiteralAlternatives literal_alternatives(std::string_view pattern, bool fold, size_t max_count,
                                         size_t max_length) {
  LiteralAlternatives out;
  Parser parser(pattern);
  std::optional<Node> root = parser.parse();
  if (!root || max_count == 0 || max_length == 0) return out;
  LiteralSets sets(fold, max_count, max_length);
  // A leading (?i) folds the whole rule (the parser carries it into every later branch).
  const Node& first = root->kids[0];
  if (!first.kids.empty() && first.kids[0].kind == Node::Kind::kFlags &&
      first.kids[0].text == "(?i)") {
    sets.set_fold();
  }
  Literals l = sets.of(*root);
  if (!l.starts || l.starts->empty() || l.nullable) return out;
  // A literal that begins with another one adds nothing: where it lies, so does the shorter
  // (folded: in either case).
  auto begins_with = [&](const std::string& s, const std::string& t) {
    if (t.size() > s.size()) return false;
    for (size_t i = 0; i < t.size(); ++i) {
      const auto a = static_cast<unsigned char>(s[i]), b = static_cast<unsigned char>(t[i]);
      if (a != b && !(sets.fold() && a < 0x80 && std::tolower(a) == std::tolower(b))) return false;
    }
    return true;
  };
  std::vector<std::string> literals;
  for (size_t i = 0; i < l.starts->size(); ++i) {
    const std::string& s = (*l.starts)[i];
    bool covered = false;
    for (size_t j = 0; j < l.starts->size() && !covered; ++j) {
      const std::string& t = (*l.starts)[j];
      // Of two equal under folding, the first stays.
      covered = j != i && begins_with(s, t) && (t.size() < s.size() || j < i);
    }
    if (!covered) literals.push_back(s);
  }
  out.literals = std::move(literals);
  out.fold = sets.fold();
  return out;
}

std::optional<std::string> embeddable_pattern(std::string_view pattern) {
  Parser parser(pattern);
  std::optional<Node> root = parser.parse();
  if (!root) return std::nullopt;
  return exact(*root);
}

std::optional<std::string> prefix_pattern(std::string_view pattern) {
  Parser parser(pattern);
  std::optional<Node> root = parser.parse();
  if (!root) return std::nullopt;
  return prefix(*root);
}

}  // namespace tidegate::substitution
