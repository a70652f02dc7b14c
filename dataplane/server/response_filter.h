#pragma once
// The response body filters of one exchange (server/exchange.h): a small ordered chain with one
// interface, so that substitution today and compression or caching later are links of the chain
// rather than branches of the exchange. A filter takes body input, emits output in bounded turns
// (the exchange writes each turn's output and yields to the worker between turns, so one large
// body never holds the worker), and flushes at the end. Filters live as long as the exchange
// object (their buffers keep their capacity between responses); the chain only points at them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "model/model.h"
#include "observability/metrics.h"
#include "server/headers.h"

namespace tidegate::dataplane::server {

// What a filter may read of the response and its exchange besides the head itself.
struct ResponseFilterContext {
  unsigned status = 200;
  bool body_expected = true;               // false for HEAD, 204, 304
  std::optional<uint64_t> content_length;  // when the upstream framed the body by length
  unsigned client_version = 11;            // the client's HTTP version (11: HTTP/1.1)
  // The matched route's metric labels, from the exchange's own routing table (the worker's may
  // have moved to a newer one since the request was routed).
  observability::LabelSetId route_labels = observability::kNoRouteLabels;
};

class ResponseFilter {
 public:
  virtual ~ResponseFilter() = default;
  // The response head, before it goes to the client; a filter that rewrites the body edits the
  // head to match (length, validators). Returns whether this filter processes this response's
  // body; one that declines sees nothing more of the response.
  virtual bool on_headers(boost::beast::http::response_header<Fields>& head,
                          const ResponseFilterContext& context) = 0;
  // Queues body input; `last`: the body ends with it (`data` may then be empty).
  virtual void on_data(std::string_view data, bool last) = 0;
  // Room for up to `n` bytes of body input that the exchange reads in place, then queues with
  // commit_data(): on_data() without its copy. Empty (the default) when the filter takes its
  // input through on_data() only. Valid until the next call on the filter.
  virtual std::span<char> data_space(size_t /*n*/) { return {}; }
  // Queues the first `n` bytes of the last data_space(), as on_data() would.
  virtual void commit_data(size_t /*n*/, bool /*last*/) {}
  // One turn: processes queued input into output(). True while queued input is left for another
  // turn.
  virtual bool process() = 0;
  // The output of the turns so far; the caller sends it and clears it.
  virtual std::string& output() = 0;
  // The last input was processed: every output byte has been produced.
  virtual bool done() const = 0;
  // The body went out to its end.
  virtual void on_end() = 0;
  // Drops what is left of the current response (cut short, or the next exchange begins).
  virtual void reset() = 0;
};

class ResponseFilterChain {
 public:
  static constexpr size_t kMaxFilters = 4;

  // At construction of the exchange, in the order the body flows through them.
  void add(ResponseFilter* filter);

  // Offers the head to every filter in order; those that accept process the body. True when at
  // least one does (the body is transformed: its length is unknown until its end).
  bool on_headers(boost::beast::http::response_header<Fields>& head,
                  const ResponseFilterContext& context);
  bool active() const { return active_count_ != 0; }

  // Body input for the first active filter.
  void on_data(std::string_view data, bool last);
  // The first active filter's room for reading body input in place (ResponseFilter::data_space),
  // and the bytes read there.
  std::span<char> data_space(size_t n) { return active_[0]->data_space(n); }
  void commit_data(size_t n, bool last) { active_[0]->commit_data(n, last); }
  // One turn of every active filter, each one's output handed to the next. True while some
  // filter has queued input left for another turn.
  bool process();
  // What the last active filter produced: the bytes for the client (send, then clear).
  std::string& output();
  bool done() const;
  // The body went out to its end: every active filter hears of it and the chain goes idle.
  void on_end();
  // The response was cut short or a new exchange begins.
  void reset();

 private:
  std::array<ResponseFilter*, kMaxFilters> filters_{};
  size_t count_ = 0;
  std::array<ResponseFilter*, kMaxFilters> active_{};
  // Whether active_[i + 1] has been given its last input.
  std::array<bool, kMaxFilters> fed_last_{};
  size_t active_count_ = 0;
};

}  // namespace tidegate::dataplane::server
