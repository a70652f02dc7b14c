// X-Sendfile's file side (server/file_response.h, server/http_date.h): the path a backend's
// field names, opening within the route's directories on a real directory tree (with links and
// ".." that try to leave it), the conditional and range table, HTTP dates.
#include "server/file_response.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "server/http_date.h"

namespace tidegate::dataplane::server {
namespace {

namespace fs = std::filesystem;

TEST(SendfilePath, XSendfileIsAPathAccelRedirectAMappedUri) {
  model::Sendfile config;
  config.directories = {"/srv/files"};
  config.mappings = {{"/p/private/", "/srv/files/secret"}, {"/p/", "/srv/files"}};
  struct Case {
    bool accel;
    std::string_view value;
    std::optional<std::string> want;
  };
  const Case cases[] = {
      {false, "/srv/files/a.pdf", "/srv/files/a.pdf"},
      {false, " /srv/files/a b.pdf ", "/srv/files/a b.pdf"},
      {false, "/srv/files/%41.pdf", "/srv/files/%41.pdf"},  // a path: no decoding
      {false, "relative.pdf", std::nullopt},
      {false, "", std::nullopt},
      {false, "/srv/files/../../etc/passwd", std::nullopt},
      {false, "/srv/files/./a", std::nullopt},
      {true, "/p/a.pdf", "/srv/files/a.pdf"},
      {true, "/p/private/k.pem", "/srv/files/secret/k.pem"},  // the longest prefix
      {true, "/p/%41%20b.pdf?download=1", "/srv/files/A b.pdf"},
      {true, "/p/%2e%2e/%2e%2e/etc/passwd", std::nullopt},  // decoded, then refused
      {true, "/p/a%00.pdf", std::nullopt},
      {true, "/p/a%zz", std::nullopt},
      {true, "/p/a%4", std::nullopt},
      {true, "/srv/files/x", "/srv/files/x"},  // no mapping: a path
      {true, "/other/x", "/other/x"},          // open_within refuses it later
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.value));
    EXPECT_EQ(sendfile_path(config, c.accel, c.value), c.want);
  }
}

class OpenWithin : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tidegate-sendfile-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    fs::create_directories(root_ / "allowed/sub");
    fs::create_directories(root_ / "outside");
    write(root_ / "allowed/a.txt", "hello");
    write(root_ / "allowed/sub/b.txt", "inner");
    write(root_ / "outside/secret.txt", "secret");
    fs::create_symlink(root_ / "outside/secret.txt", root_ / "allowed/abs-link");
    fs::create_symlink("../outside/secret.txt", root_ / "allowed/rel-link");
    fs::create_symlink("sub/b.txt", root_ / "allowed/inner-link");
    fs::create_directory_symlink(root_ / "outside", root_ / "allowed/dir-link");
    ASSERT_EQ(::mkfifo((root_ / "allowed/fifo").c_str(), 0600), 0);
    dirs_ = {(root_ / "allowed").string()};
  }
  void TearDown() override { fs::remove_all(root_); }
  static void write(const fs::path& p, std::string_view text) { std::ofstream(p) << text; }
  std::optional<OpenedFile> open(const std::string& relative, std::string* why) {
    return open_within(dirs_, (root_ / "allowed").string() + relative, why);
  }
  fs::path root_;
  std::vector<std::string> dirs_;
};

TEST_F(OpenWithin, OpensRegularFilesInsideAndNothingElse) {
  std::string why;
  auto a = open("/a.txt", &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->size, 5u);
  char buf[8] = {};
  EXPECT_EQ(::pread(a->file.get(), buf, sizeof buf, 0), 5);
  EXPECT_EQ(std::string(buf), "hello");
  EXPECT_TRUE(open("/sub/b.txt", &why)) << why;
  EXPECT_TRUE(open("/inner-link", &why)) << why;  // a link that stays inside is followed

  struct Refused {
    std::string relative;
    std::string why_part;
  };
  const Refused refused[] = {
      {"/abs-link", "out of its directory"},             // an absolute link out
      {"/rel-link", "out of its directory"},             // a relative link out
      {"/dir-link/secret.txt", "out of its directory"},  // through a linked directory
      {"/missing.txt", "No such file"},
      {"/sub", "not a regular file"},
      {"/fifo", "not a regular file"},  // and open() did not block on it
  };
  for (const auto& r : refused) {
    SCOPED_TRACE(r.relative);
    why.clear();
    EXPECT_FALSE(open(r.relative, &why));
    EXPECT_NE(why.find(r.why_part), std::string::npos) << why;
  }
  // Outside every directory, or the directory itself.
  why.clear();
  EXPECT_FALSE(open_within(dirs_, (root_ / "outside/secret.txt").string(), &why));
  EXPECT_NE(why.find("not within"), std::string::npos);
  EXPECT_FALSE(open_within(dirs_, dirs_[0], &why));
  // A sibling whose name starts like the directory is not inside it.
  fs::create_directories(root_ / "allowed-not");
  write(root_ / "allowed-not/x", "x");
  EXPECT_FALSE(open_within(dirs_, (root_ / "allowed-not/x").string(), &why));
}

