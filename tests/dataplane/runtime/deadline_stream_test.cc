// Tests for runtime::DeadlineStream over loopback TCP: a read or a write pending past its
// deadline ends with beast::error::timeout and closes the socket; one that completes in time does
// not, however often deadlines move; a pending operation keeps its deadline when expires_after
// is called meanwhile (Beast's rule); expires_never; a nearer deadline than the one the timer
// waits for; connect timeouts; data through Beast's HTTP reader; the stream destroyed with an
// operation pending; the timer armed once for many requests, not per operation.

#include "runtime/deadline_stream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "runtime/io_types.h"

namespace tidegate::dataplane::runtime {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using namespace std::chrono_literals;

class DeadlineStreamTest : public ::testing::Test {
 protected:
  // A connection: the server end in a Stream, the client end a plain socket.
  void connect() {
    tcp::acceptor acceptor(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    peer_ = std::make_unique<tcp::socket>(io_);
    peer_->connect(acceptor.local_endpoint());
    Socket socket(io_.get_executor());
    acceptor.accept(socket);
    stream_ = std::make_unique<Stream>(std::move(socket));
  }

  // Runs the io_context until `done` holds (or 10 s pass).
  void run_until(const std::function<bool()>& done) {
    io_.restart();
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_for(20ms);
    }
    ASSERT_TRUE(done()) << "timed out";
  }

  // Runs the io_context for `d`.
  void run_for(std::chrono::milliseconds d) {
    io_.restart();
    io_.run_for(d);
  }

  // Starts a read into buf_; its result lands in read_ec_/read_n_.
  void start_read() {
    read_ec_.reset();
    stream_->async_read_some(asio::buffer(buf_), [this](error_code ec, size_t n) {
      read_ec_ = ec;
      read_n_ = n;
    });
  }

  void peer_writes(std::string_view s) { asio::write(*peer_, asio::buffer(s)); }

  asio::io_context io_;
  std::unique_ptr<tcp::socket> peer_;
  std::unique_ptr<Stream> stream_;
  std::array<char, 256> buf_{};
  std::optional<error_code> read_ec_;
  size_t read_n_ = 0;
};

TEST_F(DeadlineStreamTest, ReadPendingPastItsDeadlineTimesOutAndClosesTheSocket) {
  connect();
  const auto start = std::chrono::steady_clock::now();
  stream_->expires_after(100ms);
  start_read();
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  EXPECT_EQ(*read_ec_, boost::beast::error::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_FALSE(stream_->socket().is_open());
}

TEST_F(DeadlineStreamTest, ReadThatCompletesInTimeDoesNotTimeOut) {
  connect();
  stream_->expires_after(150ms);
  start_read();
  peer_writes("hello");
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  ASSERT_FALSE(*read_ec_) << read_ec_->message();
  EXPECT_EQ(std::string_view(buf_.data(), read_n_), "hello");
  // The timer armed for the first deadline fires later with nothing pending: no effect.
  run_for(300ms);
  EXPECT_TRUE(stream_->socket().is_open());
  // The next read has a deadline of its own.
  stream_->expires_after(10s);
  start_read();
  peer_writes("again");
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  ASSERT_FALSE(*read_ec_) << read_ec_->message();
  EXPECT_EQ(std::string_view(buf_.data(), read_n_), "again");
}

// The lazy timer: a deadline later than the one the timer waits for leaves it alone; when it
// fires with the read pending but not yet due, it waits again for the read's own deadline.
TEST_F(DeadlineStreamTest, ALaterDeadlineIsKeptWhenTheTimerFiresEarlier) {
  connect();
  stream_->expires_after(100ms);
  start_read();
  peer_writes("x");
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  ASSERT_FALSE(*read_ec_);
  // The timer still waits for the first deadline (100 ms); this read may take 400 ms.
  const auto start = std::chrono::steady_clock::now();
  stream_->expires_after(400ms);
  start_read();
  run_for(250ms);
  EXPECT_FALSE(read_ec_.has_value()) << "timed out at the earlier deadline";
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  EXPECT_EQ(*read_ec_, boost::beast::error::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
}

// A deadline nearer than the one the timer waits for moves the timer.
TEST_F(DeadlineStreamTest, ANearerDeadlineMovesTheTimer) {
  connect();
  stream_->expires_after(10s);
  start_read();
  peer_writes("x");
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  ASSERT_FALSE(*read_ec_);
  const auto start = std::chrono::steady_clock::now();
  stream_->expires_after(100ms);
  start_read();
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  EXPECT_EQ(*read_ec_, boost::beast::error::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(DeadlineStreamTest, ExpiresNeverMeansNoTimeout) {
  connect();
  stream_->expires_after(50ms);
  stream_->expires_never();
  start_read();
  run_for(200ms);
  EXPECT_FALSE(read_ec_.has_value());
  peer_writes("late");
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  ASSERT_FALSE(*read_ec_) << read_ec_->message();
  EXPECT_EQ(read_n_, 4u);
}

// Beast's rule: expires_after sets the directions with no operation pending. A pending read
// keeps its deadline while the write's is set.
TEST_F(DeadlineStreamTest, APendingReadKeepsItsDeadline) {
  connect();
  stream_->expires_never();
  start_read();
  stream_->expires_after(50ms);  // for the write only
  std::optional<error_code> write_ec;
  asio::async_write(*stream_, asio::buffer(std::string_view("ping")),
                    [&](error_code ec, size_t) { write_ec = ec; });
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return write_ec.has_value(); }));
  ASSERT_FALSE(*write_ec) << write_ec->message();
  run_for(200ms);
  EXPECT_FALSE(read_ec_.has_value()) << "the read took the write's deadline";
  EXPECT_TRUE(stream_->socket().is_open());
  peer_writes("pong");
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  ASSERT_FALSE(*read_ec_) << read_ec_->message();
}

// A write the peer does not read times out; the read pending beside it ends too (the socket
// closes), with an error that is not a timeout: its own deadline had not passed.
TEST_F(DeadlineStreamTest, WriteToAPeerThatDoesNotReadTimesOut) {
  connect();
  stream_->expires_never();
  start_read();
  stream_->expires_after(200ms);
  const std::string big(64 << 20, 'x');  // more than both sockets' buffers hold
  std::optional<error_code> write_ec;
  asio::async_write(*stream_, asio::buffer(big), [&](error_code ec, size_t) { write_ec = ec; });
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return write_ec.has_value() && read_ec_.has_value(); }));
  EXPECT_EQ(*write_ec, boost::beast::error::timeout);
  EXPECT_TRUE(*read_ec_);
  EXPECT_NE(*read_ec_, boost::beast::error::timeout);
}

