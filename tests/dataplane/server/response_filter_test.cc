#include "server/response_filter.h"

#include <algorithm>
#include <cctype>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

// Upper-cases its input, at most `turn` bytes a turn; declines when `accept` is false.
class UpperFilter : public ResponseFilter {
 public:
  UpperFilter(bool accept, size_t turn) : accept_(accept), turn_(turn) {}
  bool on_headers(http::response_header<Fields>& head, const ResponseFilterContext&) override {
    if (accept_) head.set("X-Upper", "1");
    return accept_;
  }
  void on_data(std::string_view data, bool last) override {
    queued_.append(data);
    last_ |= last;
  }
  // Input in place: room in a buffer of its own, queued when committed.
  std::span<char> data_space(size_t n) override {
    room_.resize(n);
    return room_;
  }
  void commit_data(size_t n, bool last) override {
    on_data(std::string_view(room_).substr(0, n), last);
  }
  bool process() override {
    size_t n = std::min(turn_, queued_.size());
    for (size_t i = 0; i < n; ++i) {
      out_ += static_cast<char>(std::toupper(static_cast<unsigned char>(queued_[i])));
    }
    queued_.erase(0, n);
    return !queued_.empty();
  }
  std::string& output() override { return out_; }
  bool done() const override { return last_ && queued_.empty(); }
  void on_end() override { ++ends; }
  void reset() override {
    queued_.clear();
    out_.clear();
    last_ = false;
  }
  int ends = 0;

 private:
  bool accept_;
  size_t turn_;
  std::string queued_, out_, room_;
  bool last_ = false;
};

// Appends a trailer once its input has ended.
class TrailerFilter : public ResponseFilter {
 public:
  bool on_headers(http::response_header<Fields>&, const ResponseFilterContext&) override {
    return true;
  }
  void on_data(std::string_view data, bool last) override {
    out_.append(data);
    if (last) {
      ++lasts;
      out_ += "<end>";
      done_ = true;
    }
  }
  bool process() override { return false; }
  std::string& output() override { return out_; }
  bool done() const override { return done_; }
  void on_end() override { ++ends; }
  void reset() override {
    out_.clear();
    done_ = false;
  }
  int ends = 0;
  int lasts = 0;

 private:
  std::string out_;
  bool done_ = false;
};

// Drives a chain as the exchange does: feed each chunk (`in_place`: into the room the chain
// offers, when it offers some), run turns until the input is consumed, collect the output; then
// the end.
std::string run(ResponseFilterChain& chain, const std::vector<std::string>& chunks,
                bool in_place = false) {
  std::string sent;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const bool last = i + 1 == chunks.size();
    const std::span<char> room = in_place ? chain.data_space(16) : std::span<char>();
    if (room.empty()) {
      chain.on_data(chunks[i], last);
    } else {
      EXPECT_GE(room.size(), chunks[i].size());
      std::copy(chunks[i].begin(), chunks[i].end(), room.begin());
      chain.commit_data(chunks[i].size(), last);
    }
    bool more = true;
    while (more) {
      more = chain.process();
      sent += chain.output();
      chain.output().clear();
    }
  }
  EXPECT_TRUE(chain.done());
  chain.on_end();
  return sent;
}

TEST(ResponseFilterChainTest, AcceptingFiltersRunInOrderAndSeeTheEndOnce) {
  struct Case {
    const char* name;
    bool upper_accepts;
    const char* want_header;
    const char* want_body;
    int upper_ends;
  };
  const Case cases[] = {
      {"both filters", true, "1", "HELLO WORLD<end>", 1},
      {"a declining filter is skipped", false, "", "hello world<end>", 0},
  };
  for (const auto& c : cases) {
    UpperFilter upper(c.upper_accepts, 3);
    TrailerFilter trailer;
    ResponseFilterChain chain;
    chain.add(&upper);
    chain.add(&trailer);
    http::response_header<Fields> head;
    ASSERT_TRUE(chain.on_headers(head, {})) << c.name;
    EXPECT_EQ(head["X-Upper"], c.want_header) << c.name;
    EXPECT_EQ(run(chain, {"hello ", "world"}), c.want_body) << c.name;
    EXPECT_EQ(trailer.lasts, 1) << c.name;
    EXPECT_EQ(upper.ends, c.upper_ends) << c.name;
    EXPECT_EQ(trailer.ends, 1) << c.name;
    EXPECT_FALSE(chain.active()) << c.name;
  }
}

// Body input read in place goes to the first active filter, which alone decides whether it takes
// input that way: a chain headed by a filter without room gets on_data() (an empty span).
TEST(ResponseFilterChainTest, InputInPlaceGoesToTheFirstActiveFilter) {
  for (const bool upper_accepts : {true, false}) {
    UpperFilter upper(upper_accepts, 4);
    TrailerFilter trailer;
    ResponseFilterChain chain;
    chain.add(&upper);
    chain.add(&trailer);
    http::response_header<Fields> head;
    ASSERT_TRUE(chain.on_headers(head, {}));
    EXPECT_EQ(chain.data_space(16).empty(), !upper_accepts);
    EXPECT_EQ(run(chain, {"hello ", "", "world"}, true),
              upper_accepts ? "HELLO WORLD<end>" : "hello world<end>");
    EXPECT_EQ(trailer.lasts, 1);
  }
}

TEST(ResponseFilterChainTest, NoFilterAcceptsTheBodyPassesUntouched) {
  UpperFilter upper(false, 100);
  ResponseFilterChain chain;
  chain.add(&upper);
  http::response_header<Fields> head;
  EXPECT_FALSE(chain.on_headers(head, {}));
  EXPECT_FALSE(chain.active());
}

TEST(ResponseFilterChainTest, TheEndAloneFlushes) {
  UpperFilter upper(true, 2);
  ResponseFilterChain chain;
  chain.add(&upper);
  http::response_header<Fields> head;
  ASSERT_TRUE(chain.on_headers(head, {}));
  EXPECT_EQ(run(chain, {"abcde", ""}), "ABCDE");
  // A reset chain starts afresh for the next response.
  chain.reset();
  ASSERT_TRUE(chain.on_headers(head, {}));
  EXPECT_EQ(run(chain, {"x"}), "X");
}

}  // namespace
}  // namespace tidegate::dataplane::server
