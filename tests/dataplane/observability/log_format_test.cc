// Tests for access log layouts: text template compilation (a table of refused templates), every
// variable's output, text escaping of hostile bytes (a table, then random bytes: a line is never
// split, never gains a quote, stays valid UTF-8), caps, JSON field selection and order, and the
// flag combinations.

#include "observability/log_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace tidegate::dataplane::observability {
namespace {

using namespace std::chrono_literals;

AccessLogRecord sample() {
  AccessLogRecord r;
  r.time = std::chrono::system_clock::time_point(1'764'495'541'123ms);  // 2025-11-30T09:39:01.123Z
  r.request_id = "abc123";
  r.client = "10.1.2.3";
  r.method = "GET";
  r.host = "foo.com";
  r.path = "/a\"b";
  r.status = 200;
  r.bytes_in = 120;
  r.bytes_out = 5000;
  r.duration = 12'345'678ns;
  r.upstream_duration = 1'500us;
  r.upstream = "10.0.0.7:8080";
  r.ingress = "shop/web";
  r.service = "shop/web:80";
  r.http_version = 11;
  r.user_agent = "curl/8.5.0";
  r.referer = "https://foo.com/from?token=secret#frag";
  r.peer = "127.0.0.9";  // a trusted proxy the request came through
  return r;
}

std::string text_line(std::string_view tmpl, const AccessLogRecord& r) {
  std::string error;
  auto layout = AccessLogLayout::text(tmpl, &error);
  EXPECT_TRUE(layout) << tmpl << ": " << error;
  if (!layout) return {};
  LineFormatter f(*layout);
  std::string line;
  f.format(r, line);
  EXPECT_TRUE(!line.empty() && line.back() == '\n') << tmpl;
  EXPECT_LE(line.size(), layout->max_line_bytes()) << tmpl;
  if (!line.empty()) line.pop_back();
  return line;
}

std::string text_error(std::string_view tmpl) {
  std::string error;
  auto layout = AccessLogLayout::text(tmpl, &error);
  EXPECT_FALSE(layout) << "accepted: " << tmpl;
  return error;
}

// ---- Template compilation ----

TEST(LogTemplateTest, RefusedTemplatesSayWhy) {
  struct Case {
    const char* name;
    std::string tmpl;
    std::string want;  // a substring of the error
  };
  const std::vector<Case> cases = {
      {"empty", "", "the template is empty"},
      {"lone dollar", "$", "'$' at byte 0 is not followed by a variable name"},
      {"dollar then space", "a $ b", "'$' at byte 2 is not followed by a variable name"},
      {"dollar then punctuation", "$-", "'$' at byte 0"},
      {"unterminated brace", "x ${status", "'${' at byte 2 has no closing '}'"},
      {"empty braces", "${}", "'${}' at byte 0 is not a variable name"},
      {"bad character in braces", "${sta-tus}", "'${sta-tus}' at byte 0 is not a variable name"},
      {"unknown", "$status $nope", "unknown variable $nope at byte 8"},
      {"unknown in braces", "${nope}x", "unknown variable $nope at byte 0"},
      {"names are case-sensitive", "$Status", "unknown variable $Status"},
      {"name runs on", "$status_x", "unknown variable $status_x"},
      {"request_uri has the query", "$request_uri",
       "unknown variable $request_uri at byte 0: the query string is never logged: use $uri"},
      {"request has the query", "\"$request\"", "$request_method $uri $server_protocol"},
      {"args", "$args", "the query string is never logged"},
      {"query_string", "$query_string", "the query string is never logged"},
      {"arg_ prefix", "$arg_token", "the query string is never logged"},
      {"body_bytes_sent", "$body_bytes_sent", "use $bytes_sent"},
      {"upstream_response_time", "$upstream_response_time", "use $upstream_header_time"},
      {"remote_user", "$remote_user", "write - instead"},
      {"other headers", "$http_authorization", "others can carry credentials"},
      {"cookies", "$cookie_session", "cookies are never logged"},
      {"newline", "a\nb", "control character 0x0a at byte 1"},
      {"carriage return", "$status\r", "control character 0x0d at byte 7"},
      {"nul", std::string("a\0b", 3), "control character 0x00 at byte 1"},
      {"del", "a\x7f", "control character 0x7f at byte 1"},
      {"too long", "$path $path $path $path", "longest line would be"},
  };
  for (const auto& c : cases) {
    const std::string error = text_error(c.tmpl);
    EXPECT_NE(error.find(c.want), std::string::npos)
        << c.name << ": got \"" << error << "\", want \"" << c.want << "\"";
  }
}

TEST(LogTemplateTest, LiteralsDollarsBracesAndTabs) {
  const AccessLogRecord r = sample();
  EXPECT_EQ(text_line("${status}ms", r), "200ms");
  EXPECT_EQ(text_line("[$status]", r), "[200]");
  EXPECT_EQ(text_line("$status$method", r), "200GET");
  EXPECT_EQ(text_line("cost: $$5", r), "cost: $5");
  EXPECT_EQ(text_line("$$status", r), "$status");
  EXPECT_EQ(text_line("$${status}", r), "${status}");
  EXPECT_EQ(text_line("a\tb $status", r), "a\tb 200");
  EXPECT_EQ(text_line("no variables", r), "no variables");
  EXPECT_EQ(text_line("caf\xc3\xa9 $status", r), "caf\xc3\xa9 200");
}

// ---- Every variable ----

TEST(LogTemplateTest, EachVariable) {
  const std::vector<std::pair<std::string, std::string>> want = {
      {"time", "2025-11-30T09:39:01.123Z"},
      {"request_id", "abc123"},
      {"client", "10.1.2.3"},
      {"method", "GET"},
      {"host", "foo.com"},
      {"path", "/a\\x22b"},
      {"status", "200"},
      {"bytes_in", "120"},
      {"bytes_out", "5000"},
      {"duration_ms", "12.345"},
      {"upstream_duration_ms", "1.500"},
      {"upstream", "10.0.0.7:8080"},
      {"ingress", "shop/web"},
      {"service", "shop/web:80"},
      {"protocol", "HTTP/1.1"},
      {"user_agent", "curl/8.5.0"},
      {"referer", "https://foo.com/from"},
      {"peer", "127.0.0.9"},
      {"remote_addr", "10.1.2.3"},
      {"realip_remote_addr", "127.0.0.9"},
      {"request_method", "GET"},
      {"uri", "/a\\x22b"},
      {"http_host", "foo.com"},
      {"server_protocol", "HTTP/1.1"},
      {"request_length", "120"},
      {"bytes_sent", "5000"},
      {"request_time", "0.012"},
      {"upstream_header_time", "0.001"},
      {"upstream_addr", "10.0.0.7:8080"},
      {"time_local", "30/Nov/2025:09:39:01 +0000"},
      {"time_iso8601", "2025-11-30T09:39:01+00:00"},
      {"msec", "1764495541.123"},
      {"http_user_agent", "curl/8.5.0"},
      {"http_referer", "https://foo.com/from"},
      {"namespace", "shop"},
      {"ingress_name", "web"},
      {"service_name", "web"},
      {"service_port", "80"},
      {"proxy_upstream_name", "shop-web-80"},
      // Not a gRPC request (GrpcServiceMethodAndStatus has gRPC ones).
      {"grpc_service", "-"},
      {"grpc_method", "-"},
      {"grpc_status", "-"},
  };
  const AccessLogRecord r = sample();
  std::set<std::string_view> tested;
  for (const auto& [name, value] : want) {
    EXPECT_EQ(text_line("$" + name, r), value) << name;
    EXPECT_EQ(text_line("<${" + name + "}>", r), "<" + value + ">") << name;
    tested.insert(name);
  }
  // A variable added without a line here fails this test.
  for (auto name : AccessLogLayout::variable_names()) {
    EXPECT_TRUE(tested.count(name)) << "untested variable $" << name;
  }
}

TEST(LogTemplateTest, AbsentValuesAreADash) {
  AccessLogRecord r;
  r.time = std::chrono::system_clock::time_point(0ms);
  EXPECT_EQ(text_line("$request_id $client $method $host $uri $status $upstream_addr "
                      "$upstream_header_time $upstream_duration_ms $ingress $service $namespace "
                      "$ingress_name $service_name $service_port $proxy_upstream_name "
                      "$server_protocol \"$http_user_agent\" \"$http_referer\" $time_local $msec",
                      r),
            "- - - - - 0 - - - - - - - - - - - \"-\" \"-\" 01/Jan/1970:00:00:00 +0000 0.000");
  // The namespace falls back to the service's (the default backend has no Ingress name here).
  r.service = "shop/web:http";
  EXPECT_EQ(text_line("$namespace $service_name $service_port $proxy_upstream_name", r),
            "shop web http shop-web-http");
  r.http_version = 10;
  EXPECT_EQ(text_line("$server_protocol", r), "HTTP/1.0");
  r.http_version = 20;
  EXPECT_EQ(text_line("$server_protocol", r), "HTTP/2.0");
}

TEST(LogTemplateTest, TheSecondCacheFollowsTime) {
  AccessLogRecord r = sample();
  auto layout = *AccessLogLayout::text("$time_local|$time_iso8601|$msec|$time", nullptr);
  LineFormatter f(layout);
  std::string line;
  f.format(r, line);
  EXPECT_EQ(line,
            "30/Nov/2025:09:39:01 +0000|2025-11-30T09:39:01+00:00|1764495541.123|"
            "2025-11-30T09:39:01.123Z\n");
  r.time += 1s + 877ms;  // 09:39:03.000: two second boundaries crossed
  line.clear();
  f.format(r, line);
  EXPECT_EQ(line,
            "30/Nov/2025:09:39:03 +0000|2025-11-30T09:39:03+00:00|1764495543.000|"
            "2025-11-30T09:39:03.000Z\n");
  r.time = std::chrono::system_clock::time_point(1'767'225'599'999ms);  // New Year's Eve
  line.clear();
  f.format(r, line);
  EXPECT_EQ(line,
            "31/Dec/2025:23:59:59 +0000|2025-12-31T23:59:59+00:00|1767225599.999|"
            "2025-12-31T23:59:59.999Z\n");
}

// ---- Escaping ----

TEST(LogTextEscapeTest, EscapingTable) {
  struct Case {
    const char* name;
    std::string input;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"empty is a dash", "", "-"},
      {"plain", "/index.html", "/index.html"},
      {"spaces are kept", "Mozilla/5.0 (X11)", "Mozilla/5.0 (X11)"},
      {"quote", "a\"b", "a\\x22b"},
      {"backslash", "a\\b", "a\\x5Cb"},
      {"a forged escape stays visible", "\\x0A", "\\x5Cx0A"},
      {"newline", "a\nb", "a\\x0Ab"},
      {"carriage return", "a\rb", "a\\x0Db"},
      {"tab", "a\tb", "a\\x09b"},
      {"nul", std::string("a\0b", 3), "a\\x00b"},
      {"escape (terminal)", "\x1b[31m", "\\x1B[31m"},
      {"del", "\x7f", "\\x7F"},
      {"2-byte utf8", "caf\xc3\xa9", "caf\xc3\xa9"},
      {"3-byte utf8", "\xe2\x82\xac", "\xe2\x82\xac"},
      {"4-byte utf8", "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
      {"NEL (U+0085)", "a\xc2\x85z", "a\\xC2\\x85z"},
      {"C1 CSI (U+009B)", "\xc2\x9b", "\\xC2\\x9B"},
      {"U+00A0 is printable", "\xc2\xa0", "\xc2\xa0"},
      {"line separator U+2028", "\xe2\x80\xa8", "\\xE2\\x80\\xA8"},
      {"paragraph separator U+2029", "\xe2\x80\xa9", "\\xE2\\x80\\xA9"},
      {"right-to-left override U+202E", "\xe2\x80\xae", "\\xE2\\x80\\xAE"},
      {"isolate U+2066", "\xe2\x81\xa6", "\\xE2\\x81\\xA6"},
      {"U+2027 is printable", "\xe2\x80\xa7", "\xe2\x80\xa7"},
      {"lone continuation", "a\x80z", "a\\x80z"},
      {"invalid lead bytes", "\xff\xfe\xf5", "\\xFF\\xFE\\xF5"},
      {"overlong (C0 AF)", "\xc0\xaf", "\\xC0\\xAF"},
      {"overlong (E0 80 AF)", "\xe0\x80\xaf", "\\xE0\\x80\\xAF"},
      {"surrogate (ED A0 80)", "\xed\xa0\x80", "\\xED\\xA0\\x80"},
      {"above U+10FFFF", "\xf4\x90\x80\x80", "\\xF4\\x90\\x80\\x80"},
      {"truncated then newline", "\xe2\x82\n", "\\xE2\\x82\\x0A"},
      {"lead then quote", "\xc3\"", "\\xC3\\x22"},
  };
  for (const auto& c : cases) {
    std::string out;
    append_text_value(out, c.input);
    EXPECT_EQ(out, c.want) << c.name;
  }
}

TEST(LogTextEscapeTest, AStopByteIsFoundAtEveryPositionOfALongRun) {
  // The escapers scan plain ASCII eight bytes at a time: a byte that needs escaping must be
  // found wherever it sits in the word, next to the edge values that do not stop a run.
  const std::string plain = " ~!#[]{}~ a0Z_/-~ !#[]{}~";  // 0x20 and 0x7e included
  const std::vector<std::pair<char, std::string>> stops = {
      {'"', "\\x22"},    {'\\', "\\x5C"}, {'\n', "\\x0A"},   {'\x1f', "\\x1F"},
      {'\x7f', "\\x7F"}, {'\0', "\\x00"}, {'\x80', "\\x80"}, {'\xff', "\\xFF"},
  };
  const std::vector<std::pair<char, std::string>> json_stops = {
      {'"', "\\\""},       {'\\', "\\\\"},    {'\n', "\\n"},       {'\x1f', "\\u001f"},
      {'\x7f', "\\u007f"}, {'\0', "\\u0000"}, {'\x80', "\\ufffd"}, {'\xff', "\\ufffd"},
  };
  for (size_t at = 0; at < plain.size(); ++at) {
    for (size_t k = 0; k < stops.size(); ++k) {
      std::string in = plain;
      in[at] = stops[k].first;
      std::string out;
      append_text_value(out, in);
      EXPECT_EQ(out, plain.substr(0, at) + stops[k].second + plain.substr(at + 1))
          << "byte " << int(static_cast<unsigned char>(stops[k].first)) << " at " << at;
      out.clear();
      append_json_string(out, in);
      EXPECT_EQ(out,
                "\"" + plain.substr(0, at) + json_stops[k].second + plain.substr(at + 1) + "\"")
          << "byte " << int(static_cast<unsigned char>(stops[k].first)) << " at " << at;
    }
  }
}

// A small UTF-8 validator (the code under test has its own; this one is independent).
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b >> 6) != 2) return false;
      cp = cp << 6 | (b & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

TEST(LogTextEscapeTest, HostileRequestsCannotSplitOrForgeALine) {
  AccessLogRecord r = sample();
  // A path, a user agent and a host that try to end the line and start a forged one, close the
  // quoted field early, and smuggle bytes that are not UTF-8.
  r.path = "/x\n10.9.9.9 - - [01/Jan/2025:00:00:00 +0000] \"GET /admin HTTP/1.1\" 200";
  r.user_agent = "evil\" 999 \"\r\n\xff\xc0\xaf\xe2\x80\xa8";
  r.host = "h\x1b[2J\x7f";
  r.request_id = "\\\"";
  const std::string line = text_line(kDefaultTextTemplate, r) + "\n";
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  EXPECT_EQ(line.find('\r'), std::string::npos);
  // Exactly the template's own quotes: 6 ("$request_method…", "$http_referer", "$http_user_agent").
  EXPECT_EQ(std::count(line.begin(), line.end(), '"'), 6) << line;
  EXPECT_TRUE(valid_utf8(line)) << line;
  EXPECT_NE(line.find("\"GET /x\\x0A10.9.9.9 - - [01/Jan/2025:00:00:00 +0000] \\x22GET /admin "
                      "HTTP/1.1\\x22 200 HTTP/1.1\""),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("\"evil\\x22 999 \\x22\\x0D\\x0A\\xFF\\xC0\\xAF\\xE2\\x80\\xA8\""),
            std::string::npos)
      << line;
}

TEST(LogTextEscapeTest, RandomBytesNeverBreakALine) {
  std::mt19937 rng(11);
  auto layout = *AccessLogLayout::text(kDefaultTextTemplate, nullptr);
  LineFormatter f(layout);
  std::string fields[6];
  for (int round = 0; round < 2000; ++round) {
    for (auto& s : fields) {
      s.assign(rng() % 40, '\0');
      for (auto& ch : s) ch = static_cast<char>(rng() % 256);
    }
    AccessLogRecord r = sample();
    r.path = fields[0];
    r.user_agent = fields[1];
    r.referer = fields[2];
    r.host = fields[3];
    r.method = fields[4];
    r.request_id = fields[5];
    std::string line;
    f.format(r, line);
    ASSERT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
    ASSERT_EQ(line.back(), '\n');
    ASSERT_EQ(std::count(line.begin(), line.end(), '"'), 6) << line;
    ASSERT_TRUE(std::none_of(line.begin(), line.end() - 1, [](char c) {
      return (c >= 0 && c < 0x20) || c == 0x7f;
    })) << line;
    ASSERT_TRUE(valid_utf8(line)) << line;
  }
}

// ---- Caps ----

TEST(LogTemplateTest, ValuesAreCappedAndTheWorstLineFitsOneFrame) {
  const std::string controls(100'000, '\x01');  // every byte becomes a 4-byte \xHH
  AccessLogRecord r = sample();
  r.request_id = r.client = r.method = r.upstream = r.ingress = r.service = controls;
  r.host = r.path = r.user_agent = r.referer = controls;
  EXPECT_EQ(text_line("$uri", r).size(), 4 * kMaxLoggedPath);
  EXPECT_EQ(text_line("$host", r).size(), 4 * kMaxLoggedHost);
  EXPECT_EQ(text_line("$http_user_agent", r).size(), 4 * kMaxLoggedUserAgent);
  EXPECT_EQ(text_line("$http_referer", r).size(), 4 * kMaxLoggedReferer);
  EXPECT_EQ(text_line("$request_id", r).size(), 4 * kMaxLoggedShortField);
  EXPECT_EQ(text_line("$proxy_upstream_name", r).size(), 4 * kMaxLoggedShortField + 2);

  std::string every;
  for (auto name : AccessLogLayout::variable_names()) {
    if (name == "path" || name == "host" || name == "user_agent" || name == "referer") {
      continue;  // their nginx names ($uri, $http_host...) are in the list once
    }
    every += "\"$" + std::string(name) + "\" ";
  }
  std::string error;
  auto layout = AccessLogLayout::text(every, &error);
  ASSERT_TRUE(layout) << error;
  EXPECT_LE(layout->max_line_bytes(), kMaxLineBytes);
  LineFormatter f(*layout);
  std::string line;
  f.format(r, line);
  EXPECT_LE(line.size(), layout->max_line_bytes());
  auto def = *AccessLogLayout::text(kDefaultTextTemplate, nullptr);
  line.clear();
  LineFormatter(def).format(r, line);
  EXPECT_LE(line.size(), def.max_line_bytes());
  EXPECT_LE(def.max_line_bytes(), kMaxLineBytes);
}

// ---- JSON fields ----

TEST(LogJsonFieldsTest, SelectedFieldsInTheirOrder) {
  std::string error;
  auto layout =
      AccessLogLayout::json_fields("status, path,time,user_agent,referer,protocol", &error);
  ASSERT_TRUE(layout) << error;
  LineFormatter f(*layout);
  std::string line;
  f.format(sample(), line);
  EXPECT_EQ(line,
            R"({"status":200,"path":"/a\"b","time":"2025-11-30T09:39:01.123Z",)"
            R"("user_agent":"curl/8.5.0","referer":"https://foo.com/from","protocol":"HTTP/1.1"})"
            "\n");
  auto j = nlohmann::ordered_json::parse(line);
  std::vector<std::string> keys;
  for (auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"status", "path", "time", "user_agent", "referer",
                                            "protocol"}));
  AccessLogRecord r = sample();
  r.user_agent = r.referer = {};
  r.http_version = 0;
  line.clear();
  f.format(r, line);
  EXPECT_NE(line.find(R"("user_agent":null,"referer":null,"protocol":null})"), std::string::npos);
}

