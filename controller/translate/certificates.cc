#include "translate/certificates.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "crypto/openssl_ptr.h"

namespace tidegate::controller::translate {

using crypto::KeyPtr;
using crypto::memory_bio;
using crypto::X509Ptr;

std::string check_certificate_pair(const std::string& cert_pem, const std::string& key_pem) {
  ERR_clear_error();
  auto cert_bio = memory_bio(cert_pem);
  X509Ptr cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    ERR_clear_error();
    return "tls.crt holds no PEM certificate";
  }
  // The rest of the chain must parse too, or clients would get a truncated chain.
  for (;;) {
    X509Ptr next(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
    if (!next) break;
  }
  unsigned long err = ERR_peek_last_error();
  if (err != 0 &&
      !(ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE)) {
    ERR_clear_error();
    return "tls.crt: a certificate after the first one does not parse";
  }
  ERR_clear_error();
  auto key_bio = memory_bio(key_pem);
  // No passphrase callback: an encrypted key must fail rather than prompt.
  KeyPtr key(PEM_read_bio_PrivateKey(
      key_bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (!key) {
    ERR_clear_error();
    return "tls.key holds no unencrypted PEM private key";
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return "tls.key does not match the certificate in tls.crt";
  }
  return {};
}

namespace {

// Counts the PEM objects `read` takes out of `pem` (each one freed by `free`); the problem, or ""
// when there is at least one and nothing after the last one fails to parse.
template <class T>
std::string check_pem_bundle(const std::string& pem, T* (*read)(BIO*, T**, pem_password_cb*, void*),
                             void (*free)(T*), const char* key, const char* what) {
  ERR_clear_error();
  auto bio = memory_bio(pem);
  int count = 0;
  while (T* item = read(bio.get(), nullptr, nullptr, nullptr)) {
    free(item);
    ++count;
  }
  unsigned long err = ERR_peek_last_error();
  ERR_clear_error();
  const bool clean_end =
      err == 0 || (ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE);
  if (count == 0) return std::string(key) + " holds no PEM " + what;
  if (!clean_end) return std::string(key) + ": a " + what + " after the first one does not parse";
  return {};
}

}  // namespace

std::string check_ca_bundle(const std::string& ca_pem) {
  return check_pem_bundle<X509>(ca_pem, PEM_read_bio_X509, X509_free, "ca.crt", "certificate");
}

std::string check_crl_bundle(const std::string& crl_pem) {
  return check_pem_bundle<X509_CRL>(crl_pem, PEM_read_bio_X509_CRL, X509_CRL_free, "ca.crl", "CRL");
}

}  // namespace tidegate::controller::translate
