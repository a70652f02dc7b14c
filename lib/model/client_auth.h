#pragma once
// Client certificates (mTLS) of a TLS host (docs/tls.md, "Client certificates"): the
// auth-tls-* annotations as the translator resolved them, carried by model::TlsHost. Checks and
// JSON form here. The data plane asks for and checks the certificate during the handshake of
// every connection whose SNI names the host, and answers the requests (server/client_cert.h).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// auth-tls-verify-client, as nginx's ssl_verify_client:
// - kOn: a certificate that verifies against the CA bundle is required (else 400);
// - kOptional: asked for; a request without one goes on, one that does not verify gets 400;
// - kOptionalNoCa: asked for, not required to verify; the backend hears the verdict.
// ("off" turns the family off: no ClientAuth at all.)
enum class ClientVerify { kOn, kOptional, kOptionalNoCa };
const char* to_string(ClientVerify v);
std::optional<ClientVerify> client_verify_from_string(std::string_view s);

struct ClientAuth {
  static constexpr uint32_t kDefaultVerifyDepth = 1;  // ingress-nginx's (and nginx's) default
  static constexpr uint32_t kMaxVerifyDepth = 16;
  static constexpr size_t kMaxCaBytes = 1 << 20;  // a CA bundle of 1 MiB is already absurd
  ClientVerify verify = ClientVerify::kOn;
  // PEM CA certificates (the auth-tls-secret's ca.crt). Empty: the settings could not be used
  // (the Secret is missing, has no usable ca.crt, or an annotation is broken): every request to
  // the host is refused (503) rather than let through without the check that was asked for.
  std::string ca_pem;
  // PEM CRLs (the Secret's ca.crl, optional): a revoked client certificate does not verify.
  std::string crl_pem = {};
  // "namespace/name" of the Secret, for logs.
  std::string secret;
  // Intermediate certificates allowed between the client's and a CA of the bundle, as nginx's
  // ssl_verify_depth (OpenSSL's count): 1 lets the client's chain hold one intermediate.
  uint32_t verify_depth = kDefaultVerifyDepth;
  // auth-tls-pass-certificate-to-upstream: the client's PEM, URL-encoded, in ssl-client-cert.
  bool pass_certificate = false;
  // auth-tls-error-page: a failed verification answers 302 to this URL instead of 400.
  std::string error_page = {};
  // auth-tls-match-cn: an RE2 pattern the subject DN (RFC 2253 form, "CN=a,O=b") must match
  // (searched, as ingress-nginx's nginx regex); empty: any.
  std::string match_cn = {};
  bool operator==(const ClientAuth&) const = default;
};

// A redirect target for auth-tls-error-page: an absolute http(s) URL or a path, printable ASCII
// without spaces, at most 2,048 bytes.
std::optional<std::string> check_error_page_url(std::string_view url);

std::vector<std::string> validate(const ClientAuth& a);
nlohmann::json to_json(const ClientAuth& a);
ClientAuth client_auth_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