TEST(LogJsonFieldsTest, TheDefaultIsTodaysLineAndUsesNoHeaderLookups) {
  const std::string all14 =
      "time,request_id,client,method,host,path,status,bytes_in,bytes_out,duration_ms,"
      "upstream_duration_ms,upstream,ingress,service";
  std::string error;
  auto listed = AccessLogLayout::json_fields(all14, &error);
  ASSERT_TRUE(listed) << error;
  std::string a, b;
  LineFormatter(AccessLogLayout::json()).format(sample(), a);
  LineFormatter(*listed).format(sample(), b);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(AccessLogLayout::json().uses(LogField::kUserAgent));
  EXPECT_FALSE(AccessLogLayout::json().uses(LogField::kReferer));
  EXPECT_TRUE(AccessLogLayout::json().uses(LogField::kPath));
  auto text = *AccessLogLayout::text(kDefaultTextTemplate, nullptr);
  EXPECT_TRUE(text.uses(LogField::kUserAgent));
  EXPECT_TRUE(text.uses(LogField::kReferer));
  EXPECT_FALSE(AccessLogLayout::text("$status", nullptr)->uses(LogField::kUserAgent));
}

TEST(LogJsonFieldsTest, EveryFieldAtItsCapFitsOneFrame) {
  std::string list;
  for (auto name : AccessLogLayout::json_field_names()) {
    if (!list.empty()) list += ',';
    list += name;
  }
  std::string error;
  auto layout = AccessLogLayout::json_fields(list, &error);
  ASSERT_TRUE(layout) << error;
  EXPECT_LE(layout->max_line_bytes(), kMaxLineBytes);
  const std::string controls(100'000, '\x01');
  AccessLogRecord r = sample();
  r.request_id = r.client = r.method = r.upstream = r.ingress = r.service = controls;
  r.host = r.path = r.user_agent = r.referer = controls;
  const std::string grpc_path = "/" + controls + "/" + controls;
  r.path = grpc_path;  // a gRPC path whose service and method are both past their cap
  r.grpc = true;
  r.grpc_status = 99;
  std::string line;
  LineFormatter(*layout).format(r, line);
  EXPECT_LE(line.size(), layout->max_line_bytes());
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["user_agent"].get<std::string>().size(), kMaxLoggedUserAgent);
  EXPECT_EQ(j["referer"].get<std::string>().size(), kMaxLoggedReferer);
  EXPECT_EQ(j["grpc_service"].get<std::string>().size(), kMaxLoggedShortField);
  EXPECT_EQ(j["grpc_method"].get<std::string>().size(), kMaxLoggedShortField);
}

