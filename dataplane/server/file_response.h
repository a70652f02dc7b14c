#pragma once
// Files the data plane serves itself: X-Sendfile / X-Accel-Redirect (docs/annotations.md,
// "X-Sendfile"). A backend answers with a field naming a file; the exchange
// (server/exchange_sendfile.cc) opens it here, within the route's directories only, and answers
// the request with it: conditional requests and a single byte range as RFC 9110 says, the
// validators nginx gives a static file.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/sendfile.h"

namespace tidegate::dataplane::server {

// An open file descriptor, closed with the object.
class FileHandle {
 public:
  FileHandle() = default;
  explicit FileHandle(int fd) : fd_(fd) {}
  FileHandle(FileHandle&& other) noexcept : fd_(other.release()) {}
  FileHandle& operator=(FileHandle&& other) noexcept;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  ~FileHandle() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// The absolute path a backend's field names, or nullopt when it names none the route may serve.
// X-Sendfile carries a path as it is; X-Accel-Redirect a URI: its path part percent-decoded,
// then placed under the directory of the longest x-accel-mapping prefix it starts with (the
// mappings come longest first), else read as a path. Empty values, NUL bytes, "." or ".."
// components and paths longer than 4096 bytes name nothing.
std::optional<std::string> sendfile_path(const model::Sendfile& config, bool accel_redirect,
                                         std::string_view value);

// The route's X-Sendfile takes effect: every one of its directories lies within one of the
// operator's roots (--x-sendfile-roots; none: never).
bool sendfile_allowed(const model::Sendfile& config, const std::vector<std::string>& roots);

struct OpenedFile {
  FileHandle file;
  uint64_t size = 0;
  int64_t mtime = 0;  // seconds since the epoch
};
// Opens `path` for reading when it lies within one of `directories`: relative to that directory
// with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so that no ".." and no symbolic link
// leads out of it (the kernel checks every step). Regular files only. nullopt otherwise, with
// the reason in *why (for the log).
std::optional<OpenedFile> open_within(const std::vector<std::string>& directories,
                                      const std::string& path, std::string* why);

// nginx's strong entity tag of a static file: "<mtime hex>-<size hex>".
std::string file_etag(uint64_t size, int64_t mtime);

// Whether an If-Match / If-None-Match list names `etag` ("*" names any): strong comparison
// (weak tags never match) or weak (W/ ignored on both sides).
bool etag_list_matches(std::string_view list, std::string_view etag, bool strong);

// What a request gets of a file (RFC 9110 sections 13.2.2 and 14).
struct FilePlan {
  unsigned status = 200;  // 200, 206 (one range), 304, 412 or 416
  uint64_t offset = 0;    // of the bytes to send (206)
  uint64_t length = 0;    // bytes to send (200, 206)
};
struct FileRequest {
  bool get_or_head = true;  // other methods get no 304 and no range
  bool get = true;          // Range applies to GET only
  std::string_view if_match, if_unmodified_since, if_none_match, if_modified_since, if_range, range;
};
FilePlan plan_file_response(const FileRequest& request, uint64_t size, int64_t mtime,
                            std::string_view etag);

// A Content-Type for a file name by its extension (lower case), application/octet-stream when
// the extension is unknown.
std::string_view content_type_for(std::string_view path);

}  // namespace tidegate::dataplane::server
