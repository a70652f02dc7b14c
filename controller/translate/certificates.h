#pragma once
// Checks a kubernetes.io/tls Secret's PEM before it is sent to the data plane, so that a bad
// certificate is reported against its Ingress and never costs other hosts anything. Pure: no
// clock (expiry is checked and reported by the data plane, which has one).

#include <string>

namespace tidegate::controller::translate {

// Returns an empty string when `cert_pem` holds at least one certificate, `key_pem` one private
// key, and the key belongs to the first certificate; otherwise the reason.
std::string check_certificate_pair(const std::string& cert_pem, const std::string& key_pem);

// The problem with a CA bundle (a Secret's ca.crt for tidegate.io/proxy-ssl-secret), or "" when it
// holds at least one PEM certificate and every certificate in it parses. The data plane refuses
// (NACKs) a bundle without a certificate, so the controller must not send one.
std::string check_ca_bundle(const std::string& ca_pem);

// The problem with a CRL bundle (a Secret's ca.crl for tidegate.io/auth-tls-secret), or "" when
// it holds at least one PEM CRL and every CRL in it parses.
std::string check_crl_bundle(const std::string& crl_pem);

}  // namespace tidegate::controller::translate
