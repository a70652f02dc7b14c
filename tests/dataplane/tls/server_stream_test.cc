// Tests for tls::ServerStream against Asio's own SSL client over loopback: handshakes (TLS 1.2,
// 1.3, refused versions, timeouts, not TLS at all), data both ways in small and large pieces,
// gathered writes, a read and a write outstanding at once (tunnels), how the peer's close reads,
// completions that need no I/O, and session tickets sent before the server's first write.

#include "tls/server_stream.h"

#include <gtest/gtest.h>

#include <openssl/err.h>

#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <boost/asio/read.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>

#include "tls/tls_context.h"

namespace tidegate::dataplane::tls {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using Client = asio::ssl::stream<tcp::socket>;

class ServerStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string cert, key, error;
    ASSERT_TRUE(generate_self_signed(&cert, &key, &error)) << error;
    server_ctx_ = make_server_context(cert, key, ServerSettings{random_ticket_keys()}, &error);
    ASSERT_TRUE(server_ctx_) << error;
    client_ctx_.set_verify_mode(asio::ssl::verify_none);
  }

  // A TCP connection: the server end wrapped in a ServerStream, the client end in Asio's stream.
  void connect() {
    tcp::acceptor acceptor(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    client_ = std::make_unique<Client>(io_, client_ctx_);
    client_->next_layer().connect(acceptor.local_endpoint());
    runtime::Socket socket(io_.get_executor());
    acceptor.accept(socket);
    server_ = std::make_unique<ServerStream>(runtime::Stream(std::move(socket)), server_ctx_.get());
  }

  // Runs the io_context until `done` holds (or 10 s pass).
  void run_until(const std::function<bool()>& done) {
    io_.restart();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(done()) << "timed out";
  }

  // Both handshakes; returns the server's and the client's errors.
  std::pair<error_code, error_code> handshake() {
    std::optional<error_code> server_ec, client_ec;
    server_->async_handshake(asio::ssl::stream_base::server,
                             [&](error_code ec) { server_ec = ec; });
    client_->async_handshake(asio::ssl::stream_base::client, [&](error_code ec) {
      client_ec = ec;
      if (ec) client_->next_layer().close();  // the server must not wait for more
    });
    run_until([&] { return server_ec && client_ec; });
    return {server_ec.value_or(error_code{}), client_ec.value_or(error_code{})};
  }

  void handshake_ok() {
    auto [s, c] = handshake();
    ASSERT_FALSE(s) << s.message();
    ASSERT_FALSE(c) << c.message();
  }

  // Reads exactly n bytes at the client.
  std::string client_read(size_t n) {
    std::string out(n, '\0');
    std::optional<error_code> done;
    asio::async_read(*client_, asio::buffer(out), [&](error_code ec, size_t) { done = ec; });
    run_until([&] { return done.has_value(); });
    EXPECT_FALSE(*done) << done->message();
    return out;
  }

  // Reads exactly n bytes at the server.
  std::string server_read(size_t n) {
    std::string out(n, '\0');
    std::optional<error_code> done;
    asio::async_read(*server_, asio::buffer(out), [&](error_code ec, size_t) { done = ec; });
    run_until([&] { return done.has_value(); });
    EXPECT_FALSE(*done) << done->message();
    return out;
  }

  static std::string pattern(size_t n, char seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 % 251);
    return s;
  }

  asio::io_context io_{1};
  SslCtxPtr server_ctx_;
  asio::ssl::context client_ctx_{asio::ssl::context::tls_client};
  std::unique_ptr<Client> client_;
  std::unique_ptr<ServerStream> server_;
};

