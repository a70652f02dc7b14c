#pragma once
// Body substitution as a response filter (docs/substitutions.md, "In the proxy"): the first link
// of the exchange's filter chain (server/response_filter.h). It decides from the response head
// whether the body goes through the route's rules (server/substitution.h: content type, coding,
// the memo), rewrites the head to match, and runs the engine (filters/substitution/stream.h) in
// slices sized to a time budget: a processed body flows upstream read (at most
// kSubstitutionReadBytes, straight into the stream's window: data_space()) -> commit_data() ->
// slices of process() -> each slice's output written to the client before the next one; between
// two slices that produced nothing to write the exchange yields to the worker. Memory per
// response: the held bytes (<= max_buffer) and the queued input (at most one read), both in the
// stream's window (sized for a read and a sixteenth more), and the output of one slice (gathered
// up to kSubstitutionWriteBytes).

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "filters/substitution/stream.h"
#include "runtime/snapshot.h"
#include "server/response_filter.h"

namespace tidegate::dataplane::server {

class Worker;

class SubstitutionFilter final : public ResponseFilter {
 public:
  explicit SubstitutionFilter(Worker& worker) : worker_(worker) {}

  // Per exchange, before the request goes upstream: the route's rules (null: none, the filter
  // declines every response) and the memo's resource, the host as the client sent it (port and
  // case ignored) and the target.
  void configure(const runtime::CompiledSubstitution* substitution, std::string_view host,
                 std::string_view path_and_query);
  bool configured() const { return substitution_ != nullptr; }

  bool on_headers(boost::beast::http::response_header<Fields>& head,
                  const ResponseFilterContext& context) override;
  void on_data(std::string_view data, bool last) override;
  std::span<char> data_space(size_t n) override { return stream_->write_space(n); }
  void commit_data(size_t n, bool last) override;
  bool process() override;
  std::string& output() override { return out_; }
  bool done() const override { return stream_->done(); }
  // This response's body goes through the rules (on_headers took it).
  bool substituting() const { return stream_.has_value(); }
  void on_end() override;
  void reset() override;

 private:
  Worker& worker_;
  // The route's rules (null when it has none) and the memo key ("host" + request target, the
  // upstream's validator).
  const runtime::CompiledSubstitution* substitution_ = nullptr;
  std::string memo_resource_;
  std::string memo_validator_;
  observability::LabelSetId labels_ = observability::kNoRouteLabels;  // the route's, for metrics
  unsigned status_ = 0;
  // The stream while a body is processed, its output (keeps its capacity between responses:
  // about one slice) and the input of the next slice.
  std::optional<filters::SubstitutionStream> stream_;
  std::string out_;
  static constexpr size_t kKeptOutputBytes = 16 * 1024;  // out_'s capacity kept between responses
  size_t slice_ = 0;
};

}  // namespace tidegate::dataplane::server