TEST(FilePlan, ConditionalsAndRanges) {
  const uint64_t size = 1000;
  const int64_t mtime = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
  const std::string etag = file_etag(size, mtime);
  EXPECT_EQ(etag, "\"2ebc98a1-3e8\"");
  const std::string date = "Sun, 06 Nov 1994 08:49:37 GMT";
  const std::string before = "Sun, 06 Nov 1994 08:49:36 GMT";
  const std::string weak_list = "\"x\", W/" + etag;  // FileRequest holds views
  const std::string weak = "W/" + etag;
  struct Case {
    std::string name;
    FileRequest request;
    FilePlan want;
  };
  auto get = [](auto&& set) {
    FileRequest r;
    set(r);
    return r;
  };
  const Case cases[] = {
      {"plain", {}, {200, 0, 1000}},
      {"range", get([](FileRequest& r) { r.range = "bytes=0-99"; }), {206, 0, 100}},
      {"open range", get([](FileRequest& r) { r.range = "bytes=900-"; }), {206, 900, 100}},
      {"suffix", get([](FileRequest& r) { r.range = "bytes=-10"; }), {206, 990, 10}},
      {"suffix longer than the file",
       get([](FileRequest& r) { r.range = "bytes=-5000"; }),
       {206, 0, 1000}},
      {"end past the file is cut",
       get([](FileRequest& r) { r.range = "bytes=500-5000"; }),
       {206, 500, 500}},
      {"unit in capitals", get([](FileRequest& r) { r.range = "Bytes=1-1"; }), {206, 1, 1}},
      {"unsatisfiable", get([](FileRequest& r) { r.range = "bytes=1000-"; }), {416, 0, 0}},
      {"zero suffix", get([](FileRequest& r) { r.range = "bytes=-0"; }), {416, 0, 0}},
      {"several ranges: the whole file",
       get([](FileRequest& r) { r.range = "bytes=0-1,5-6"; }),
       {200, 0, 1000}},
      {"invalid: ignored", get([](FileRequest& r) { r.range = "bytes=9-1"; }), {200, 0, 1000}},
      {"other unit: ignored", get([](FileRequest& r) { r.range = "items=0-1"; }), {200, 0, 1000}},
      {"range on HEAD: ignored",
       get([](FileRequest& r) {
         r.get = false;
         r.range = "bytes=0-1";
       }),
       {200, 0, 1000}},
      {"If-None-Match hit", get([&](FileRequest& r) { r.if_none_match = etag; }), {304, 0, 0}},
      {"If-None-Match weak hit",
       get([&](FileRequest& r) { r.if_none_match = weak_list; }),
       {304, 0, 0}},
      {"If-None-Match star", get([](FileRequest& r) { r.if_none_match = "*"; }), {304, 0, 0}},
      {"If-None-Match miss beats If-Modified-Since",
       get([&](FileRequest& r) {
         r.if_none_match = "\"other\"";
         r.if_modified_since = date;
       }),
       {200, 0, 1000}},
      {"If-Modified-Since not modified",
       get([&](FileRequest& r) { r.if_modified_since = date; }),
       {304, 0, 0}},
      {"If-Modified-Since modified",
       get([&](FileRequest& r) { r.if_modified_since = before; }),
       {200, 0, 1000}},
      {"If-Modified-Since unreadable: ignored",
       get([](FileRequest& r) { r.if_modified_since = "yesterday"; }),
       {200, 0, 1000}},
      {"If-None-Match on POST: 412",
       get([&](FileRequest& r) {
         r.get = r.get_or_head = false;
         r.if_none_match = etag;
       }),
       {412, 0, 0}},
      {"If-Match miss", get([](FileRequest& r) { r.if_match = "\"other\""; }), {412, 0, 0}},
      {"If-Match weak never matches", get([&](FileRequest& r) { r.if_match = weak; }), {412, 0, 0}},
      {"If-Match hit with range",
       get([&](FileRequest& r) {
         r.if_match = etag;
         r.range = "bytes=0-0";
       }),
       {206, 0, 1}},
      {"If-Unmodified-Since passed",
       get([&](FileRequest& r) { r.if_unmodified_since = before; }),
       {412, 0, 0}},
      {"If-Range etag fresh",
       get([&](FileRequest& r) {
         r.if_range = etag;
         r.range = "bytes=0-0";
       }),
       {206, 0, 1}},
      {"If-Range etag stale: the whole file",
       get([](FileRequest& r) {
         r.if_range = "\"old\"";
         r.range = "bytes=0-0";
       }),
       {200, 0, 1000}},
      {"If-Range date exact",
       get([&](FileRequest& r) {
         r.if_range = date;
         r.range = "bytes=0-0";
       }),
       {206, 0, 1}},
      {"If-Range date other",
       get([&](FileRequest& r) {
         r.if_range = before;
         r.range = "bytes=0-0";
       }),
       {200, 0, 1000}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const FilePlan got = plan_file_response(c.request, size, mtime, etag);
    EXPECT_EQ(got.status, c.want.status);
    EXPECT_EQ(got.offset, c.want.offset);
    EXPECT_EQ(got.length, c.want.length);
  }
  // An empty file: any range is unsatisfiable.
  FileRequest r;
  r.range = "bytes=0-";
  EXPECT_EQ(plan_file_response(r, 0, mtime, file_etag(0, mtime)).status, 416u);
}

TEST(HttpDate, ThreeFormsAndRoundTrip) {
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), 784111777);
  EXPECT_EQ(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
  EXPECT_EQ(parse_http_date("Tue, 29 Feb 2028 23:59:59 GMT"), 1835481599);
  for (std::string_view bad : {"", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC",
                               "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
                               "Sun, 06 Nov 1994 25:00:00 GMT", "1994-11-06",
                               "Sun, 06 Nov 1994 08:49:37 GMTx", "Sun,", "Sun, ", "Sun", ","}) {
    EXPECT_FALSE(parse_http_date(bad)) << bad;
  }
  for (int64_t t : {int64_t{0}, int64_t{784111777}, int64_t{1835481599}, int64_t{4102444800}}) {
    EXPECT_EQ(parse_http_date(format_http_date(t)), t) << t;
  }
  EXPECT_EQ(format_http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
}

TEST(SendfileAllowed, OnlyWithinTheOperatorsRoots) {
  model::Sendfile config;
  config.directories = {"/srv/app/storage", "/srv/media"};
  EXPECT_FALSE(sendfile_allowed(config, {}));  // no roots: off
  EXPECT_TRUE(sendfile_allowed(config, {"/srv"}));
  EXPECT_FALSE(sendfile_allowed(config, {"/srv/app"}));  // /srv/media is outside
  EXPECT_TRUE(sendfile_allowed(config, {"/srv/app", "/srv/media"}));
  config.directories = {"/var/run/secrets/kubernetes.io/serviceaccount"};
  EXPECT_FALSE(sendfile_allowed(config, {"/var"}));  // never, whatever the roots
  config.directories = {"/proc/self"};
  EXPECT_FALSE(sendfile_allowed(config, {"/proc"}));
}

TEST(ContentType, ByExtension) {
  EXPECT_EQ(content_type_for("/srv/a/report.PDF"), "application/pdf");
  EXPECT_EQ(content_type_for("/srv/a/app.js"), "application/javascript");
  EXPECT_EQ(content_type_for("/srv/a.d/README"), "application/octet-stream");
  EXPECT_EQ(content_type_for("/srv/a/archive."), "application/octet-stream");
}

}  // namespace
}  // namespace tidegate::dataplane::server
