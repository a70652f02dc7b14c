#include "server/grpc.h"

#include <gtest/gtest.h>

namespace tidegate::dataplane::server {
namespace {

namespace http = boost::beast::http;

TEST(GrpcTest, AnswersMapToTheCodesAGrpcClientExpects) {
  struct Case {
    unsigned http;
    GrpcStatus grpc;
  };
  const Case cases[] = {
      {404, GrpcStatus::kUnimplemented},     {503, GrpcStatus::kUnavailable},
      {502, GrpcStatus::kUnavailable},       {504, GrpcStatus::kDeadlineExceeded},
      {429, GrpcStatus::kResourceExhausted}, {413, GrpcStatus::kResourceExhausted},
      {431, GrpcStatus::kResourceExhausted}, {401, GrpcStatus::kUnauthenticated},
      {403, GrpcStatus::kPermissionDenied},  {400, GrpcStatus::kInternal},
      {308, GrpcStatus::kUnknown},           {500, GrpcStatus::kUnknown},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(grpc_status_for_http(c.http), c.grpc) << c.http;
  }
}

TEST(GrpcTest, OnlyHttp2RequestsWithAGrpcContentTypeAreGrpc) {
  struct Case {
    const char* content_type;  // null: none
    unsigned version;
    bool grpc;
  };
  const Case cases[] = {
      {"application/grpc", 20, true},
      {"application/grpc+proto", 20, true},
      {"Application/GRPC+json", 20, true},
      {"application/grpc;charset=utf-8", 20, true},
      {"application/grpc", 11, false},
      {"application/grpc-web", 20, false},
      {"application/grpc-web+proto", 20, false},
      {"application/grpcx", 20, false},
      {"application/json", 20, false},
      {nullptr, 20, false},
  };
  for (const auto& c : cases) {
    http::request_header<Fields> req;
    if (c.content_type != nullptr) req.set(http::field::content_type, c.content_type);
    EXPECT_EQ(is_grpc_request(req, c.version), c.grpc)
        << (c.content_type ? c.content_type : "(none)") << " HTTP " << c.version;
  }
}

TEST(GrpcTest, MessagesArePercentEncodedWithoutTheTrailingNewline) {
  EXPECT_EQ(grpc_percent_encode("no route\n"), "no route");
  EXPECT_EQ(grpc_percent_encode("100% d\xc3\xa9j\xc3\xa0 vu\r\n"), "100%25 d%C3%A9j%C3%A0 vu");
  EXPECT_EQ(grpc_percent_encode("tab\there"), "tab%09here");
  EXPECT_EQ(grpc_percent_encode(""), "");
}

TEST(GrpcTest, GrpcTimeoutParsesEveryUnitAndRefusesTheRest) {
  using namespace std::chrono;
  struct Case {
    std::string_view text;
    std::optional<nanoseconds> want;
  };
  const Case cases[] = {
      {"1H", hours(1)},
      {"2M", minutes(2)},
      {"30S", seconds(30)},
      {"100m", milliseconds(100)},
      {"250u", microseconds(250)},
      {"7n", nanoseconds(7)},
      {"99999999S", seconds(99999999)},  // 8 digits, the most allowed
      {"0m", nanoseconds(0)},
      {"123456789S", std::nullopt},  // 9 digits
      {"S", std::nullopt},
      {"", std::nullopt},
      {"10", std::nullopt},   // no unit
      {"10s", std::nullopt},  // units are case-sensitive: s is not S
      {"-1S", std::nullopt},
      {"1.5S", std::nullopt},
      {" 1S", std::nullopt},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_grpc_timeout(c.text), c.want) << c.text;
  }
}

}  // namespace
}  // namespace tidegate::dataplane::server