TEST_F(ServerStreamTest, Tls13HandshakeAndSmallExchange) {
  connect();
  handshake_ok();
  EXPECT_STREQ(SSL_get_version(server_->native_handle()), "TLSv1.3");
  EXPECT_TRUE(SSL_is_server(server_->native_handle()));

  std::optional<error_code> wrote;
  asio::async_write(*client_, asio::buffer(std::string_view("GET / HTTP/1.1\r\n\r\n")),
                    [&](error_code ec, size_t) { wrote = ec; });
  EXPECT_EQ(server_read(18), "GET / HTTP/1.1\r\n\r\n");
  run_until([&] { return wrote.has_value(); });

  // A gathered write (header + body) arrives whole.
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", body = "hello";
  std::optional<error_code> sent;
  std::array<asio::const_buffer, 2> buffers{asio::buffer(head), asio::buffer(body)};
  asio::async_write(*server_, buffers, [&](error_code ec, size_t n) {
    sent = ec;
    EXPECT_EQ(n, head.size() + body.size());
  });
  EXPECT_EQ(client_read(head.size() + body.size()), head + body);
  run_until([&] { return sent.has_value(); });
  EXPECT_FALSE(*sent);
}

TEST_F(ServerStreamTest, Tls12Handshake) {
  SSL_CTX_set_max_proto_version(client_ctx_.native_handle(), TLS1_2_VERSION);
  connect();
  handshake_ok();
  EXPECT_STREQ(SSL_get_version(server_->native_handle()), "TLSv1.2");
  // The server's last flight (its Finished) must have left before the server waits to read.
  std::optional<error_code> wrote;
  asio::async_write(*client_, asio::buffer(std::string_view("ping")),
                    [&](error_code ec, size_t) { wrote = ec; });
  EXPECT_EQ(server_read(4), "ping");
}

TEST_F(ServerStreamTest, LargeTransfersBothWaysInRecordSizedPieces) {
  connect();
  handshake_ok();
  const std::string down = pattern(1 << 20, 'a'), up = pattern((1 << 20) + 123, 'z');
  // Three buffers per write: a small one first, as the HTTP session writes a header and a body.
  std::array<asio::const_buffer, 3> buffers{
      asio::buffer(down.data(), 100), asio::buffer(down.data() + 100, 40'000),
      asio::buffer(down.data() + 40'100, down.size() - 40'100)};
  std::optional<error_code> sent;
  asio::async_write(*server_, buffers, [&](error_code ec, size_t) { sent = ec; });
  EXPECT_EQ(client_read(down.size()), down);
  run_until([&] { return sent.has_value(); });
  EXPECT_FALSE(*sent);

  std::optional<error_code> uploaded;
  asio::async_write(*client_, asio::buffer(up), [&](error_code ec, size_t) { uploaded = ec; });
  EXPECT_EQ(server_read(up.size()), up);
  run_until([&] { return uploaded.has_value(); });
}

TEST_F(ServerStreamTest, ReadAndWriteOutstandingAtOnce) {
  // A tunnel: the server keeps a read pending while it writes, both ways at once.
  connect();
  handshake_ok();
  const std::string to_server = pattern(300'000, 'q'), to_client = pattern(300'000, 'r');
  std::string got_server, got_client;
  std::array<char, 16 * 1024> server_buf{}, client_buf{};
  std::function<void()> server_read_loop = [&] {
    server_->async_read_some(asio::buffer(server_buf), [&](error_code ec, size_t n) {
      ASSERT_FALSE(ec) << ec.message();
      got_server.append(server_buf.data(), n);
      if (got_server.size() < to_server.size()) server_read_loop();
    });
  };
  std::function<void()> client_read_loop = [&] {
    client_->async_read_some(asio::buffer(client_buf), [&](error_code ec, size_t n) {
      ASSERT_FALSE(ec) << ec.message();
      got_client.append(client_buf.data(), n);
      if (got_client.size() < to_client.size()) client_read_loop();
    });
  };
  server_read_loop();
  client_read_loop();
  bool server_sent = false, client_sent = false;
  asio::async_write(*server_, asio::buffer(to_client), [&](error_code ec, size_t) {
    EXPECT_FALSE(ec) << ec.message();
    server_sent = true;
  });
  asio::async_write(*client_, asio::buffer(to_server), [&](error_code ec, size_t) {
    EXPECT_FALSE(ec) << ec.message();
    client_sent = true;
  });
  run_until([&] {
    return server_sent && client_sent && got_server.size() >= to_server.size() &&
           got_client.size() >= to_client.size();
  });
  EXPECT_EQ(got_server, to_server);
  EXPECT_EQ(got_client, to_client);
}

TEST_F(ServerStreamTest, KeyUpdateFromTheClientIsAnswered) {
  // A TLS 1.3 post-handshake message on the read side; our KeyUpdate goes out with the next
  // record we write.
  connect();
  handshake_ok();
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(SSL_key_update(client_->native_handle(), SSL_KEY_UPDATE_REQUESTED), 1);
    std::optional<error_code> wrote, sent;
    asio::async_write(*client_, asio::buffer(std::string_view("request")),
                      [&](error_code ec, size_t) { wrote = ec; });
    EXPECT_EQ(server_read(7), "request");
    asio::async_write(*server_, asio::buffer(std::string_view("response")),
                      [&](error_code ec, size_t) { sent = ec; });
    EXPECT_EQ(client_read(8), "response");
    run_until([&] { return wrote.has_value() && sent.has_value(); });
    EXPECT_FALSE(*sent);
  }
}

