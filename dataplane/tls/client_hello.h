#pragma once
// Reading a TLS ClientHello before any TLS library sees it (ssl-passthrough, docs/tls.md,
// "Passthrough"): the connection's first bytes are read and kept, the SNI decides whether the
// connection is relayed as it is to a backend or terminated here, and in both cases the bytes
// go on unchanged (to the backend, or to OpenSSL as if they had just arrived).

#include <cstddef>
#include <string>
#include <string_view>

namespace tidegate::dataplane::tls {

// Past this much input the ClientHello is not looked for any more (the handshake goes on and
// OpenSSL decides): one full record, as every client sends its ClientHello in practice.
inline constexpr size_t kMaxClientHelloBytes = 16 * 1024 + 5;

enum class HelloScan {
  kIncomplete,  // more bytes are needed
  kComplete,    // a whole ClientHello; `sni` is its host name (empty: none)
  kNotTls,      // not a TLS ClientHello (or malformed): terminate as usual, OpenSSL will refuse
};

struct ClientHelloInfo {
  HelloScan state = HelloScan::kIncomplete;
  std::string sni;  // lower case, without a trailing dot
};

// `bytes`: what the client sent so far. The ClientHello may span several handshake records.
ClientHelloInfo scan_client_hello(std::string_view bytes);

}  // namespace tidegate::dataplane::tls