TEST_F(DeadlineStreamTest, ConnectTimesOut) {
  // A listener whose backlog is full leaves further connects unanswered (SYNs dropped).
  tcp::acceptor full(io_);
  full.open(tcp::v4());
  full.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  full.listen(0);
  std::vector<std::unique_ptr<tcp::socket>> fillers;
  for (int i = 0; i < 4; ++i) {
    fillers.push_back(std::make_unique<tcp::socket>(io_));
    fillers.back()->async_connect(full.local_endpoint(), [](error_code) {});
  }
  Stream stream(io_.get_executor());
  stream.expires_after(300ms);
  std::optional<error_code> ec;
  const auto start = std::chrono::steady_clock::now();
  stream.async_connect(full.local_endpoint(), [&](error_code e) { ec = e; });
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return ec.has_value(); }));
  EXPECT_EQ(*ec, boost::beast::error::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  // The stream connects again after a timeout (the socket reopens), as Beast's does.
  tcp::acceptor open(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  stream.expires_after(5s);
  ec.reset();
  stream.async_connect(open.local_endpoint(), [&](error_code e) { ec = e; });
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return ec.has_value(); }));
  EXPECT_FALSE(*ec) << ec->message();
}

TEST_F(DeadlineStreamTest, BeastReadsAnHttpRequestThroughIt) {
  connect();
  stream_->expires_after(5s);
  boost::beast::flat_buffer buffer;
  boost::beast::http::request<boost::beast::http::string_body> req;
  std::optional<error_code> ec;
  boost::beast::http::async_read(*stream_, buffer, req, [&](error_code e, size_t) { ec = e; });
  peer_writes("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel");
  run_for(50ms);
  peer_writes("lo");
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return ec.has_value(); }));
  ASSERT_FALSE(*ec) << ec->message();
  EXPECT_EQ(req.target(), "/a");
  EXPECT_EQ(req.body(), "hello");
}

