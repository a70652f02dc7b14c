#include "server/response_filter.h"

#include <cassert>

namespace tidegate::dataplane::server {

void ResponseFilterChain::add(ResponseFilter* filter) {
  assert(count_ < kMaxFilters);
  filters_[count_++] = filter;
}

bool ResponseFilterChain::on_headers(boost::beast::http::response_header<Fields>& head,
                                     const ResponseFilterContext& context) {
  active_count_ = 0;
  for (size_t i = 0; i < count_; ++i) {
    if (filters_[i]->on_headers(head, context)) {
      fed_last_[active_count_] = false;
      active_[active_count_++] = filters_[i];
    }
  }
  return active_count_ != 0;
}

void ResponseFilterChain::on_data(std::string_view data, bool last) {
  active_[0]->on_data(data, last);
}

bool ResponseFilterChain::process() {
  bool more = false;
  for (size_t i = 0; i < active_count_; ++i) {
    ResponseFilter* f = active_[i];
    more = f->process() || more;
    if (i + 1 == active_count_) break;
    // Hand this filter's output to the next one, and the end once this one is done.
    std::string& out = f->output();
    const bool last = f->done() && !fed_last_[i];
    if (!out.empty() || last) {
      active_[i + 1]->on_data(out, last);
      out.clear();
      if (last) fed_last_[i] = true;
    }
  }
  return more;
}

std::string& ResponseFilterChain::output() { return active_[active_count_ - 1]->output(); }

bool ResponseFilterChain::done() const { return active_[active_count_ - 1]->done(); }

void ResponseFilterChain::on_end() {
  for (size_t i = 0; i < active_count_; ++i) active_[i]->on_end();
  active_count_ = 0;
}

void ResponseFilterChain::reset() {
  for (size_t i = 0; i < count_; ++i) filters_[i]->reset();
  active_count_ = 0;
}

}  // namespace tidegate::dataplane::server