TEST_F(ServerStreamTest, PeerCloseWithoutCloseNotifyIsStreamTruncated) {
  connect();
  handshake_ok();
  std::optional<error_code> read;
  std::array<char, 64> buf{};
  server_->async_read_some(asio::buffer(buf), [&](error_code ec, size_t) { read = ec; });
  client_->next_layer().shutdown(tcp::socket::shutdown_send);
  run_until([&] { return read.has_value(); });
  EXPECT_EQ(*read, asio::ssl::error::stream_truncated) << read->message();
}

TEST_F(ServerStreamTest, CloseNotifyReadsAsEof) {
  connect();
  handshake_ok();
  std::optional<error_code> read;
  std::array<char, 64> buf{};
  server_->async_read_some(asio::buffer(buf), [&](error_code ec, size_t) { read = ec; });
  client_->async_shutdown([](error_code) {});  // sends close_notify, then waits for ours
  run_until([&] { return read.has_value(); });
  EXPECT_EQ(*read, asio::error::eof) << read->message();
}

TEST_F(ServerStreamTest, WriteToAClosedPeerFailsAndStaysFailed) {
  connect();
  handshake_ok();
  client_->next_layer().close();
  const std::string chunk = pattern(16 * 1024, 'w');
  std::optional<error_code> failed;
  std::function<void()> write_loop = [&] {
    asio::async_write(*server_, asio::buffer(chunk), [&](error_code ec, size_t) {
      if (ec) {
        failed = ec;
        return;
      }
      write_loop();
    });
  };
  write_loop();
  run_until([&] { return failed.has_value(); });
  // Every later write reports the same failure without touching the socket.
  std::optional<error_code> again;
  server_->async_write_some(asio::buffer(chunk), [&](error_code ec, size_t n) {
    again = ec;
    EXPECT_EQ(n, 0u);
  });
  run_until([&] { return again.has_value(); });
  EXPECT_EQ(*again, *failed);
}

TEST_F(ServerStreamTest, CompletionWithoutIoIsNotInline) {
  connect();
  handshake_ok();
  std::optional<error_code> wrote;
  asio::async_write(*client_, asio::buffer(std::string_view("0123456789")),
                    [&](error_code ec, size_t) { wrote = ec; });
  EXPECT_EQ(server_read(4), "0123");
  // The rest of the record is already decrypted: the next read needs no I/O, and still its
  // handler runs from the io_context, not from inside async_read_some.
  bool initiating = true;
  std::optional<std::string> got;
  std::array<char, 6> buf{};
  server_->async_read_some(asio::buffer(buf), [&](error_code ec, size_t n) {
    EXPECT_FALSE(initiating);
    EXPECT_FALSE(ec);
    got = std::string(buf.data(), n);
  });
  initiating = false;
  run_until([&] { return got.has_value(); });
  EXPECT_EQ(*got, "456789");
}

TEST_F(ServerStreamTest, HandshakeTimesOutThroughTheNextLayer) {
  connect();
  server_->next_layer().expires_after(std::chrono::milliseconds(100));
  std::optional<error_code> result;
  server_->async_handshake(asio::ssl::stream_base::server, [&](error_code ec) { result = ec; });
  run_until([&] { return result.has_value(); });  // the client never sends its hello
  EXPECT_EQ(*result, boost::beast::error::timeout) << result->message();
}