TEST(LogJsonFieldsTest, GrpcServiceMethodAndStatus) {
  std::string error;
  auto json = AccessLogLayout::json_fields("grpc_service,grpc_method,grpc_status", &error);
  ASSERT_TRUE(json) << error;
  struct Case {
    const char* path;
    bool grpc;
    int status;
    const char* want_json;
    const char* want_text;
  };
  const std::vector<Case> cases = {
      {"/shop.v1.Cart/AddItem", true, 14,
       R"({"grpc_service":"shop.v1.Cart","grpc_method":"AddItem","grpc_status":14})",
       "shop.v1.Cart AddItem 14"},
      // A gRPC response whose status comes in trailers: no status in the log.
      {"/Echo/Say", true, -1, R"({"grpc_service":"Echo","grpc_method":"Say","grpc_status":null})",
       "Echo Say -"},
      {"/shop.v1.Cart/AddItem", false, -1,
       R"({"grpc_service":null,"grpc_method":null,"grpc_status":null})", "- - -"},
      // Paths without the /Service/Method shape name neither.
      {"/Echo", true, 0, R"({"grpc_service":null,"grpc_method":null,"grpc_status":0})", "- - 0"},
      {"/Echo/", true, 0, R"({"grpc_service":null,"grpc_method":null,"grpc_status":0})", "- - 0"},
      {"//Say", true, 0, R"({"grpc_service":null,"grpc_method":null,"grpc_status":0})", "- - 0"},
  };
  for (const auto& c : cases) {
    AccessLogRecord r = sample();
    r.path = c.path;
    r.grpc = c.grpc;
    r.grpc_status = c.status;
    std::string line;
    LineFormatter(*json).format(r, line);
    EXPECT_EQ(line, std::string(c.want_json) + "\n") << c.path;
    EXPECT_EQ(text_line("$grpc_service $grpc_method $grpc_status", r), c.want_text) << c.path;
  }
  EXPECT_TRUE(json->uses(LogField::kGrpcStatus));
  EXPECT_FALSE(AccessLogLayout::json().uses(LogField::kGrpcService));
}

