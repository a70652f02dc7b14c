// X-Sendfile / X-Accel-Redirect (docs/annotations.md, "X-Sendfile"): the exchange's part.
// server/file_response.h opens the file and plans the answer; here the backend's head becomes
// the file's and the body goes out part by part.

#include <unistd.h>

#include <algorithm>

#include "log/log.h"
#include "server/exchange.h"
#include "server/http_date.h"
#include "server/worker.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

namespace {

// Fields of the backend's head that describe its own body or the hand-over, not the file.
constexpr std::string_view kBackendBodyFields[] = {"X-Accel-Redirect",
                                                   "X-Sendfile",
                                                   "X-Accel-Buffering",
                                                   "X-Accel-Charset",
                                                   "X-Accel-Expires",
                                                   "X-Accel-Limit-Rate",
                                                   "Content-Length",
                                                   "Content-Encoding",
                                                   "Content-Range",
                                                   "Accept-Ranges",
                                                   "ETag",
                                                   "Last-Modified"};

std::string_view field(const RequestMessage& req, http::field name) {
  auto it = req.find(name);
  return it == req.end() ? std::string_view() : std::string_view(it->value());
}

}  // namespace

bool Exchange::serve_file(ResponseMessage& res) {
  bool accel = true;
  auto it = res.find("X-Accel-Redirect");
  if (it == res.end()) {
    accel = false;
    it = res.find("X-Sendfile");
    if (it == res.end()) return false;
  }
  end_cache_fill();  // a file is never stored: waiters for this key go on now
  const model::Sendfile& config = *policy().sendfile;
  const std::string named(it->value());
  // The backend's own body (usually empty) is not sent: its connection is kept only when the
  // body has already ended.
  if (!up_.response_done()) up_.drop();
  upstream_endpoint_ = up_.endpoint();
  end_attempt(false);
  std::string why = "names no usable path";
  std::optional<OpenedFile> file;
  const auto path = sendfile_path(config, accel, named);
  if (path) file = open_within(config.directories, *path, &why);
  const bool close = !downstream_.request_complete();
  if (!file) {
    TG_WARN("http", (accel ? "X-Accel-Redirect" : "X-Sendfile")
                        << " \"" << named.substr(0, 256) << "\" from " << upstream_endpoint_ << ": "
                        << why << "; answered 404");
    respond(404, "not found\n", close);
    return true;
  }
  const std::string etag = file_etag(file->size, file->mtime);
  auto& req = downstream_.request();
  FileRequest conditions;
  conditions.get = req.method() == http::verb::get;
  conditions.get_or_head = conditions.get || req.method() == http::verb::head;
  conditions.if_match = field(req, http::field::if_match);
  conditions.if_unmodified_since = field(req, http::field::if_unmodified_since);
  conditions.if_none_match = field(req, http::field::if_none_match);
  conditions.if_modified_since = field(req, http::field::if_modified_since);
  conditions.if_range = field(req, http::field::if_range);
  conditions.range = field(req, http::field::range);
  const FilePlan plan = plan_file_response(conditions, file->size, file->mtime, etag);
  if (plan.status == 412) {
    respond(412, "precondition failed\n", close);
    return true;
  }
  if (plan.status == 416) {
    local_fields_.emplace_back("Content-Range", "bytes */" + std::to_string(file->size));
    respond(416, "range not satisfiable\n", close);
    return true;
  }
  // The backend's head, minus what described its own body, becomes the file's: its
  // Content-Type, Content-Disposition, Cache-Control and cookies stay.
  remove_hop_by_hop(res);
  for (std::string_view name : kBackendBodyFields) res.erase(name);
  res.erase(http::field::transfer_encoding);
  res.result(plan.status);
  if (res.find(http::field::content_type) == res.end()) {
    res.set(http::field::content_type, content_type_for(*path));
  }
  res.set(http::field::last_modified, format_http_date(file->mtime));
  res.set(http::field::etag, etag);
  res.set(http::field::accept_ranges, "bytes");
  if (plan.status == 206) {
    res.set(http::field::content_range, "bytes " + std::to_string(plan.offset) + "-" +
                                            std::to_string(plan.offset + plan.length - 1) + "/" +
                                            std::to_string(file->size));
  }
  if (plan.status != 304) res.content_length(plan.length);
  add_response_fields(res, plan.status);
  status_sent_ = plan.status;
  if (observing()) upstream_answered_ = std::chrono::steady_clock::now();
  ResponseBody body;
  body.expected = !head_request_ && plan.status != 304;
  response_started_ = true;
  downstream_.send_response_head(res, body);
  if (!body.expected) return true;  // completes with on_response_head_sent()
  file_ = std::move(file->file);
  file_offset_ = plan.offset;
  file_left_ = plan.length;
  send_file_part();
  return true;
}

void Exchange::send_file_part() {
  if (file_left_ == 0) {
    last_sent_ = true;
    downstream_.send_response_body(nullptr, 0, true);
    return;
  }
  if (downstream_.can_send_file()) {
    const auto n = static_cast<std::size_t>(std::min<uint64_t>(file_left_, kFilePartBytes));
    const uint64_t offset = file_offset_;
    file_offset_ += n;
    file_left_ -= n;
    last_sent_ = file_left_ == 0;
    downstream_.send_response_file(file_.get(), offset, n, last_sent_);
    return;
  }
  // TLS and HTTP/2 frame what they send: the file goes through the relay buffer.
  const auto want = static_cast<std::size_t>(std::min<uint64_t>(file_left_, relay_buffer_.size()));
  const ssize_t n =
      ::pread(file_.get(), relay_buffer_.data(), want, static_cast<off_t>(file_offset_));
  if (n <= 0) {
    // Truncated since it was opened, or unreadable: the status line is out, only closing tells.
    TG_WARN("http", "X-Sendfile: the file ended early or failed to read; closing the client");
    file_.reset();
    downstream_.close();
    return;
  }
  file_offset_ += static_cast<uint64_t>(n);
  file_left_ -= static_cast<uint64_t>(n);
  last_sent_ = file_left_ == 0;
  downstream_.send_response_body(relay_buffer_.data(), static_cast<std::size_t>(n), last_sent_);
}

}  // namespace tidegate::dataplane::server