TEST_F(ServerStreamTest, OldProtocolVersionIsRefusedWithAnAlert) {
  SSL_CTX* c = client_ctx_.native_handle();
  SSL_CTX_set_min_proto_version(c, TLS1_1_VERSION);
  SSL_CTX_set_max_proto_version(c, TLS1_1_VERSION);
  SSL_CTX_set_cipher_list(c, "DEFAULT:@SECLEVEL=0");
  connect();
  auto [server_ec, client_ec] = handshake();
  EXPECT_EQ(server_ec.category(), asio::error::get_ssl_category()) << server_ec.message();
  // The client heard why: the alert was sent before the server reported the failure.
  EXPECT_NE(client_ec.message().find("protocol version"), std::string::npos) << client_ec.message();
  ERR_clear_error();
}

TEST_F(ServerStreamTest, NotTlsFailsTheHandshake) {
  connect();
  std::optional<error_code> result;
  server_->async_handshake(asio::ssl::stream_base::server, [&](error_code ec) { result = ec; });
  asio::write(client_->next_layer(), asio::buffer(std::string_view("GET / HTTP/1.1\r\n\r\n")));
  run_until([&] { return result.has_value(); });
  EXPECT_TRUE(*result);
  ERR_clear_error();
}

int tickets_received = 0;
int count_ticket(SSL*, SSL_SESSION*) {
  ++tickets_received;
  return 0;  // not kept
}

TEST_F(ServerStreamTest, OneSessionTicketPerFullHandshake) {
  // kTls13TicketsPerHandshake (OpenSSL's default would be 2), and the ticket resumes.
  SSL_CTX_set_session_cache_mode(client_ctx_.native_handle(), SSL_SESS_CACHE_CLIENT);
  SSL_CTX_sess_set_new_cb(client_ctx_.native_handle(), count_ticket);
  tickets_received = 0;
  connect();
  handshake_ok();
  std::optional<error_code> sent;
  asio::async_write(*server_, asio::buffer(std::string_view("response")),
                    [&](error_code ec, size_t) { sent = ec; });
  EXPECT_EQ(client_read(8), "response");  // the ticket came with it
  EXPECT_EQ(tickets_received, static_cast<int>(kTls13TicketsPerHandshake));

  SSL_SESSION* session = SSL_get1_session(client_->native_handle());
  ASSERT_NE(session, nullptr);
  // As if closed properly (OpenSSL marks the session of a connection dropped without
  // close_notify as not resumable).
  SSL_set_shutdown(client_->native_handle(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  connect();
  SSL_set_session(client_->native_handle(), session);
  SSL_SESSION_free(session);
  handshake_ok();
  EXPECT_TRUE(SSL_session_reused(server_->native_handle()));
  EXPECT_TRUE(SSL_session_reused(client_->native_handle()));
}

TEST_F(ServerStreamTest, SessionTicketsLeaveBeforeTheServerWaitsToRead) {
  // TLS 1.3 tickets are held back to travel with the first response, but a server that reads
  // first (the client has not sent its request yet) sends them before it waits.
  connect();
  handshake_ok();
  std::array<char, 64> server_buf{}, client_buf{};
  std::optional<error_code> server_read, client_read;
  server_->async_read_some(asio::buffer(server_buf),
                           [&](error_code ec, size_t) { server_read = ec; });
  client_->async_read_some(asio::buffer(client_buf),
                           [&](error_code ec, size_t) { client_read = ec; });
  run_until([&] {
    SSL_SESSION* session = SSL_get0_session(client_->native_handle());
    return session != nullptr && SSL_SESSION_is_resumable(session) == 1;
  });
  EXPECT_FALSE(server_read.has_value());
  client_->next_layer().close();
  server_->next_layer().close();
  run_until([&] { return server_read.has_value() && client_read.has_value(); });
}

}  // namespace
}  // namespace tidegate::dataplane::tls