TEST(LogJsonFieldsTest, RefusedLists) {
  struct Case {
    const char* list;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"", "empty field name"},
      {"status,,path", "empty field name"},
      {"status,", "empty field name"},
      {"status,remote_addr", "unknown field 'remote_addr' (fields: time, request_id,"},
      {"Status", "unknown field 'Status'"},
      {"path,status,path", "field 'path' is listed twice"},
  };
  for (const auto& c : cases) {
    std::string error;
    EXPECT_FALSE(AccessLogLayout::json_fields(c.list, &error)) << c.list;
    EXPECT_NE(error.find(c.want), std::string::npos) << c.list << ": " << error;
  }
}

// ---- Flags ----

TEST(LogFlagsTest, Combinations) {
  using F = AccessLogFormat;
  using O = std::optional<std::string_view>;
  struct Case {
    const char* name;
    O mode, tmpl, fields;
    std::optional<F> want;       // nullopt: refused
    std::string_view want_text;  // error substring, or a line to expect for sample()
  };
  const std::vector<Case> cases = {
      {"nothing given: JSON", {}, {}, {}, F::kJson, ""},
      {"off", "off", {}, {}, F::kOff, ""},
      {"text: the default template", "text", {}, {}, F::kText, ""},
      {"a template alone means text", {}, "$status", {}, F::kText, "200\n"},
      {"text with a template", "text", "$status $method", {}, F::kText, "200 GET\n"},
      {"fields", "json", {}, "status", F::kJson, "{\"status\":200}\n"},
      {"fields alone", {}, {}, "method", F::kJson, "{\"method\":\"GET\"}\n"},
      {"off validates a template",
       "off",
       "$nope",
       {},
       std::nullopt,
       "--access-log-format: unknown variable $nope"},
      {"off validates fields",
       "off",
       {},
       "nope",
       std::nullopt,
       "--access-log-fields: unknown field 'nope'"},
      {"off with good values", "off", "$status", "status", F::kOff, ""},
      {"bad mode", "xml", {}, {}, std::nullopt, "--access-log must be json, text or off"},
      {"template with json",
       "json",
       "$status",
       {},
       std::nullopt,
       "--access-log-format is a text template"},
      {"fields with text",
       "text",
       {},
       "status",
       std::nullopt,
       "--access-log-fields selects JSON fields"},
      {"fields with a template",
       {},
       "$status",
       "status",
       std::nullopt,
       "--access-log-fields selects JSON fields"},
      {"bad template",
       {},
       "$request_uri",
       {},
       std::nullopt,
       "--access-log-format: unknown variable $request_uri at byte 0"},
  };
  for (const auto& c : cases) {
    std::string error;
    auto layout = access_log_layout_from_flags(c.mode, c.tmpl, c.fields, &error);
    if (!c.want) {
      EXPECT_FALSE(layout) << c.name;
      EXPECT_NE(error.find(c.want_text), std::string::npos) << c.name << ": " << error;
      continue;
    }
    ASSERT_TRUE(layout) << c.name << ": " << error;
    EXPECT_EQ(layout->format(), *c.want) << c.name;
    if (!c.want_text.empty()) {
      std::string line;
      LineFormatter(*layout).format(sample(), line);
      EXPECT_EQ(line, c.want_text) << c.name;
    }
  }
  // The default text line, in full.
  std::string error;
  auto text = access_log_layout_from_flags("text", {}, {}, &error);
  ASSERT_TRUE(text);
  std::string line;
  LineFormatter(*text).format(sample(), line);
  EXPECT_EQ(line,
            "10.1.2.3 - - [30/Nov/2025:09:39:01 +0000] \"GET /a\\x22b HTTP/1.1\" 200 5000 "
            "\"https://foo.com/from\" \"curl/8.5.0\" 120 0.012 [shop-web-80] 10.0.0.7:8080 0.001 "
            "abc123\n");
}

}  // namespace
}  // namespace tidegate::dataplane::observability
