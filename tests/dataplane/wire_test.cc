#include "server/wire.h"

#include <gtest/gtest.h>

#include <boost/beast/http.hpp>
#include <string>

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

std::string flatten(OutgoingMessage::Buffers buffers) {
  std::string out;
  for (const auto& b : buffers) out.append(static_cast<const char*>(b.data()), b.size());
  return out;
}

TEST(Wire, RequestHeadKeepsFieldOrderAndTarget) {
  http::request_header<Fields> req;
  req.method(http::verb::post);
  req.target("/a?b=c");
  req.version(11);
  req.set(http::field::host, "example.com");
  req.insert("X-Custom", "1");
  req.insert("x-custom", "2");
  std::string out;
  append_head(out, req);
  EXPECT_EQ(out, "POST /a?b=c HTTP/1.1\r\nHost: example.com\r\nX-Custom: 1\r\nx-custom: 2\r\n\r\n");
}

TEST(Wire, ResponseHeadKeepsReasonAndVersion) {
  http::response_header<Fields> res;
  res.result(404);
  res.reason("Not Here");
  res.version(10);
  res.set(http::field::content_length, "0");
  std::string out;
  append_head(out, res);
  EXPECT_EQ(out, "HTTP/1.0 404 Not Here\r\nContent-Length: 0\r\n\r\n");
  http::response_header<Fields> unusual;
  unusual.result(299);  // no standard reason phrase: the status line still has its separator
  unusual.version(11);
  out.clear();
  append_head(out, unusual);
  EXPECT_EQ(out.substr(0, 13), "HTTP/1.1 299 ");
}

TEST(Wire, RawBodyFollowsHeadInOneWrite) {
  http::response_header<Fields> res;
  res.result(200);
  res.version(11);
  res.set(http::field::content_length, "5");
  OutgoingMessage m;
  m.start(res, false);
  auto first = m.next("hel", 3, false);
  EXPECT_EQ(flatten(first), "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel");
  EXPECT_FALSE(m.done());
  m.written();
  EXPECT_EQ(flatten(m.next("lo", 2, true)), "lo");  // the header is not repeated
  EXPECT_TRUE(m.done());
}

TEST(Wire, ChunkedFramingAndLastChunk) {
  http::request_header<Fields> req;
  req.method(http::verb::put);
  req.target("/");
  req.version(11);
  req.set(http::field::transfer_encoding, "chunked");
  OutgoingMessage m;
  m.start(req, true);
  std::string body(300, 'x');
  std::string wire = flatten(m.next(body.data(), body.size(), false));
  m.written();
  EXPECT_EQ(wire, "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n12c\r\n" + body + "\r\n");
  // An empty read in the middle emits nothing (an empty chunk would end the body).
  EXPECT_EQ(flatten(m.next(nullptr, 0, false)), "");
  EXPECT_EQ(flatten(m.next("ab", 2, true)), "2\r\nab\r\n0\r\n\r\n");
  EXPECT_TRUE(m.done());
  m.start(req, true);
  m.written();
  EXPECT_EQ(flatten(m.next(nullptr, 0, true)), "0\r\n\r\n");
}

TEST(Wire, HeadOnlyEndsTheMessage) {
  http::response_header<Fields> res;
  res.result(204);
  res.version(11);
  OutgoingMessage m;
  m.start(res, true);
  EXPECT_EQ(flatten(m.head_only()), "HTTP/1.1 204 No Content\r\n\r\n");
  EXPECT_TRUE(m.done());
}

}  // namespace
}  // namespace tidegate::dataplane::server
