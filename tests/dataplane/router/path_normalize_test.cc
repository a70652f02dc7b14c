// Table tests for path normalization (router/path_normalize.h), and its properties: the output
// is normal (idempotent, no dot segments) for every input of a generated set.

#include "router/path_normalize.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tidegate::dataplane::router {
namespace {

struct Case {
  std::string in;
  std::string want = {};  // when error == kNone
  PathError error = PathError::kNone;
};

constexpr PathOptions kDefault{};
constexpr PathOptions kMerge{EscapedSlashes::kKeep, true};
constexpr PathOptions kReject{EscapedSlashes::kReject, false};
constexpr PathOptions kDecode{EscapedSlashes::kDecode, false};
constexpr PathOptions kDecodeMerge{EscapedSlashes::kDecode, true};

void run_table(const PathOptions& options, const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    std::string out;
    PathError e = normalize_path(c.in, options, out);
    EXPECT_EQ(e, c.error) << c.in << ": " << to_string(e);
    if (c.error == PathError::kNone && e == PathError::kNone) {
      EXPECT_EQ(out, c.want) << c.in;
      // The quick scan never passes a path that normalization would change, and without a
      // '%' (which it leaves to normalization) it passes every path that stays the same.
      if (is_normal_path(c.in, options)) {
        EXPECT_EQ(c.want, c.in);
      }
      if (c.in.find('%') == std::string::npos) {
        EXPECT_EQ(is_normal_path(c.in, options), c.in == c.want) << c.in;
      }
    }
  }
}

TEST(PathNormalizeTest, DotSegmentsPerRfc3986) {
  run_table(kDefault, {
                          {"/", "/"},
                          {"/a/b/c", "/a/b/c"},
                          {"/a/./b", "/a/b"},
                          {"/a/../b", "/b"},
                          {"/public/../admin", "/admin"},
                          {"/a/b/..", "/a/"},
                          {"/a/b/.", "/a/b/"},
                          {"/a/b/../", "/a/"},
                          {"/.", "/"},
                          {"/./", "/"},
                          {"/a/..", "/"},
                          {"/a/.././", "/"},
                          {"/a//../b", "/a/b"},  // the empty segment is the one removed
                          {"//..", "/"},
                          {"/a/b/c/./../../g", "/a/g"},  // RFC 3986 section 5.4.2
                          {"/mid/content=5/../6", "/mid/6"},
                          {"/...", "/..."},
                          {"/..a/.b/a..", "/..a/.b/a.."},
                          {"/a/.../b", "/a/.../b"},
                          {"/..", "", PathError::kAboveRoot},
                          {"/../a", "", PathError::kAboveRoot},
                          {"/a/../..", "", PathError::kAboveRoot},
                          {"/a/../../b", "", PathError::kAboveRoot},
                          {"/./..", "", PathError::kAboveRoot},
                          {"", "", PathError::kNotAbsolute},
                          {"a/b", "", PathError::kNotAbsolute},
                          {"*", "", PathError::kNotAbsolute},
                      });
}

TEST(PathNormalizeTest, PercentEncoding) {
  run_table(kDefault, {
                          {"/%61%62c", "/abc"},        // unreserved letters decoded
                          {"/%7e%2D%5f%2e", "/~-_."},  // - . _ ~ decoded
                          {"/a/%2e%2E/b", "/b"},       // encoded dot segments resolved
                          {"/a/%2e/b", "/a/b"},
                          {"/%2e%2e", "", PathError::kAboveRoot},
                          {"/a/.%2e/.%2E", "", PathError::kAboveRoot},
                          {"/%20x", "/%20x"},              // reserved and others kept
                          {"/%3a%3F%23", "/%3A%3F%23"},    // hex upper-cased
                          {"/%25", "/%25"},                // '%' itself stays encoded
                          {"/%252e%252e", "/%252e%252e"},  // double encoding is not decoded
                          {"/%c3%a9", "/%C3%A9"},
                          {"/%", "", PathError::kBadPercent},
                          {"/%4", "", PathError::kBadPercent},
                          {"/%zz", "", PathError::kBadPercent},
                          {"/%4g", "", PathError::kBadPercent},
                          {"/a%", "", PathError::kBadPercent},
                      });
}

