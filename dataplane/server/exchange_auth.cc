// External authentication (auth-url): the exchange asks the authentication service before the
// backend, as ingress-nginx's auth_request does (docs/annotations.md, "External
// authentication"). The service gets a GET (or auth-method) with the original request's
// headers, no body, and X-Original-URL, X-Original-Method, X-Sent-From, X-Real-IP,
// X-Forwarded-For and X-Auth-Request-Redirect. 2xx: the request goes on, with the listed
// auth-response-headers copied in. 401: 401 (the service's WWW-Authenticate) or, with
// auth-signin, a 302 to the sign-in page. 403: 403. Anything else, no answer, or no endpoint:
// 500/503, counted (tidegate_external_auth_errors_total) and never let through.

#include <algorithm>

#include "log/log.h"
#include "server/exchange.h"
#include "server/worker.h"
#include "text/text.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

namespace {
// Of an authentication service's answer, at most this much body is read (and dropped) so that
// the connection can serve again; a longer body closes it instead.
constexpr std::size_t kMaxAuthBodyBytes = 64 * 1024;
// Attempts on other endpoints after a failure to connect, the first included.
constexpr unsigned kMaxAuthAttempts = 3;
}  // namespace

TemplateRequest Exchange::template_request() const {
  const auto& req = downstream_.request();
  TemplateRequest t;
  t.https = client_https_;
  t.host_header = req[http::field::host];
  t.target = req.target();
  t.method = req.method_string();
  t.remote_addr = downstream_.peer_address();
  t.fields = &static_cast<const Fields&>(req);
  return t;
}

void Exchange::start_external_auth() {
  const model::ExternalAuth& auth = *route_->policy->external_auth;
  const CompiledRoute* compiled = compiled_route();
  auth_ = compiled != nullptr ? compiled->external_auth.get() : nullptr;
  auth_upstream_ = auth.upstream.empty() ? nullptr : snapshot_->upstream(auth.upstream);
  if (auth_ == nullptr || !auth_->usable || auth_upstream_ == nullptr) {
    auth_error(503, "authentication is not configured\n");
    return;
  }
  auto& req = downstream_.request();
  const TemplateRequest t = template_request();
  auth_cache_key_.clear();
  if (auth_->cache) {
    auth_cache_key_ = expand_template(auth_->cache_key, t);
    if (const AuthAnswer* hit =
            auth_->cache->find(worker_.id(), auth_cache_key_, std::chrono::steady_clock::now())) {
      TG_DEBUG("http", "external authentication answered from the cache: " << hit->status);
      const AuthAnswer answer = *hit;
      auth_cache_key_.clear();  // nothing to store
      apply_auth_answer(answer);
      return;
    }
  }
  if (auth_upstream_->endpoints.empty()) {
    auth_error(503, "authentication service unavailable\n");
    return;
  }
  // The same X-Request-ID for the service and the backend.
  ensure_request_id(req, worker_);
  auto& a = auth_request_.emplace(std::piecewise_construct, std::make_tuple(),
                                  std::make_tuple(FieldsAllocator(&fields_arena_)));
  a.method_string(auth.method.empty() ? std::string_view("GET") : std::string_view(auth.method));
  a.target(expand_template(auth_->target, t));
  a.version(11);
  for (const auto& field : static_cast<const Fields&>(req)) {
    switch (field.name()) {
      case http::field::host:
      case http::field::content_length:
      case http::field::transfer_encoding:
      case http::field::expect:
        continue;
      default:
        a.insert(field.name_string(), field.value());
    }
  }
  remove_hop_by_hop(a);
  a.set(http::field::host, auth_->authority);
  std::string original = client_https_ ? "https://" : "http://";
  original += t.host_header;
  original += t.target;
  a.set("X-Original-URL", original);
  a.set("X-Original-Method", t.method);
  a.set("X-Sent-From", "tidegate");
  add_forwarded_headers(a, downstream_.peer_address(), client_https_ ? "https" : "http");
  if (client_ip_) a.set("X-Real-IP", client_ip_->to_string());
  a.set("X-Auth-Request-Redirect", auth_->request_redirect.empty()
                                       ? std::string(t.target)
                                       : expand_template(auth_->request_redirect, t));
  const auto verb = a.method();
  if (verb == http::verb::post || verb == http::verb::put || verb == http::verb::patch) {
    a.set(http::field::content_length, "0");
  }
  a.keep_alive(true);
  auth_balancer_ = &auth_upstream_->balancer->worker(worker_.id());
  auth_tried_ = {};
  auth_attempts_ = 0;
  balancer::PickContext ctx;
  ctx.tried = &auth_tried_;
  auth_connect(auth_balancer_->pick(ctx));
}

