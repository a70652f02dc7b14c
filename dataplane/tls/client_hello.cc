#include "tls/client_hello.h"

#include "tls/client_auth.h"

namespace tidegate::dataplane::tls {

namespace {

constexpr unsigned kHandshakeRecord = 22;
constexpr unsigned kClientHello = 1;
constexpr unsigned kServerNameExtension = 0;
constexpr size_t kMaxRecordPayload = 16 * 1024 + 2048;  // TLSCiphertext's limit

unsigned u8(std::string_view s, size_t at) { return static_cast<unsigned char>(s[at]); }
size_t u16(std::string_view s, size_t at) { return (u8(s, at) << 8) | u8(s, at + 1); }

// A cursor over the ClientHello body that fails (ok == false) instead of reading past the end.
struct Reader {
  std::string_view s;
  size_t at = 0;
  bool ok = true;
  bool need(size_t n) {
    ok = ok && at + n <= s.size();
    return ok;
  }
  void skip(size_t n) {
    if (need(n)) at += n;
  }
  size_t take8() {
    if (!need(1)) return 0;
    return u8(s, at++);
  }
  size_t take16() {
    if (!need(2)) return 0;
    size_t v = u16(s, at);
    at += 2;
    return v;
  }
};

}  // namespace

ClientHelloInfo scan_client_hello(std::string_view bytes) {
  ClientHelloInfo out;
  // The handshake messages, taken out of their records.
  std::string handshake;
  size_t at = 0;
  size_t needed = 0;  // of `handshake`: 4 + the ClientHello's length, once known
  while (needed == 0 || handshake.size() < needed) {
    if (bytes.size() < at + 5) return out;  // incomplete
    if (u8(bytes, at) != kHandshakeRecord || u8(bytes, at + 1) != 3) {
      out.state = HelloScan::kNotTls;
      return out;
    }
    const size_t length = u16(bytes, at + 3);
    if (length == 0 || length > kMaxRecordPayload) {
      out.state = HelloScan::kNotTls;
      return out;
    }
    if (bytes.size() < at + 5 + length) return out;  // incomplete
    handshake.append(bytes.substr(at + 5, length));
    at += 5 + length;
    if (needed == 0 && handshake.size() >= 4) {
      if (u8(handshake, 0) != kClientHello) {
        out.state = HelloScan::kNotTls;
        return out;
      }
      const size_t body = (u8(handshake, 1) << 16) | (u8(handshake, 2) << 8) | u8(handshake, 3);
      if (body > 64 * 1024) {
        out.state = HelloScan::kNotTls;
        return out;
      }
      needed = 4 + body;
    }
  }
  Reader r{std::string_view(handshake).substr(4, needed - 4)};
  r.skip(2 + 32);      // legacy_version, random
  r.skip(r.take8());   // legacy_session_id
  r.skip(r.take16());  // cipher_suites
  r.skip(r.take8());   // legacy_compression_methods
  if (!r.ok) {
    out.state = HelloScan::kNotTls;
    return out;
  }
  out.state = HelloScan::kComplete;
  if (r.at == r.s.size()) return out;           // no extensions: no SNI
  const size_t extensions_length = r.take16();  // before r.at: it moves the cursor
  const size_t extensions_end = r.at + extensions_length;
  if (!r.ok || extensions_end > r.s.size()) {
    out.state = HelloScan::kNotTls;
    return out;
  }
  while (r.ok && r.at + 4 <= extensions_end) {
    const size_t type = r.take16();
    const size_t length = r.take16();
    if (!r.need(length) || r.at + length > extensions_end) break;
    if (type == kServerNameExtension) {
      const auto* data = reinterpret_cast<const unsigned char*>(r.s.data() + r.at);
      if (!sni_from_extension(data, length, &out.sni)) out.sni.clear();
      return out;
    }
    r.skip(length);
  }
  return out;
}

}  // namespace tidegate::dataplane::tls
