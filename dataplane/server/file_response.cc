#include "server/file_response.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "server/http_date.h"
#include "text/text.h"

namespace tidegate::dataplane::server {

FileHandle& FileHandle::operator=(FileHandle&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void FileHandle::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

constexpr size_t kMaxPath = 4096;

// Absolute, without NUL, "." or ".." components, not too long.
bool is_plain_absolute(std::string_view p) {
  if (p.empty() || p.front() != '/' || p.size() > kMaxPath) return false;
  if (p.find('\0') != std::string_view::npos) return false;
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    const std::string_view part = p.substr(start, end - start);
    if (part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// Calls `f(tag, weak)` for each entity tag of a list ("*" is given as the tag "*").
template <class F>
void for_each_etag(std::string_view list, F&& f) {
  while (!list.empty()) {
    list = text::trim_ows(list);
    if (!list.empty() && list.front() == ',') {
      list.remove_prefix(1);
      continue;
    }
    if (list.empty()) return;
    if (list.front() == '*') {
      f(std::string_view("*"), false);
      list.remove_prefix(1);
      continue;
    }
    bool weak = false;
    if (list.substr(0, 2) == "W/") {
      weak = true;
      list.remove_prefix(2);
    }
    if (list.empty() || list.front() != '"') return;  // malformed: stop reading
    const size_t close = list.find('"', 1);
    if (close == std::string_view::npos) return;
    f(list.substr(0, close + 1), weak);
    list.remove_prefix(close + 1);
  }
}

bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  out = n;
  return true;
}

}  // namespace

std::optional<std::string> sendfile_path(const model::Sendfile& config, bool accel_redirect,
                                         std::string_view value) {
  value = text::trim_ows(value);
  if (!accel_redirect) {
    if (!is_plain_absolute(value)) return std::nullopt;
    return std::string(value);
  }
  // A URI: the path part, percent-decoded.
  value = value.substr(0, value.find_first_of("?#"));
  std::string path;
  path.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '%' && i + 2 < value.size()) {
      const int hi = text::hex_value(value[i + 1]);
      const int lo = text::hex_value(value[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      path.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (value[i] == '%') {
      return std::nullopt;
    } else {
      path.push_back(value[i]);
    }
  }
  for (const auto& m : config.mappings) {
    if (path.compare(0, m.uri_prefix.size(), m.uri_prefix) == 0) {
      path = m.directory + "/" + path.substr(m.uri_prefix.size());
      break;
    }
  }
  if (!is_plain_absolute(path)) return std::nullopt;
  return path;
}

bool sendfile_allowed(const model::Sendfile& config, const std::vector<std::string>& roots) {
  return !roots.empty() && !config.directories.empty() &&
         std::all_of(config.directories.begin(), config.directories.end(), [&](const auto& d) {
           return !model::check_sendfile_directory(d) &&
                  std::any_of(roots.begin(), roots.end(),
                              [&](const auto& root) { return model::path_within(d, root); });
         });
}

std::optional<OpenedFile> open_within(const std::vector<std::string>& directories,
                                      const std::string& path, std::string* why) {
  const std::string* dir = nullptr;
  for (const auto& d : directories) {
    if (path.size() > d.size() + 1 && model::path_within(path, d)) {
      dir = &d;
      break;
    }
  }
  if (dir == nullptr) {
    *why = "not within the route's x-sendfile directories";
    return std::nullopt;
  }
  FileHandle dir_fd(::open(dir->c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) {
    *why = std::string("directory ") + *dir + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string relative = path.substr(dir->size() + 1);
  while (!relative.empty() && relative.front() == '/') relative.erase(0, 1);
  open_how how{};
  // O_NONBLOCK: a FIFO placed in the directory must not block the worker in open().
  how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, dir_fd.get(), relative.c_str(), &how, sizeof how);
  // ENOSYS: a kernel before 5.6; EPERM: a seccomp profile that refuses openat2.
  if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
    // Kernels before 5.6: resolve the path ourselves and check where it lands (a link changed
    // between the check and the open could still move it; openat2 has no such window).
    char real_dir[PATH_MAX];
    char real_file[PATH_MAX];
    if (::realpath(dir->c_str(), real_dir) == nullptr ||
        ::realpath(path.c_str(), real_file) == nullptr) {
      *why = std::strerror(errno);
      return std::nullopt;
    }
    if (!model::path_within(real_file, real_dir)) {
      errno = EXDEV;
    } else {
      fd = ::open(real_file, static_cast<int>(how.flags) | O_NOFOLLOW);
      // A link swapped in between the check and the open: where did it land?
      char landed[PATH_MAX];
      const std::string proc = "/proc/self/fd/" + std::to_string(fd);
      const ssize_t n = fd < 0 ? -1 : ::readlink(proc.c_str(), landed, sizeof landed - 1);
      if (fd >= 0 && (n <= 0 || !model::path_within(
                                    std::string_view(landed, static_cast<size_t>(n)), real_dir))) {
        ::close(static_cast<int>(fd));
        fd = -1;
        errno = EXDEV;
      }
    }
  }
  if (fd < 0) {
    *why = errno == EXDEV ? "leads out of its directory" : std::strerror(errno);
    return std::nullopt;
  }
  OpenedFile opened;
  opened.file = FileHandle(static_cast<int>(fd));
  struct stat st {};
  if (::fstat(opened.file.get(), &st) != 0) {
    *why = std::strerror(errno);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = "not a regular file";
    return std::nullopt;
  }
  // Reads block no worker on a regular file; clear O_NONBLOCK for sendfile(2)'s sake anyway.
  ::fcntl(opened.file.get(), F_SETFL, O_RDONLY);
  opened.size = static_cast<uint64_t>(st.st_size);
  opened.mtime = static_cast<int64_t>(st.st_mtim.tv_sec);
  return opened;
}

bool etag_list_matches(std::string_view list, std::string_view etag, bool strong) {
  if (etag.substr(0, 2) == "W/") {
    if (strong) return false;
    etag.remove_prefix(2);
  }
  bool match = false;
  for_each_etag(list, [&](std::string_view tag, bool weak) {
    match = match || tag == "*" || (tag == etag && !(strong && weak));
  });
  return match;
}

std::string file_etag(uint64_t size, int64_t mtime) {
  char out[48];
  const int n =
      std::snprintf(out, sizeof out, "\"%llx-%llx\"", static_cast<unsigned long long>(mtime),
                    static_cast<unsigned long long>(size));
  return std::string(out, static_cast<size_t>(n));
}

FilePlan plan_file_response(const FileRequest& request, uint64_t size, int64_t mtime,
                            std::string_view etag) {
  FilePlan plan;
  plan.length = size;
  // RFC 9110 section 13.2.2: If-Match, else If-Unmodified-Since; then If-None-Match, else
  // If-Modified-Since; then If-Range with Range.
  if (!request.if_match.empty()) {
    if (!etag_list_matches(request.if_match, etag, true)) return FilePlan{412, 0, 0};
  } else if (!request.if_unmodified_since.empty()) {
    if (auto since = parse_http_date(text::trim_ows(request.if_unmodified_since));
        since && mtime > *since) {
      return FilePlan{412, 0, 0};
    }
  }
  if (!request.if_none_match.empty()) {
    if (etag_list_matches(request.if_none_match, etag, false)) {
      return FilePlan{request.get_or_head ? 304u : 412u, 0, 0};
    }
  } else if (request.get_or_head && !request.if_modified_since.empty()) {
    if (auto since = parse_http_date(text::trim_ows(request.if_modified_since));
        since && mtime <= *since) {
      return FilePlan{304, 0, 0};
    }
  }
  if (!request.get || request.range.empty()) return plan;
  if (!request.if_range.empty()) {
    const std::string_view r = text::trim_ows(request.if_range);
    const bool fresh = r.front() == '"' ? r == etag : parse_http_date(r) == mtime;
    if (!fresh) return plan;  // the representation changed: the whole of it
  }
  std::string_view range = text::trim_ows(request.range);
  if (!text::iequals_ascii(range.substr(0, 6), "bytes="))
    return plan;  // an unknown unit is ignored
  range = text::trim_ows(range.substr(6));
  // Several ranges would need multipart/byteranges: the whole file is sent instead, which the
  // RFC allows (a server may ignore Range).
  if (range.find(',') != std::string_view::npos) return plan;
  const size_t dash = range.find('-');
  if (dash == std::string_view::npos) return plan;
  const std::string_view first = text::trim_ows(range.substr(0, dash));
  const std::string_view last = text::trim_ows(range.substr(dash + 1));
  uint64_t start = 0;
  uint64_t end = 0;
  if (first.empty()) {
    uint64_t suffix = 0;
    if (!parse_u64(last, suffix)) return plan;
    if (suffix == 0 || size == 0) return FilePlan{416, 0, 0};
    start = suffix >= size ? 0 : size - suffix;
    end = size - 1;
  } else {
    if (!parse_u64(first, start)) return plan;
    if (last.empty()) {
      end = size == 0 ? 0 : size - 1;
    } else if (!parse_u64(last, end) || end < start) {
      return plan;  // invalid: ignored
    }
    if (start >= size) return FilePlan{416, 0, 0};
    if (end >= size) end = size - 1;
  }
  return FilePlan{206, start, end - start + 1};
}

std::string_view content_type_for(std::string_view path) {
  struct Type {
    std::string_view extension;
    std::string_view type;
  };
  // The common part of nginx's mime.types.
  static constexpr std::array<Type, 40> kTypes = {{
      {"html", "text/html"},
      {"htm", "text/html"},
      {"css", "text/css"},
      {"js", "application/javascript"},
      {"mjs", "application/javascript"},
      {"json", "application/json"},
      {"map", "application/json"},
      {"xml", "text/xml"},
      {"txt", "text/plain"},
      {"csv", "text/csv"},
      {"md", "text/markdown"},
      {"png", "image/png"},
      {"jpg", "image/jpeg"},
      {"jpeg", "image/jpeg"},
      {"gif", "image/gif"},
      {"webp", "image/webp"},
      {"avif", "image/avif"},
      {"svg", "image/svg+xml"},
      {"ico", "image/x-icon"},
      {"bmp", "image/bmp"},
      {"tif", "image/tiff"},
      {"tiff", "image/tiff"},
      {"woff", "font/woff"},
      {"woff2", "font/woff2"},
      {"ttf", "font/ttf"},
      {"otf", "font/otf"},
      {"pdf", "application/pdf"},
      {"zip", "application/zip"},
      {"gz", "application/gzip"},
      {"tar", "application/x-tar"},
      {"wasm", "application/wasm"},
      {"mp3", "audio/mpeg"},
      {"ogg", "audio/ogg"},
      {"wav", "audio/wav"},
      {"mp4", "video/mp4"},
      {"webm", "video/webm"},
      {"mov", "video/quicktime"},
      {"doc", "application/msword"},
      {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
      {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
  }};
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const size_t dot = name.rfind('.');
  if (dot != std::string_view::npos && dot + 1 < name.size()) {
    std::string ext(name.substr(dot + 1));
    for (char& c : ext) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    for (const auto& t : kTypes) {
      if (t.extension == ext) return t.type;
    }
  }
  return "application/octet-stream";
}

}  // namespace tidegate::dataplane::server
