#include "filters/substitution/stream.h"

#include <time.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace tidegate::dataplane::filters {
namespace {

// How many bytes at the end of text[from, size) form an incomplete UTF-8 sequence. RE2 matches
// whole characters, so a rule cannot be asked about half a character: those bytes are held.
size_t incomplete_utf8_tail(std::string_view text, size_t from) {
  const size_t n = text.size();
  for (size_t j = n; j > from && n - j < 3;) {
    --j;
    const auto b = static_cast<unsigned char>(text[j]);
    if ((b & 0xc0) == 0x80) continue;  // continuation byte: look further back
    if (b < 0xc0) return 0;
    const size_t need = b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    return n - j < need ? n - j : 0;
  }
  return 0;
}

// This thread's CPU time. A system call here (about 1 us on a VM, against 20-60 ns for the
// monotonic clock), so it is read only for a stream under suspicion (see check_clock).
std::chrono::nanoseconds real_thread_cpu_time() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace

void StreamWindow::Free::operator()(char* p) const {
  ::operator delete[](p, std::align_val_t{kAlignment});
}

void StreamWindow::reserve(size_t n) {
  if (begin_ + size_ + n <= capacity_) return;
  const size_t begin = aligned_begin(size_);
  const size_t need = begin + size_ + n;
  if (need <= capacity_) {
    if (size_ != 0) std::memmove(storage_.get() + begin, data(), size_);
    begin_ = begin;
    return;
  }
  // Room for what is asked and a sixteenth more, so that the next read of the same size still
  // fits after a compaction that keeps a few bytes (the proxy asks for kSubstitutionReadBytes
  // each time: its window stays at ~68 KiB); and at least twice what is kept, so that appends
  // that are never compacted away cost amortised O(1) per byte.
  const size_t capacity = std::max({need + need / 16 + kAlignment, 2 * size_ + n, size_t{256}});
  std::unique_ptr<char[], Free> storage(
      static_cast<char*>(::operator new[](capacity, std::align_val_t{kAlignment})));
  if (size_ != 0) std::memcpy(storage.get() + begin, data(), size_);
  storage_ = std::move(storage);
  begin_ = begin;
  capacity_ = capacity;
}

void StreamWindow::append(std::string_view bytes) {
  if (bytes.empty()) return;
  std::memcpy(space(bytes.size()).data(), bytes.data(), bytes.size());
  commit(bytes.size());
}

std::span<char> StreamWindow::space(size_t n) {
  reserve(n);
  return {storage_.get() + begin_ + size_, n};
}

void StreamWindow::drop_front(size_t n) {
  n = std::min(n, size_);
  const size_t kept = size_ - n;
  size_t begin = aligned_begin(kept);
  if (begin + kept > capacity_) begin = 0;  // no room to align: the front
  if (kept != 0) std::memmove(storage_.get() + begin, data() + n, kept);
  begin_ = begin;
  size_ = kept;
}

void StreamWindow::release() {
  storage_.reset();
  begin_ = size_ = capacity_ = 0;
}

SubstitutionStream::SubstitutionStream(std::shared_ptr<const RuleSet> rules, std::string* out,
                                       SubstitutionStreamOptions options)
    : rules_(std::move(rules)), out_(out), options_(options) {
  options_.max_buffer = std::max<size_t>(options_.max_buffer, 16);
  options_.check_window = std::max<size_t>(options_.check_window, 1);
  if (options_.thread_cpu_time == nullptr) options_.thread_cpu_time = &real_thread_cpu_time;
}

void SubstitutionStream::write(std::string_view data) {
  if (finished_) return;
  stats_.bytes_in += data.size();
  if (!rules_ || abandoned()) {
    out_->append(data);
    stats_.bytes_out += data.size();
    return;
  }
  buf_.append(data);
}

std::span<char> SubstitutionStream::write_space(size_t n) {
  if (finished_ || !rules_ || abandoned()) return {};
  return buf_.space(n);
}

void SubstitutionStream::commit_write(size_t n) {
  assert(!finished_ && rules_ && !abandoned());
  stats_.bytes_in += n;
  buf_.commit(n);
}

void SubstitutionStream::finish() { finished_ = true; }

bool SubstitutionStream::process(size_t max_bytes, std::chrono::nanoseconds time_limit) {
  if (done_) return false;
  const size_t reveal = std::min(buf_.size() - visible_, max_bytes);
  visible_ += reveal;
  const bool final = finished_ && visible_ == buf_.size();
  if (rules_ && !abandoned()) {
    call_began_ = options_.now();
    if (suspect_) cpu_call_began_ = options_.thread_cpu_time();
    deadline_ = time_limit < Clock::time_point::max() - call_began_ ? call_began_ + time_limit
                                                                    : Clock::time_point::max();
    interrupted_ = false;
    run(final);
    stats_.engine_time += options_.now() - call_began_;
    if (suspect_) cpu_spent_ += options_.thread_cpu_time() - cpu_call_began_;
    if (interrupted_) return true;  // the state is consistent up to start_: resume there
  }
  if (abandoned() && start_ < buf_.size()) {
    // Everything held and queued goes out as it is; write() passes the rest through.
    emit(std::string_view(buf_.data(), buf_.size()), start_, buf_.size());
    start_ = visible_ = buf_.size();
  }
  if (final || (abandoned() && finished_)) {
    done_ = true;
    buf_.release();
    start_ = visible_ = 0;
    return false;
  }
  compact();
  return visible_ < buf_.size() || finished_;
}

void SubstitutionStream::run(bool final) {
  const std::string_view text(buf_.data(), visible_);
  step(text, final);
  if (interrupted_ || abandoned()) return;
  if (!final && visible_ - start_ > options_.max_buffer) {
    overflow(text);
    step(text, false);
  }
}

// The core loop. A match found in the window is final when no position from the first held
// byte up to and including its start can still grow into a match with more input (such a
// position could start an earlier or a longer match). Bytes before the leftmost position that can
// still grow are final too. Everything from there waits for the next chunk.
void SubstitutionStream::step(std::string_view text, bool final) {
  const size_t end = text.size();
  // The leftmost position >= start_ that can still grow. It only depends on the window's end, so
  // it stays valid while matches are committed before it.
  size_t grow = 0;
  bool grow_known = false;
  while (start_ < end) {
    if (!final && (!grow_known || grow < start_)) {
      grow = leftmost_viable(text, start_);
      grow_known = true;
      // RE2 runs backwards from the window's end: it may read everything from start_ on.
      window_unchecked_ += end - start_;
    }
    // Matches are committed while they start before `grow`. A match reaching the window's end
    // saw no byte after it (for \b or $) and may grow; it is also viable, so `grow` already
    // holds it back. The end limit is belt and braces.
    RuleSet::Run run;
    run.out = out_;
    run.from = start_;
    if (!final) {
      run.limit = grow;
      run.end_limit = end;
    }
    run.commits = options_.clock_check_commits > commits_unchecked_
                      ? options_.clock_check_commits - commits_unchecked_
                      : 1;
    run.window = options_.check_window - std::min(window_unchecked_, options_.check_window);
    const size_t out_before = out_->size();
    const RuleSet::RunEnd ended = rules_->replace(text, &run);
    stats_.bytes_out += out_->size() - out_before;
    stats_.replacements += run.replacements;
    stats_.rules_matched |= run.matched;
    commits_unchecked_ += static_cast<unsigned>(run.replacements);
    window_unchecked_ = options_.check_window - run.window;
    start_ = run.from;
    if (ended == RuleSet::RunEnd::kCheck) {
      if (check_clock(true)) return;
      continue;
    }
    if (ended == RuleSet::RunEnd::kRegrow) continue;  // a match ended past `grow`: learn it anew
    // The run's last search found nothing it may replace, and it may have been long (failing
    // candidates that each walk to the window's end): it counts too. The budget is judged here
    // (a stream whose searches never replace anything is still abandoned), but the call is not
    // cut: it has no replacement to resume after, and a call cut here would only search again.
    window_unchecked_ += run.last_examined;
    if (window_unchecked_ >= options_.check_window && check_clock(false)) return;
    if (final) break;  // no match is left
    const size_t hold = ended == RuleSet::RunEnd::kHeld ? std::min(grow, run.held_start) : grow;
    emit(text, start_, hold);
    start_ = hold;
    return;
  }
  emit(text, start_, end);
  start_ = end;
}

std::chrono::nanoseconds SubstitutionStream::budget_for(uint64_t bytes) const {
  using std::chrono::nanoseconds;
  const auto per_byte = options_.cpu_budget_per_byte.count();
  const auto base = options_.cpu_budget.count();
  constexpr auto kMax = std::numeric_limits<nanoseconds::rep>::max();
  if (per_byte > 0 && bytes > static_cast<uint64_t>((kMax - base) / per_byte)) {
    return nanoseconds(kMax);
  }
  return nanoseconds(base + per_byte * static_cast<nanoseconds::rep>(bytes));
}

// A search from a position may read far past its match (a longest match is only known once
// every rule has died: RE2 may read to the window's end), and so may the search for the window's
// viable point (leftmost_viable), so the bytes they examined (RuleSet::Match::examined, the
// window after start_ for leftmost_viable) are what they cost. The clock is read when
// clock_check_commits replacements or check_window bytes examined have gone by, after a
// replacement (RuleSet::replace counts both), so that every call makes progress; where a
// search that found no match is cut after examining what was left of check_window (the bytes
// it passed are final, and the next run resumes after them); and after the last search of a
// step once check_window bytes are counted, for the budget only (see step).
//
// The budget is first judged on the monotonic clock (cheap, but it also counts the time the
// thread was not running: a CFS throttle under a CPU limit, a busy machine). Past it, the stream
// is only suspect: from then on its calls are also timed on the thread's CPU clock, and it is
// abandoned once that CPU time exceeds the budget for the bytes received since. A stall inside a
// call therefore never costs an ordinary body its replacements; a quadratic rule set spends about
// twice its budget, plus the part of a search in progress when it is judged (a prefiltered
// search is cut after check_window bytes examined and one candidate's try).
bool SubstitutionStream::check_clock(bool may_interrupt) {
  commits_unchecked_ = 0;
  window_unchecked_ = 0;
  const auto now = options_.now();
  if (!suspect_) {
    if (stats_.engine_time + (now - call_began_) > budget_for(stats_.bytes_in)) {
      suspect_ = true;
      suspect_since_bytes_ = stats_.bytes_in;
      cpu_spent_ = std::chrono::nanoseconds(0);
      cpu_call_began_ = options_.thread_cpu_time();
    }
  } else if (cpu_spent_ + (options_.thread_cpu_time() - cpu_call_began_) >
             budget_for(stats_.bytes_in - suspect_since_bytes_)) {
    abandon();
    return true;
  }
  if (may_interrupt && now >= deadline_) {
    interrupted_ = true;
    return true;
  }
  return false;
}

void SubstitutionStream::abandon() { stats_.abandoned = 1; }

// More than max_buffer bytes are held: the older half of the window goes out unmodified. No
// match is looked for there: with a candidate open over the whole window, each search would scan
// to the window's end again (rules `x` and `x[^!]*!` over a run of x), which is quadratic.
// Releasing half the window at a time keeps the work linear.
void SubstitutionStream::overflow(std::string_view text) {
  const size_t release_to = text.size() - options_.max_buffer / 2;
  if (start_ >= release_to) return;
  emit(text, start_, release_to);
  start_ = release_to;
  ++stats_.forced_releases;
}

size_t SubstitutionStream::leftmost_viable(std::string_view text, size_t from) const {
  const size_t limit = text.size() - incomplete_utf8_tail(text, from);
  if (from >= limit) return from;
  re2::StringPiece m;
  if (!rules_->viable_tail().Match(text.substr(0, limit), from, limit, RE2::UNANCHORED, &m, 1)) {
    return limit;  // not reached: the empty prefix is always viable at `limit`
  }
  return static_cast<size_t>(m.data() - text.data());
}

void SubstitutionStream::emit(std::string_view text, size_t from, size_t to) {
  if (to <= from) return;
  out_->append(text.data() + from, to - from);
  stats_.bytes_out += to - from;
}

// Drops emitted bytes but the last one (the context for assertions at start_). Only when they
// are at least half the buffer, so that slicing a large write does not move it again and again.
void SubstitutionStream::compact() {
  if (start_ <= 1) return;
  const size_t drop = start_ - 1;
  if (drop < buf_.size() / 2) return;
  buf_.drop_front(drop);
  start_ -= drop;
  visible_ -= drop;
}

}  // namespace tidegate::dataplane::filters