void Exchange::auth_connect(uint32_t index) {
  if (index >= auth_upstream_->endpoints.size()) {
    auth_error(503, "authentication service unavailable\n");
    return;
  }
  ++auth_attempts_;
  auth_endpoint_ = index;
  auth_tried_.add(index);
  auth_balancer_->on_start(index);
  auth_attempt_open_ = true;
  const auto& ep = auth_upstream_->endpoints[index];
  if (auth_up_.take_pooled(worker_.pool(), ep, auth_upstream_->tls_key)) {
    auth_send();
    return;
  }
  auth_up_.connect(downstream_.executor(), ep, auth_upstream_->tls_key, policy().connect_timeout,
                   [self = downstream_.hold(), this](error_code ec) {
                     if (cancelled_) return;
                     if (ec) {
                       auth_failed(ec, "connect", true);
                       return;
                     }
                     auth_up_.connected();
                     if (auth_upstream_->tls_context == nullptr) {
                       auth_send();
                       return;
                     }
                     auth_up_.handshake(*auth_upstream_, policy().connect_timeout,
                                        [self, this](error_code ec) {
                                          if (cancelled_) return;
                                          if (ec) {
                                            auth_failed(ec, "TLS handshake", true);
                                            return;
                                          }
                                          auth_send();
                                        });
                   });
}

void Exchange::auth_send() {
  auth_up_.start_request(*auth_request_);
  auth_up_.write(
      nullptr, 0, true, policy().send_timeout, [self = downstream_.hold(), this](error_code ec) {
        if (cancelled_) return;
        if (ec) {
          auth_failed(ec, "send", false);
          return;
        }
        auth_up_.read_header(&fields_arena_, worker_.limits().max_response_header_bytes,
                             auth_request_->method() == http::verb::head, policy().read_timeout,
                             [self, this](error_code ec) { auth_on_header(ec); });
      });
}

void Exchange::auth_failed(error_code ec, const char* stage, bool nothing_sent) {
  const bool reused = auth_up_.connection() && auth_up_.connection()->reused;
  const auto endpoint =
      auth_up_.connection() ? auth_up_.connection()->endpoint : upstream::Endpoint{};
  upstream::discard(auth_up_.connection());
  if (reused) {
    // A pooled connection the service had closed: the same endpoint on a new one.
    end_auth_attempt(false);
    --auth_attempts_;
    auth_connect(auth_endpoint_);
    return;
  }
  end_auth_attempt(true);
  if (nothing_sent && auth_attempts_ < kMaxAuthAttempts) {
    balancer::PickContext ctx;
    ctx.tried = &auth_tried_;
    const uint32_t next = auth_balancer_->pick(ctx);
    if (next != kNoEndpoint) {
      TG_DEBUG("http", "authentication service " << endpoint << " " << stage << " failed ("
                                                 << ec.message() << "), trying another");
      auth_connect(next);
      return;
    }
  }
  TG_WARN("http",
          "authentication service " << endpoint << " " << stage << " failed: " << ec.message());
  auth_error(500, "authentication failed\n");
}

void Exchange::auth_on_header(error_code ec) {
  if (cancelled_) return;
  if (ec) {
    auth_failed(ec, "response header", false);
    return;
  }
  auto& res = auth_up_.response().get();
  if (const ResponseVerdict v = auth_up_.check_response(); v.status != 0) {
    TG_WARN("http",
            "authentication service " << auth_up_.connection()->endpoint << ": " << v.reason);
    upstream::discard(auth_up_.connection());
    end_auth_attempt(true);
    auth_error(500, "authentication failed\n");
    return;
  }
  const unsigned status = res.result_int();
  if (status >= 100 && status < 200) {  // interim answers: the final one follows
    auth_up_.read_header(&fields_arena_, worker_.limits().max_response_header_bytes,
                         auth_request_->method() == http::verb::head, policy().read_timeout,
                         [self = downstream_.hold(), this](error_code ec) { auth_on_header(ec); });
    return;
  }
  // What the exchange needs of the answer, copied out (the head lives in the parser).
  auth_answer_ = AuthAnswer{status, {}};
  auth_cookies_.clear();
  bool cookies = false;
  if (status >= 200 && status < 300) {
    for (const auto& name : route_->policy->external_auth->response_headers) {
      if (auto it = res.find(name); it != res.end()) {
        auth_answer_.fields.emplace_back(name, std::string(it->value()));
      } else {
        auth_answer_.fields.emplace_back(name, std::string());  // removed from the request
      }
    }
  } else if (status == 401) {
    if (auto it = res.find(http::field::www_authenticate); it != res.end()) {
      auth_answer_.fields.emplace_back("WWW-Authenticate", std::string(it->value()));
    }
  }
  for (auto it = res.find(http::field::set_cookie);
       it != res.end() && it->name() == http::field::set_cookie; ++it) {
    auth_cookies_.emplace_back(it->value());
    cookies = true;
  }
  // Kept only without cookies (as nginx's cache keeps no answer that sets one).
  if (!auth_cache_key_.empty() && !cookies) {
    if (auto time = auth_->cache_time(status)) {
      auth_->cache->store(worker_.id(), auth_cache_key_, auth_answer_,
                          std::chrono::steady_clock::now() + *time);
    }
  }
  auth_body_bytes_ = 0;
  auth_drain_body();
}

