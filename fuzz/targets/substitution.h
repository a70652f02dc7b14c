#pragma once
// Fuzz target: the streaming substitution engine (dataplane/filters/substitution/).
//
// Input: rule lines, an empty line, then the body. A rule line is `match<TAB>replace` with an
// optional `<TAB>i`; lines without a tab are patterns replaced by "[$&]". Invalid rules are
// rejected by compile() and simply left out.
//
// Invariants:
//   - compile() and the stream never crash, whatever the rules and the body;
//   - fed in pieces whose sizes come from the input, and processed in slices, the stream's output
//     equals a straightforward non-streaming reference (reference_substitute below) whenever no
//     candidate outgrew the buffer (forced_releases == 0) and the stream did not give up on its
//     CPU budget (abandoned == 0); also when every call stops at its deadline after each
//     replacement and after each candidate that failed (round 1);
//   - the bytes held back never exceed max_buffer plus the piece being processed;
//   - bytes_in and bytes_out agree with what went in and what came out;
//   - stats().rules_matched names exactly the rules that won a match in the reference, and the
//     rule set of only those rules (RuleSet::subset, what the memo runs next time) gives the
//     same output and names the same rules.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "filters/substitution/rule_set.h"
#include "filters/substitution/stream.h"

namespace tidegate::fuzz {

namespace detail {

using dataplane::filters::SubstitutionRule;

// The semantics, written the obvious way over the whole body and kept apart from the engine:
// at each position try every rule anchored there with longest-match, keep the longest (the
// earliest rule on ties), replace and skip past it, else copy one byte. Rules must be valid.
// `winners` (optional) gets bit i set when rule i replaced at least one match.
inline std::string reference_substitute(const std::vector<SubstitutionRule>& rules,
                                        std::string_view body, uint64_t* winners = nullptr) {
  if (winners != nullptr) *winners = 0;
  std::vector<std::unique_ptr<RE2>> res;
  for (const auto& r : rules) {
    RE2::Options o;
    o.set_longest_match(true);
    o.set_log_errors(false);
    o.set_case_sensitive(r.flags != "i");
    res.push_back(std::make_unique<RE2>(r.match, o));
  }
  std::string out;
  size_t p = 0;
  while (p < body.size()) {
    size_t best = rules.size();
    size_t best_len = 0;
    for (size_t i = 0; i < rules.size(); ++i) {
      re2::StringPiece m;
      if (res[i]->Match(body, p, body.size(), RE2::ANCHOR_START, &m, 1) && m.size() > best_len) {
        best = i;
        best_len = m.size();
      }
    }
    if (best == rules.size()) {
      out += body[p++];
      continue;
    }
    if (winners != nullptr) *winners |= uint64_t{1} << best;
    re2::StringPiece groups[10];
    const int n = std::min(10, res[best]->NumberOfCapturingGroups() + 1);
    res[best]->Match(body, p, p + best_len, RE2::ANCHOR_BOTH, groups, n);
    const std::string& rep = rules[best].replace;
    for (size_t k = 0; k < rep.size(); ++k) {
      const char next = k + 1 < rep.size() ? rep[k + 1] : '\0';
      if (rep[k] == '$' && next == '$') {
        out += '$';
        ++k;
      } else if (rep[k] == '$' && next == '&') {
        out.append(groups[0].data(), groups[0].size());
        ++k;
      } else if (rep[k] == '$' && next >= '1' && next <= '9') {
        const int g = next - '0';
        if (g < n && groups[g].data() != nullptr) out.append(groups[g].data(), groups[g].size());
        ++k;
      } else {
        out += rep[k];
      }
    }
    p += best_len;
  }
  return out;
}

struct SubstitutionInput {
  std::vector<SubstitutionRule> rules;
  std::string body;
};

inline SubstitutionInput parse_substitution_input(std::string_view text) {
  SubstitutionInput in;
  size_t pos = 0;
  while (pos < text.size() && in.rules.size() < 8) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = std::min(text.size(), eol + 1);
    if (line.empty()) break;
    SubstitutionRule r;
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) {
      r.match = std::string(line);
      r.replace = "[$&]";
    } else {
      r.match = std::string(line.substr(0, tab));
      std::string_view rest = line.substr(tab + 1);
      const size_t tab2 = rest.find('\t');
      r.replace = std::string(rest.substr(0, tab2));
      if (tab2 != std::string_view::npos) r.flags = std::string(rest.substr(tab2 + 1));
    }
    in.rules.push_back(std::move(r));
  }
  // The reference is quadratic for rules like `.+`; keep inputs small enough to stay quick.
  in.body = std::string(text.substr(pos, 4096));
  return in;
}

