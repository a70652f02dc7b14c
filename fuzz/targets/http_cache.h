#pragma once
// Fuzz target: the header readers of the response cache and of X-Sendfile, which take text from
// clients and backends: HTTP dates, Cache-Control and Vary, conditional and Range fields, and
// the path a backend's X-Sendfile / X-Accel-Redirect names.
//
// Input: lines. Line 1 is a file size (decimal, else 1000); the next lines are, in order,
// Range, If-Range, If-None-Match, If-Modified-Since, If-Match, If-Unmodified-Since, a
// Cache-Control value (given to the request and the response), a Vary value, an Expires value
// and a sendfile value. Missing lines are empty.
//
// Invariants:
//   - nothing throws;
//   - a parsed HTTP date formats back to a date that parses to the same second;
//   - plan_file_response answers 200 (the whole file), 206 (a non-empty range inside the file),
//     304, 412 or 416 (nothing to send);
//   - a storable lifetime is positive; Vary values name each field once;
//   - a path from sendfile_path is absolute, without NUL, "." or ".." components; through a
//     mapping it lies within the mapping's directory.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "model/sendfile.h"
#include "server/file_response.h"
#include "server/http_date.h"
#include "server/response_cache.h"

namespace tidegate::fuzz {

inline std::string run_http_cache(const uint8_t* data, size_t size) {
  using namespace dataplane::server;
  const std::string_view input = as_text(data, size);
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= input.size() && lines.size() < 11) {
    size_t nl = input.find('\n', start);
    if (nl == std::string_view::npos) nl = input.size();
    lines.push_back(input.substr(start, nl - start));
    start = nl + 1;
  }
  lines.resize(11);
  uint64_t file_size = 1000;
  if (!lines[0].empty() && lines[0].size() < 19 &&
      lines[0].find_first_not_of("0123456789") == std::string_view::npos) {
    file_size = std::stoull(std::string(lines[0]));
  }

  // HTTP dates: each of the date-bearing lines.
  for (std::string_view text : {lines[2], lines[4], lines[6], lines[9]}) {
    if (auto t = parse_http_date(text)) {
      if (*t >= 0 && *t < 253'402'300'800) {  // years 1970-9999: what strftime writes back
        const auto again = parse_http_date(format_http_date(*t));
        TIDEGATE_FUZZ_CHECK(again && *again == *t,
                            "date " << escape(text) << " -> " << *t << " does not round-trip");
      }
    }
  }

  // Conditionals and ranges of a file.
  FileRequest request;
  request.range = lines[1];
  request.if_range = lines[2];
  request.if_none_match = lines[3];
  request.if_modified_since = lines[4];
  request.if_match = lines[5];
  request.if_unmodified_since = lines[6];
  const int64_t mtime = 784'111'777;
  const std::string etag = file_etag(file_size, mtime);
  for (bool get : {true, false}) {
    request.get = get;
    const FilePlan plan = plan_file_response(request, file_size, mtime, etag);
    switch (plan.status) {
      case 200:
        TIDEGATE_FUZZ_CHECK(plan.offset == 0 && plan.length == file_size, "200 not the whole");
        break;
      case 206:
        TIDEGATE_FUZZ_CHECK(get, "206 for a HEAD");
        TIDEGATE_FUZZ_CHECK(
            plan.length > 0 && plan.offset < file_size && plan.length <= file_size - plan.offset,
            "206 outside the file: " << plan.offset << "+" << plan.length << " of " << file_size
                                     << " for " << escape(request.range));
        break;
      case 304:
      case 412:
      case 416:
        TIDEGATE_FUZZ_CHECK(plan.length == 0, "a body with " << plan.status);
        break;
      default:
        TIDEGATE_FUZZ_CHECK(false, "status " << plan.status);
    }
  }

  // Cache-Control, Vary, Expires.
  Fields req;
  Fields res;
  if (!lines[7].empty()) {
    req.insert(boost::beast::http::field::cache_control, lines[7]);
    res.insert(boost::beast::http::field::cache_control, lines[7]);
  }
  if (!lines[8].empty()) res.insert(boost::beast::http::field::vary, lines[8]);
  if (!lines[9].empty()) res.insert(boost::beast::http::field::expires, lines[9]);
  (void)request_cacheability(boost::beast::http::verb::get, req, false);
  const char* why = "";
  for (bool authenticated : {false, true}) {
    if (auto lifetime = storable_lifetime(200, res, 1'800'000'000, authenticated, &why)) {
      TIDEGATE_FUZZ_CHECK(*lifetime > 0, "lifetime " << *lifetime);
    }
  }
  const FieldList vary = vary_values(res, copy_fields(req));
  for (size_t i = 0; i < vary.size(); ++i) {
    for (size_t j = i + 1; j < vary.size(); ++j) {
      TIDEGATE_FUZZ_CHECK(vary[i].first != vary[j].first,
                          "Vary names " << vary[i].first << " twice");
    }
  }
  (void)initial_age(res, 1'800'000'000);

  // The path a backend names.
  model::Sendfile config;
  config.directories = {"/srv/files"};
  config.mappings = {{"/p/", "/srv/files/sub"}};
  for (bool accel : {false, true}) {
    if (auto path = sendfile_path(config, accel, lines[10])) {
      TIDEGATE_FUZZ_CHECK(!path->empty() && path->front() == '/',
                          "not absolute: " << escape(*path));
      TIDEGATE_FUZZ_CHECK(path->find('\0') == std::string::npos, "NUL in " << escape(*path));
      const std::string framed = *path + "/";
      TIDEGATE_FUZZ_CHECK(
          framed.find("/../") == std::string::npos && framed.find("/./") == std::string::npos,
          "dot component in " << escape(*path));
      if (accel && lines[10].substr(0, 3) == "/p/") {
        TIDEGATE_FUZZ_CHECK(model::path_within(*path, "/srv/files/sub"),
                            escape(lines[10]) << " mapped outside: " << escape(*path));
      }
    }
  }
  return {};
}

}  // namespace tidegate::fuzz
