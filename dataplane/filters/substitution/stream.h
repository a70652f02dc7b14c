#pragma once
// Applies a RuleSet to one response body as it streams through (issue #5).
//
// Usage, per response:
//   SubstitutionStream s(rules, &out);
//   for each chunk: s.feed(chunk); send and clear `out`;
//   s.end(); send `out`.
// Or, to share a worker fairly with other requests: write() a chunk, then call process(64 KiB,
// deadline) until it returns false, yielding to the event loop between calls. A reader can fill
// the stream's window in place instead of write(): write_space(n), read into it, commit_write().
//
// Semantics (docs/substitutions.md): all rules in one pass as a tokenizer — leftmost match
// start wins, then the longest match, then the earlier rule; global; output never rescanned.
// Streaming gives the same output as running the rules over the whole body at once, as long as no
// match candidate grows longer than `max_buffer`: such a candidate is given up (its bytes go out
// unmodified) and counted in stats().forced_releases.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "filters/substitution/rule_set.h"

namespace tidegate::dataplane::filters {

inline constexpr size_t kDefaultSubstitutionMaxBuffer = 64 * 1024;

// The stream's window of input: a growable byte buffer whose new space is not filled before it
// is written (std::string's resize would zero every byte an upstream read then overwrites).
// The end of the bytes it keeps, where the next input is written, is put on a 64-byte boundary
// when they are moved (compaction, growth). A copy whose destination lies 1 to 63 bytes past its
// source modulo 4 KiB runs 2 to 15 times slower (`rep movsb` and 4K aliasing: 4.9-5.6 us against
// 0.33 us per 16 KiB measured here), and the upstream read copies from the start of the parser's
// buffer, which the allocator gave 64-byte alignment in the measured build: unaligned, the
// window's end sat a few bytes past it at every read. Aligned, that case needs the source
// misaligned (a head or a chunk-size line before the body bytes), so it is rare, not ruled out
// (docs/substitutions.md, "Streaming and fairness").
class StreamWindow {
 public:
  static constexpr size_t kAlignment = 64;

  StreamWindow() = default;
  // A moved-from window is empty, as a moved-from std::string is.
  StreamWindow(StreamWindow&& other) noexcept { *this = std::move(other); }
  StreamWindow& operator=(StreamWindow&& other) noexcept {
    storage_ = std::move(other.storage_);
    begin_ = std::exchange(other.begin_, 0);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    return *this;
  }