// Streams `body` through `rules` in pieces and slices chosen by `seed`; returns a failure
// description or "" and the output in *out.
inline std::string stream_substitute(
    const std::shared_ptr<const dataplane::filters::RuleSet>& rules, std::string_view body,
    uint32_t seed, size_t max_buffer, std::string* out,
    dataplane::filters::SubstitutionStreamStats* stats, bool interrupt = false) {
  dataplane::filters::SubstitutionStreamOptions options;
  options.max_buffer = max_buffer;
  if (interrupt) {
    options.clock_check_commits = 1;
    options.check_window = 1;
  }
  const auto time_limit = interrupt ? std::chrono::nanoseconds(0) : std::chrono::nanoseconds::max();
  dataplane::filters::SubstitutionStream stream(rules, out, options);
  size_t pos = 0;
  uint32_t state = seed * 2654435761u + 1;
  while (pos < body.size()) {
    state = state * 1103515245u + 12345u;
    const size_t piece = std::min<size_t>(body.size() - pos, 1 + (state >> 16) % 97);
    // Every other piece is written in place, as the proxy reads a body into the stream, in room
    // that may be larger than the piece.
    const std::span<char> space =
        (state >> 8) & 1 ? stream.write_space(piece + (state >> 9) % 5) : std::span<char>();
    if (space.empty()) {
      stream.write(body.substr(pos, piece));
    } else {
      TIDEGATE_FUZZ_CHECK(space.size() >= piece, "write_space gave " << space.size() << " bytes");
      std::copy_n(body.data() + pos, piece, space.data());
      stream.commit_write(piece);
    }
    pos += piece;
    state = state * 1103515245u + 12345u;
    const size_t slice = 1 + (state >> 16) % 61;
    bool more = true;
    while (more) {
      more = stream.process(slice, time_limit);
      // Held back: at most max_buffer; queued: at most the rest of this piece.
      TIDEGATE_FUZZ_CHECK(stream.pending_bytes() <= max_buffer + piece,
                          "held " << stream.pending_bytes() << " bytes");
    }
  }
  stream.end();
  TIDEGATE_FUZZ_CHECK(stream.done() && stream.pending_bytes() == 0, "stream not drained");
  TIDEGATE_FUZZ_CHECK(stream.stats().bytes_in == body.size(), "bytes_in");
  TIDEGATE_FUZZ_CHECK(stream.stats().bytes_out == out->size(), "bytes_out");
  *stats = stream.stats();
  return {};
}

}  // namespace detail

inline std::string run_substitution(const uint8_t* data, size_t size) {
  const detail::SubstitutionInput in = detail::parse_substitution_input(as_text(data, size));
  const auto compiled = dataplane::filters::RuleSet::compile(in.rules);
  if (!compiled.rules) {
    TIDEGATE_FUZZ_CHECK(in.rules.empty() || !compiled.errors.empty(), "no rules and no errors");
    return {};
  }
  std::vector<detail::SubstitutionRule> valid;
  for (size_t i = 0; i < compiled.rules->size(); ++i) {
    valid.push_back(in.rules[compiled.rules->rule(i).source_index]);
  }
  TIDEGATE_FUZZ_CHECK(valid.size() + compiled.errors.size() == in.rules.size(),
                      "rules lost: " << valid.size() << " + " << compiled.errors.size());
  uint64_t winners = 0;
  const std::string want = detail::reference_substitute(valid, in.body, &winners);
  for (uint32_t round = 0; round < 3; ++round) {
    std::string got;
    dataplane::filters::SubstitutionStreamStats stats;
    const size_t max_buffer = round == 2 ? 32 : dataplane::filters::kDefaultSubstitutionMaxBuffer;
    const std::string failure =
        detail::stream_substitute(compiled.rules, in.body, static_cast<uint32_t>(size) + round,
                                  max_buffer, &got, &stats, /*interrupt=*/round == 1);
    if (!failure.empty()) return failure;
    if (stats.forced_releases != 0 || stats.abandoned != 0) continue;
    TIDEGATE_FUZZ_CHECK(got == want, "round " << round << ": stream \"" << escape(got)
                                              << "\" reference \"" << escape(want) << "\"");
    TIDEGATE_FUZZ_CHECK(stats.rules_matched == winners,
                        "round " << round << ": rules matched " << stats.rules_matched
                                 << ", reference winners " << winners);
    if (round != 0) continue;
    // The memo's subset: only the rules that won.
    const auto subset = compiled.rules->subset(winners);
    if (!subset) {
      TIDEGATE_FUZZ_CHECK(winners == 0 && want == in.body, "no subset for winners " << winners);
      continue;
    }
    std::string again;
    dataplane::filters::SubstitutionStreamStats subset_stats;
    const std::string subset_failure = detail::stream_substitute(
        subset, in.body, static_cast<uint32_t>(size) + 7, max_buffer, &again, &subset_stats);
    if (!subset_failure.empty()) return subset_failure;
    if (subset_stats.forced_releases != 0 || subset_stats.abandoned != 0) continue;
    TIDEGATE_FUZZ_CHECK(again == want, "subset " << winners << ": stream \"" << escape(again)
                                                 << "\" reference \"" << escape(want) << "\"");
    TIDEGATE_FUZZ_CHECK(subset_stats.rules_matched == winners,
                        "subset " << winners << " matched " << subset_stats.rules_matched);
  }
  return {};
}

}  // namespace tidegate::fuzz