void Exchange::auth_drain_body() {
  auto& parser = auth_up_.response();
  if (parser.is_done()) {
    end_auth_attempt(false);
    auth_up_.release(worker_.pool(), worker_.snapshot().get());
    const AuthAnswer answer = std::move(auth_answer_);
    apply_auth_answer(answer);
    return;
  }
  if (auth_body_bytes_ > kMaxAuthBodyBytes) {
    // Not worth reading: the answer stands, the connection is not reused.
    end_auth_attempt(false);
    upstream::discard(auth_up_.connection());
    const AuthAnswer answer = std::move(auth_answer_);
    apply_auth_answer(answer);
    return;
  }
  auth_up_.read_body(relay_buffer_.data(), relay_buffer_.size(), policy().read_timeout,
                     [self = downstream_.hold(), this](error_code ec, std::size_t n) {
                       if (cancelled_) return;
                       if (ec == http::error::need_buffer) ec = {};
                       if (ec) {
                         // The head decided: a body cut short only costs the connection.
                         end_auth_attempt(false);
                         upstream::discard(auth_up_.connection());
                         const AuthAnswer answer = std::move(auth_answer_);
                         apply_auth_answer(answer);
                         return;
                       }
                       auth_body_bytes_ += n;
                       auth_drain_body();
                     });
}

void Exchange::end_auth_attempt(bool failed) {
  if (!auth_attempt_open_) return;
  auth_attempt_open_ = false;
  auth_balancer_->on_finish(auth_endpoint_, std::chrono::nanoseconds(0), failed, {});
}

void Exchange::apply_auth_answer(const AuthAnswer& answer) {
  const model::ExternalAuth& auth = *route_->policy->external_auth;
  const bool incomplete = !downstream_.request_complete();
  const unsigned status = answer.status;
  if (status >= 200 && status < 300) {
    auto& req = downstream_.request();
    for (const auto& [name, value] : answer.fields) {
      req.erase(name);  // a client's own header of that name never reaches the backend
      if (!value.empty()) req.set(name, value);
    }
    proceed_to_backend();
    return;
  }
  if (auth.always_set_cookie) {
    for (const auto& cookie : auth_cookies_) local_fields_.emplace_back("Set-Cookie", cookie);
  }
  auth_cookies_.clear();
  if (status == 401) {
    if (!auth_->signin.empty()) {
      const TemplateRequest t = template_request();
      std::string location = expand_template(auth_->signin, t);
      const std::string param =
          auth.signin_redirect_param.empty() ? "rd" : auth.signin_redirect_param;
      const std::string query = location.substr(std::min(location.find('?'), location.size()));
      if (query.find("?" + param + "=") == std::string::npos &&
          query.find("&" + param + "=") == std::string::npos) {
        location += query.empty() ? '?' : '&';
        location += param;
        location += '=';
        location += client_https_ ? "https://" : "http://";
        location += t.host_header;
        location += text::percent_encode(t.target);
      }
      respond(302, "redirecting to sign in\n", incomplete, location);
      return;
    }
    for (const auto& field : answer.fields) local_fields_.push_back(field);
    grpc_code_ = GrpcStatus::kUnauthenticated;
    respond(401, "authentication required\n", incomplete);
    return;
  }
  if (status == 403) {
    grpc_code_ = GrpcStatus::kPermissionDenied;
    respond(403, "forbidden\n", incomplete);
    return;
  }
  TG_WARN("http",
          "authentication service answered " << status << " for route of " << route_->ingress);
  auth_error(500, "authentication failed\n");
}

void Exchange::auth_error(unsigned status, std::string_view text) {
  if (auto* m = worker_.metrics()) m->record_auth_error(route_labels());
  respond(status, text, !downstream_.request_complete());
}

}  // namespace tidegate::dataplane::server