TEST(PathNormalizeTest, EscapedSlashesAndBackslashes) {
  // keep (default): not separators, so ".." next to them is a plain segment.
  run_table(kDefault, {
                          {"/a%2fb", "/a%2Fb"},
                          {"/a%2Fb", "/a%2Fb"},
                          {"/a%5cb", "/a%5Cb"},
                          {"/a\\b", "/a\\b"},
                          {"/a/..%2f..%2fadmin", "/a/..%2F..%2Fadmin"},
                          {"/a/..\\admin", "/a/..\\admin"},
                      });
  run_table(kReject, {
                         {"/a/b", "/a/b"},
                         {"/a%2fb", "", PathError::kEscapedSlash},
                         {"/a%5Cb", "", PathError::kEscapedSlash},
                         {"/a\\b", "", PathError::kEscapedSlash},
                         {"/a%41", "/aA"},
                     });
  run_table(kDecode, {
                         {"/a%2fb", "/a/b"},
                         {"/a%5cb", "/a/b"},
                         {"/a\\b", "/a/b"},
                         {"/a/..%2f..%2fb", "", PathError::kAboveRoot},
                         {"/x/y/..%2Fz", "/x/z"},
                         {"/a%2f%2fb", "/a//b"},
                     });
  run_table(kDecodeMerge, {
                              {"/a%2f%2fb", "/a/b"},
                              {"/a\\\\b", "/a/b"},
                          });
}

TEST(PathNormalizeTest, MergeSlashes) {
  run_table(kDefault, {
                          {"//a", "//a"},
                          {"/a//b", "/a//b"},
                      });
  run_table(kMerge, {
                        {"//", "/"},
                        {"//a", "/a"},
                        {"/a//b///c", "/a/b/c"},
                        {"/a//", "/a/"},
                        {"/a//..//b", "/b"},
                        {"///..", "", PathError::kAboveRoot},
                    });
}

TEST(PathNormalizeTest, ParsesTheFlag) {
  EscapedSlashes e = EscapedSlashes::kKeep;
  EXPECT_TRUE(parse_escaped_slashes("reject", &e));
  EXPECT_EQ(e, EscapedSlashes::kReject);
  EXPECT_TRUE(parse_escaped_slashes("decode", &e));
  EXPECT_EQ(e, EscapedSlashes::kDecode);
  EXPECT_TRUE(parse_escaped_slashes("keep", &e));
  EXPECT_EQ(e, EscapedSlashes::kKeep);
  EXPECT_FALSE(parse_escaped_slashes("Keep", &e));
  EXPECT_FALSE(parse_escaped_slashes("", &e));
}

bool has_dot_segment(const std::string& path) {
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start + 1);
    if (end == std::string::npos) end = path.size();
    std::string segment = path.substr(start + 1, end - start - 1);
    if (segment == "." || segment == "..") return true;
    start = end;
  }
  return false;
}

// Every path over a small alphabet that matters (separators, dots, escapes), up to 5 symbols,
// under every option: normalize is idempotent, its output is normal and has no dot segment.
TEST(PathNormalizeTest, PropertyIdempotentAndWithoutDotSegments) {
  const std::vector<std::string> alphabet = {"/", ".", "a", "%2e", "%2F", "\\", "%5c", "%41"};
  const std::vector<PathOptions> all = {kDefault, kMerge, kReject, kDecode, kDecodeMerge};
  size_t checked = 0;
  std::vector<std::string> paths = {"/"};
  for (int len = 0; len < 5; ++len) {
    std::vector<std::string> next;
    for (const auto& p : paths) {
      for (const auto& s : alphabet) next.push_back(p + s);
    }
    for (const auto& p : next) {
      for (const auto& options : all) {
        std::string once, twice;
        if (normalize_path(p, options, once) != PathError::kNone) continue;
        ++checked;
        ASSERT_EQ(normalize_path(once, options, twice), PathError::kNone) << p << " -> " << once;
        ASSERT_EQ(twice, once) << p;
        ASSERT_TRUE(is_normal_path(once, options) || once.find('%') != std::string::npos)
            << p << " -> " << once;
        ASSERT_FALSE(has_dot_segment(once)) << p << " -> " << once;
        ASSERT_EQ(once.front(), '/') << p;
      }
    }
    paths = std::move(next);
  }
  EXPECT_GT(checked, 50000u);
}

}  // namespace
}  // namespace tidegate::dataplane::router
