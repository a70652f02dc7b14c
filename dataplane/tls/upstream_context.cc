#include "tls/upstream_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <map>

#include <boost/asio/ip/address.hpp>
#include <mutex>

namespace tidegate::dataplane::tls {

namespace asio = boost::asio;

namespace {

std::shared_ptr<asio::ssl::context> build(const std::string& ca_pem, std::string* error) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(native, kAlpn, sizeof kAlpn);
  // Connections are pooled, not resumed: no session cache on the client side.
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  if (ca_pem.empty()) {
    SSL_CTX_set_verify(native, SSL_VERIFY_NONE, nullptr);
    return ctx;
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())), &BIO_free);
  X509_STORE* store = SSL_CTX_get_cert_store(native);
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++added;
    X509_free(cert);
  }
  ERR_clear_error();  // the loop ends on a "no start line" error
  if (added == 0) {
    *error = "CA bundle holds no PEM certificate";
    return nullptr;
  }
  SSL_CTX_set_verify(native, SSL_VERIFY_PEER, nullptr);
  return ctx;
}

}  // namespace

std::shared_ptr<asio::ssl::context> upstream_context(const std::string& ca_pem,
                                                     std::string* error) {
  // Weak entries: a context lives as long as some snapshot uses it.
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<asio::ssl::context>> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(ca_pem); it != cache.end()) {
    if (auto ctx = it->second.lock()) return ctx;
  }
  auto ctx = build(ca_pem, error);
  if (!ctx) return nullptr;
  std::erase_if(cache, [](const auto& entry) { return entry.second.expired(); });
  cache[ca_pem] = ctx;
  return ctx;
}

void set_upstream_identity(SSL* ssl, const std::string& name, bool verify) {
  if (name.empty()) return;
  boost::system::error_code not_ip;
  asio::ip::make_address(name, not_ip);
  if (not_ip) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (!verify) return;
  if (not_ip) {
    SSL_set1_host(ssl, name.c_str());
  } else {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
  }
}

}  // namespace tidegate::dataplane::tls