  const char* data() const { return storage_.get() + begin_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  void append(std::string_view bytes);
  // Room for `n` more bytes after size(), for the caller to write and then commit(). Valid
  // until the next call that changes the window.
  std::span<char> space(size_t n);
  // The first `n` bytes of space() hold input now.
  void commit(size_t n) { size_ += n; }
  // Drops the first `n` bytes (moves the rest to the front, aligned where there is room).
  void drop_front(size_t n);
  // Empties the window and frees its memory.
  void release();

 private:
  struct Free {
    void operator()(char* p) const;
  };
  // Where `kept` bytes start so that they end on an aligned boundary.
  static size_t aligned_begin(size_t kept) { return (kAlignment - kept % kAlignment) % kAlignment; }
  // Room for `n` more bytes after the end.
  void reserve(size_t n);

  std::unique_ptr<char[], Free> storage_;  // aligned to kAlignment
  size_t begin_ = 0;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

struct SubstitutionStreamOptions {
  // The most bytes held back waiting to learn whether they start a match (the
  // tidegate.io/substitution-max-buffer annotation). Memory per response stays below this plus
  // the input not yet processed.
  size_t max_buffer = kDefaultSubstitutionMaxBuffer;
  // The time a response may spend in the engine: cpu_budget plus cpu_budget_per_byte for each
  // byte received. Ordinary rule sets run at 50 MB/s (a replacement every 20 bytes) to 2 GB/s,
  // 20 ns per byte at worst; the default allows 1 us per byte (1 MB/s). Past it on the monotonic
  // clock the stream is timed on the thread's CPU clock too, and past the budget again in CPU
  // time (for the bytes received since) it gives up: what it holds and the rest of the body go
  // out unmodified (stats().abandoned). Only a rule set that makes the longest-match search
  // quadratic comes near it (docs/substitutions.md).
  std::chrono::nanoseconds cpu_budget{std::chrono::milliseconds(50)};
  std::chrono::nanoseconds cpu_budget_per_byte{1000};
  // Replacements between two reads of the clock (for the deadline and the budget); tests set 1.
  unsigned clock_check_commits = 16;
  // Bytes examined by the searches between two reads of the clock (RuleSet::Match::examined);
  // a search that finds no match within what is left of it is cut there. Tests set 1: every
  // search with the prefilter then stops after its first failing candidate.
  size_t check_window = 64 * 1024;
  // The clocks: monotonic (the deadline, the budget's first judgement) and this thread's CPU time
  // (null: CLOCK_THREAD_CPUTIME_ID). Tests replace them to stage stalls.
  std::chrono::steady_clock::time_point (*now)() = +[] { return std::chrono::steady_clock::now(); };
  std::chrono::nanoseconds (*thread_cpu_time)() = nullptr;
};

struct SubstitutionStreamStats {
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t replacements = 0;
  // Times held bytes went out unmodified because a candidate outgrew max_buffer.
  uint64_t forced_releases = 0;
  // The rules that produced at least one replacement (RuleSet::origin_bit: the numbering of the
  // rule set the memo knows, also when the stream runs a subset of it).
  RuleBits rules_matched = 0;
  // 1 when the stream gave up on its CPU budget (SubstitutionStreamOptions::cpu_budget).
  uint64_t abandoned = 0;
  // Time spent in process() (what the budget counts).
  std::chrono::nanoseconds engine_time{0};
};

class SubstitutionStream {
 public:
  // Output is appended to *out, which the caller drains (sends, then clears) as it likes; it
  // must outlive the stream. A null `rules` passes the body through unchanged.
  SubstitutionStream(std::shared_ptr<const RuleSet> rules, std::string* out,
                     SubstitutionStreamOptions options = {});

  // Queues input without processing it.
  void write(std::string_view data);
  // Room for up to `n` bytes of input, for the caller to fill in place (an upstream read) and
  // then queue with commit_write(): write() without its copy. Empty when the stream takes no
  // more input in place (no rules, abandoned, or finished): write() then. Valid until the next
  // call on the stream.
  std::span<char> write_space(size_t n);
  // Queues the first `n` bytes of the last write_space().
  void commit_write(size_t n);
  // Marks the end of the body; the next process() call flushes everything.
  void finish();
  using Clock = std::chrono::steady_clock;
  // Processes at most `max_bytes` of queued input (plus what is already held back). Returns true
  // while queued input remains or the end has not been flushed: call again, after yielding. Once
  // the call has run `time_limit`, it returns early, at the next check (after a replacement, or
  // where a search that found nothing was cut: either way past at least one byte; checks come
  // every clock_check_commits replacements or check_window bytes examined by the searches), so
  // that no single call runs long whatever the rules cost per byte. stats().engine_time grows by
  // the call's duration.
  bool process(size_t max_bytes,
               std::chrono::nanoseconds time_limit = std::chrono::nanoseconds::max());

  // write() + process() of everything.
  void feed(std::string_view data) {
    write(data);
    process(std::numeric_limits<size_t>::max());
  }
  // finish() + process() of everything. After this, *out holds the rest of the body.
  void end() {
    finish();
    process(std::numeric_limits<size_t>::max());
  }

  // Bytes received but not yet emitted (held back or queued).
  size_t pending_bytes() const { return buf_.size() - start_; }
  // Bytes written but not yet taken by process() (what process(max_bytes) counts against
  // max_bytes).
  size_t queued_bytes() const { return buf_.size() - visible_; }
  bool done() const { return done_; }
  // The rules this stream runs (null: pass-through).
  const RuleSet* rules() const { return rules_.get(); }
  const SubstitutionStreamStats& stats() const { return stats_; }
  bool abandoned() const { return stats_.abandoned != 0; }
  // Whether the last process() call stopped at its deadline (more of its slice is left).
  bool interrupted() const { return interrupted_; }

 private:
  void run(bool final);
  // After clock_check_commits replacements or check_window bytes searched: whether this call
  // must return now (the budget spent: then the stream is abandoned; or, `may_interrupt`, its
  // deadline reached).
  bool check_clock(bool may_interrupt);
  void abandon();
  // cpu_budget + cpu_budget_per_byte * bytes, saturated.
  std::chrono::nanoseconds budget_for(uint64_t bytes) const;
  void step(std::string_view text, bool final);
  void overflow(std::string_view text);
  size_t leftmost_viable(std::string_view text, size_t from) const;
  void emit(std::string_view text, size_t from, size_t to);
  void compact();

  std::shared_ptr<const RuleSet> rules_;
  std::string* out_;
  SubstitutionStreamOptions options_;
  // buf_[0, start_) is already emitted (at most one byte is kept: the context that assertions
  // such as \b and (?m)^ look at); [start_, visible_) is held back; [visible_, size) is queued.
  // Position 0 is the start of the body until the first compaction.
  StreamWindow buf_;
  size_t start_ = 0;
  size_t visible_ = 0;
  bool finished_ = false;
  bool done_ = false;
  // The current process() call: when it began, its deadline, whether it stopped early, and the
  // work since the clock was last read (replacements, bytes examined by their searches).
  Clock::time_point call_began_{};
  Clock::time_point deadline_{};
  bool interrupted_ = false;
  unsigned commits_unchecked_ = 0;
  size_t window_unchecked_ = 0;
  // Past the budget on the monotonic clock: timed on the thread's CPU clock from then on.
  bool suspect_ = false;
  uint64_t suspect_since_bytes_ = 0;
  std::chrono::nanoseconds cpu_spent_{0};
  std::chrono::nanoseconds cpu_call_began_{0};
  SubstitutionStreamStats stats_;
};

}  // namespace tidegate::dataplane::filters
