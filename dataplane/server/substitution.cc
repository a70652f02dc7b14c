#include "server/substitution.h"

#include <algorithm>

#include <boost/beast/core/string.hpp>

#include "text/text.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

bool is_identity_encoding(std::string_view content_encoding) {
  auto v = text::trim_ows(content_encoding);
  return v.empty() || boost::beast::iequals(v, "identity");
}

SubstitutionAction decide_substitution(const runtime::CompiledSubstitution& sub,
                                       const ResponseFacts& facts) {
  if (!facts.body_expected) return SubstitutionAction::kPass;
  // A partial body cannot be rewritten: its Content-Range counts the upstream's bytes.
  if (facts.status == 206) return SubstitutionAction::kPass;
  if (facts.content_length && *facts.content_length == 0) return SubstitutionAction::kPass;
  if (!sub.applies_to(facts.content_type)) return SubstitutionAction::kPass;
  if (!is_identity_encoding(facts.content_encoding)) return SubstitutionAction::kPassCompressed;
  return SubstitutionAction::kSubstitute;
}

std::string weak_etag(std::string_view etag) {
  etag = text::trim_ows(etag);
  if (etag.empty() || etag.starts_with("W/")) return std::string(etag);
  std::string out = "W/";
  out.append(etag.data(), etag.size());
  return out;
}

void rewrite_substituted_header(http::response_header<Fields>& res, unsigned client_version) {
  res.erase(http::field::content_length);
  auto etag = res[http::field::etag];
  if (!etag.empty() && !etag.starts_with("W/")) res.set(http::field::etag, weak_etag(etag));
  // The upstream's framing goes: chunked to HTTP/1.1 clients, close-delimited to HTTP/1.0 ones.
  res.erase(http::field::transfer_encoding);
  if (client_version >= 11) res.set(http::field::transfer_encoding, "chunked");
}

void memo_validator(const http::response_header<Fields>& res, std::string* out) {
  out->clear();
  auto etag = text::trim_ows(res[http::field::etag]);
  if (!etag.empty()) {
    out->append("E:");
    out->append(etag.data(), etag.size());
    return;
  }
  auto modified = text::trim_ows(res[http::field::last_modified]);
  if (!modified.empty()) {
    out->append("L:");
    out->append(modified.data(), modified.size());
  }
}

SubstitutionPlan SubstitutionWorkerState::plan(const runtime::CompiledSubstitution& sub,
                                               std::string_view resource,
                                               std::string_view validator, unsigned status) {
  SubstitutionPlan plan;
  plan.rules = sub.rules;
  if (status != 200 || !sub.rules) return plan;
  const std::optional<filters::RuleBits> matched =
      memo.find(sub.rules_version, resource, validator);
  if (!matched) return plan;
  const size_t all = sub.rules->size();
  const uint64_t before = subsets.compiles();
  plan.rules = subsets.get(sub.rules, *matched);
  counters.subset_compiles += subsets.compiles() - before;
  if (!plan.rules) {
    plan.pass = true;
    plan.rules_skipped = all;
    ++counters.memo_skips;
  } else if (plan.rules->size() < all) {
    plan.rules_skipped = all - plan.rules->size();
    ++counters.memo_subsets;
  }
  counters.rules_skipped += plan.rules_skipped;
  return plan;
}

bool SubstitutionWorkerState::learn(const runtime::CompiledSubstitution& sub,
                                    std::string_view resource, std::string_view validator,
                                    unsigned status,
                                    const filters::SubstitutionStreamStats& stats) {
  ++counters.completed;
  counters.bytes_in += stats.bytes_in;
  counters.bytes_out += stats.bytes_out;
  counters.replacements += stats.replacements;
  counters.forced_releases += stats.forced_releases;
  counters.abandoned += stats.abandoned;
  // A forced release or an abandoned scan skipped part of the body: what matched there is
  // unknown. Keep what the memo holds (it came from a complete scan of the same representation).
  if (status != 200 || stats.forced_releases != 0 || stats.abandoned != 0 || !sub.rules) {
    return false;
  }
  if (stats.rules_matched == sub.rules->all_rules()) {
    // Every rule matched: nothing to skip, not worth an entry.
    memo.forget(sub.rules_version, resource, validator);
    return false;
  }
  if (!memo.remember(sub.rules_version, resource, validator, stats.rules_matched)) return false;
  ++counters.memo_stores;
  return true;
}

observability::SubstitutionObservation completed_observation(
    observability::LabelSetId labels, const filters::SubstitutionStreamStats& stats,
    size_t rules_skipped) {
  observability::SubstitutionObservation o;
  o.labels = labels;
  o.responses = 1;
  o.bytes_in = stats.bytes_in;
  o.bytes_out = stats.bytes_out;
  o.replacements = stats.replacements;
  o.forced_releases = stats.forced_releases;
  o.abandoned = stats.abandoned;
  o.rules_skipped = rules_skipped;
  return o;
}

observability::SubstitutionObservation memo_skip_observation(observability::LabelSetId labels,
                                                             size_t rules_skipped) {
  observability::SubstitutionObservation o;
  o.labels = labels;
  o.skipped_by_memo = 1;
  o.rules_skipped = rules_skipped;
  return o;
}

observability::SubstitutionObservation compressed_observation(observability::LabelSetId labels) {
  observability::SubstitutionObservation o;
  o.labels = labels;
  o.compressed_passthrough = 1;
  return o;
}

size_t next_substitution_slice(size_t slice, size_t consumed, std::chrono::nanoseconds spent,
                               size_t output) {
  const auto budget = std::chrono::nanoseconds(kSubstitutionSliceTime).count();
  size_t next = slice;
  if (consumed >= kSubstitutionMinSliceBytes && spent.count() > 0) {
    // The bytes the budget buys at the speed this slice ran at.
    next = static_cast<size_t>(static_cast<double>(consumed) * static_cast<double>(budget) /
                               static_cast<double>(spent.count()));
  } else if (spent.count() > budget) {
    next = slice / 2;
  }
  if (output > 2 * kSubstitutionSliceBytes) next = std::min(next, slice / 2);
  return std::clamp(next, kSubstitutionMinSliceBytes, kSubstitutionSliceBytes);
}

}  // namespace tidegate::dataplane::server