TEST_F(DeadlineStreamTest, DestroyedWithAReadPending) {
  connect();
  stream_->expires_after(1h);
  start_read();
  stream_.reset();  // the read completes later, aborted; it holds what it touches
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  EXPECT_EQ(*read_ec_, asio::error::operation_aborted);
  // The timer's wait was cancelled with the stream: nothing is left to run (a wait left behind
  // would keep the io_context busy for the hour).
  const auto start = std::chrono::steady_clock::now();
  io_.restart();
  io_.run_for(3s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST_F(DeadlineStreamTest, CancelAbortsWithoutClosing) {
  connect();
  stream_->expires_never();
  start_read();
  stream_->cancel();
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  EXPECT_EQ(*read_ec_, asio::error::operation_aborted);
  EXPECT_TRUE(stream_->socket().is_open());
  stream_->expires_after(5s);
  start_read();
  peer_writes("still here");
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  ASSERT_FALSE(*read_ec_) << read_ec_->message();
}

// close() with the timer waiting, then an operation with a later deadline than that wait's: it
// must get a wait of its own (the passthrough's next connect after a refused one).
TEST_F(DeadlineStreamTest, AfterCloseALaterDeadlineStillTimesOut) {
  tcp::acceptor closed(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const auto refused_at = closed.local_endpoint();
  closed.close();  // nobody listens there now: connects are refused
  Stream stream(io_.get_executor());
  stream.expires_after(100ms);
  std::optional<error_code> ec;
  stream.async_connect(refused_at, [&](error_code e) { ec = e; });
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return ec.has_value(); }));
  ASSERT_EQ(*ec, asio::error::connection_refused);
  stream.close();
  // A read on a fresh connection, due later than the cancelled wait.
  tcp::acceptor acceptor(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  stream.expires_after(5s);
  ec.reset();
  stream.async_connect(acceptor.local_endpoint(), [&](error_code e) { ec = e; });
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return ec.has_value(); }));
  ASSERT_FALSE(*ec) << ec->message();
  tcp::socket server_end(io_);
  acceptor.accept(server_end);
  const auto start = std::chrono::steady_clock::now();
  stream.expires_after(300ms);
  std::optional<error_code> read_ec;
  stream.async_read_some(asio::buffer(buf_), [&](error_code e, size_t) { read_ec = e; });
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec.has_value(); }));
  EXPECT_EQ(*read_ec, boost::beast::error::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

// Moved with a read pending: the read and its deadline go with the state; the stream moved from
// keeps an executor and a closed socket, and works as a new one.
TEST_F(DeadlineStreamTest, MovedWithAReadPending) {
  connect();
  stream_->expires_after(150ms);
  start_read();
  Stream moved(std::move(*stream_));
  EXPECT_FALSE(stream_->socket().is_open());
  stream_->expires_after(1s);  // the moved-from stream is usable
  EXPECT_TRUE(moved.socket().is_open());
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  EXPECT_EQ(*read_ec_, boost::beast::error::timeout);
  EXPECT_FALSE(moved.socket().is_open());
}

// A zero-byte read beside a pending read (asio's SSL stream completes an operation that needs no
// I/O through one): the pending read keeps its deadline.
TEST_F(DeadlineStreamTest, AZeroByteReadBesideAPendingReadLeavesItsDeadline) {
  connect();
  stream_->expires_after(200ms);
  start_read();
  std::optional<error_code> empty_ec;
  stream_->async_read_some(asio::mutable_buffer(), [&](error_code e, size_t) { empty_ec = e; });
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return empty_ec.has_value(); }));
  EXPECT_FALSE(*empty_ec) << empty_ec->message();
  EXPECT_FALSE(read_ec_.has_value());
  ASSERT_NO_FATAL_FAILURE(run_until([&] { return read_ec_.has_value(); }));
  EXPECT_EQ(*read_ec_, boost::beast::error::timeout);
}

// What the stream is for: operations with moving deadlines arm the timer about once, not once
// per operation. Counted by the handlers the io_context runs for 100 echoed requests, against the
// same exchanges on a plain socket: a timer armed and cancelled per operation (as
// beast::basic_stream does) adds a cancelled wait's completion to each read and each write.
template <class S>
size_t handlers_for_echoes(asio::io_context& io, S& server, tcp::socket& peer) {
  std::array<char, 64> buf{};
  size_t exchanges = 0;
  std::function<void()> next = [&] {
    if constexpr (requires { server.expires_after(30s); }) server.expires_after(30s);
    server.async_read_some(asio::buffer(buf), [&](error_code ec, size_t n) {
      if (ec) return;
      if constexpr (requires { server.expires_after(30s); }) server.expires_after(30s);
      asio::async_write(server, asio::buffer(buf.data(), n), [&](error_code ec2, size_t) {
        if (ec2) return;
        ++exchanges;
        next();
      });
    });
  };
  next();
  io.restart();
  size_t handlers = 0;
  std::array<char, 16> answer{};
  for (size_t i = 1; i <= 100; ++i) {
    asio::write(peer, asio::buffer(std::string_view("0123456789")));
    while (exchanges < i) {
      const size_t ran = io.run_one_for(1s);
      if (ran == 0) return 0;  // stuck
      handlers += ran;
    }
    asio::read(peer, asio::buffer(answer.data(), 10));
  }
  return handlers;
}

TEST_F(DeadlineStreamTest, ManyRequestsArmTheTimerAboutOnce) {
  connect();
  const size_t with_deadlines = handlers_for_echoes(io_, *stream_, *peer_);
  tcp::acceptor acceptor(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket peer(io_);
  peer.connect(acceptor.local_endpoint());
  Socket plain(io_.get_executor());
  acceptor.accept(plain);
  const size_t without = handlers_for_echoes(io_, plain, peer);
  ASSERT_GT(without, 0u);
  ASSERT_GT(with_deadlines, 0u);
  EXPECT_LE(with_deadlines, without + 2) << "plain socket: " << without;
}

}  // namespace
}  // namespace tidegate::dataplane::runtime
