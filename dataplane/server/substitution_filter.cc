#include "server/substitution_filter.h"

#include <algorithm>
#include <cctype>

#include "log/log.h"
#include "server/substitution.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

void SubstitutionFilter::configure(const runtime::CompiledSubstitution* substitution,
                                   std::string_view host, std::string_view path_and_query) {
  substitution_ = substitution;
  if (substitution_ == nullptr) return;
  memo_resource_.assign(host.data(), host.size());
  for (auto& c : memo_resource_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  memo_resource_.append(path_and_query.data(), path_and_query.size());
}

bool SubstitutionFilter::on_headers(http::response_header<Fields>& res,
                                    const ResponseFilterContext& context) {
  if (substitution_ == nullptr) return false;
  auto& state = worker_.substitution();
  labels_ = context.route_labels;
  status_ = context.status;
  ResponseFacts facts{context.body_expected, context.status, res[http::field::content_type],
                      res[http::field::content_encoding], context.content_length};
  switch (decide_substitution(*substitution_, facts)) {
    case SubstitutionAction::kPass:
      return false;
    case SubstitutionAction::kPassCompressed:
      ++state.counters.compressed_passthrough;
      if (auto* m = worker_.metrics()) {
        m->record_substitution(compressed_observation(labels_));
      }
      TG_DEBUG("substitution", memo_resource_ << ": Content-Encoding " << facts.content_encoding
                                              << ", relayed untouched (worker " << worker_.id()
                                              << " compressed_passthrough="
                                              << state.counters.compressed_passthrough << ")");
      return false;
    case SubstitutionAction::kSubstitute:
      break;
  }
  memo_validator(res, &memo_validator_);
  SubstitutionPlan plan =
      state.plan(*substitution_, memo_resource_, memo_validator_, context.status);
  if (plan.pass) {
    // The same representation matched no rule last time: relay it as it is (its bytes are the
    // upstream's, so Content-Length and a strong ETag stay right).
    if (auto* m = worker_.metrics()) {
      m->record_substitution(memo_skip_observation(labels_, plan.rules_skipped));
    }
    TG_DEBUG("substitution", memo_resource_ << ": memo skip (worker " << worker_.id()
                                            << " memo_skips=" << state.counters.memo_skips << ")");
    return false;
  }
  rewrite_substituted_header(res, context.client_version);
  out_.clear();
  slice_ = kSubstitutionSliceBytes;
  // The route's rules, or only those the memo says matched this representation last time.
  stream_.emplace(std::move(plan.rules), &out_,
                  filters::SubstitutionStreamOptions{substitution_->max_buffer});
  ++state.counters.responses;
  return true;
}

void SubstitutionFilter::on_data(std::string_view data, bool last) {
  if (!data.empty()) stream_->write(data);
  if (last) stream_->finish();
}

void SubstitutionFilter::commit_data(size_t n, bool last) {
  if (n != 0) stream_->commit_write(n);
  if (last) stream_->finish();
}

bool SubstitutionFilter::process() {
  const size_t queued = stream_->queued_bytes();
  const size_t output_before = out_.size();  // output of earlier slices, gathered for one write
  const auto before = stream_->stats().engine_time;
  // The time limit backs up the slice size where the cost per byte jumps within a slice.
  const bool more = stream_->process(slice_, 2 * kSubstitutionSliceTime);
  const auto spent = stream_->stats().engine_time - before;  // timed by the stream
  // Keep a turn near the time budget and the output near one slice (see kSubstitutionSliceTime).
  // A call cut at its deadline took only part of its slice (its speed is unknown): halve it.
  slice_ = stream_->interrupted()
               ? std::max(kSubstitutionMinSliceBytes, slice_ / 2)
               : next_substitution_slice(slice_, queued - stream_->queued_bytes(), spent,
                                         out_.size() - output_before);
  // Nothing to write and input left: the exchange yields before the next slice.
  if (more && out_.empty() && !stream_->done()) ++worker_.substitution().counters.yields;
  return more;
}

void SubstitutionFilter::on_end() {
  auto& state = worker_.substitution();
  auto& c = state.counters;
  const auto& st = stream_->stats();
  const size_t ran = stream_->rules() != nullptr ? stream_->rules()->size() : 0;
  const size_t rules_skipped = substitution_->rules->size() - ran;
  if (auto* m = worker_.metrics()) {
    m->record_substitution(completed_observation(labels_, st, rules_skipped));
  }
  const bool remember = state.learn(*substitution_, memo_resource_, memo_validator_, status_, st);
  if (st.abandoned != 0) {
    // At most one line per response, and such a response has cost at least the budget's 50 ms.
    TG_WARN("substitution",
            memo_resource_
                << ": the rules took more than their CPU budget ("
                << std::chrono::duration_cast<std::chrono::milliseconds>(st.engine_time).count()
                << " ms for " << st.bytes_in
                << " bytes); the rest of the body went out unmodified");
  }
  TG_DEBUG(
      "substitution",
      memo_resource_ << ": " << st.bytes_in << " -> " << st.bytes_out << " bytes, "
                     << st.replacements << " replacements, " << st.forced_releases
                     << " forced releases, " << ran << " of " << substitution_->rules->size()
                     << " rules" << (remember ? ", remembered" : "") << " (worker " << worker_.id()
                     << " responses=" << c.responses << " replacements=" << c.replacements
                     << " forced_releases=" << c.forced_releases << " abandoned=" << c.abandoned
                     << " memo_stores=" << c.memo_stores << " memo_skips=" << c.memo_skips
                     << " memo_subsets=" << c.memo_subsets << " rules_skipped=" << c.rules_skipped
                     << " subset_compiles=" << c.subset_compiles << " yields=" << c.yields << ")");
  stream_.reset();
  // The output gathered for a write (up to kSubstitutionWriteBytes and a slice) is not kept for
  // the connection's next response: an idle keep-alive connection holds at most a small one.
  if (out_.capacity() > kKeptOutputBytes) std::string().swap(out_);
}

void SubstitutionFilter::reset() {
  substitution_ = nullptr;
  stream_.reset();
}

}  // namespace tidegate::dataplane::server
