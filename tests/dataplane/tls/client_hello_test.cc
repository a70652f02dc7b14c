// Reading the SNI of a ClientHello before OpenSSL sees it (ssl-passthrough): real ClientHellos
// made by OpenSSL's client into a memory BIO, cut at every byte, split into several records,
// and things that are not ClientHellos.

#include "tls/client_hello.h"

#include <openssl/ssl.h>

#include <gtest/gtest.h>

#include <string>

namespace tidegate::dataplane::tls {
namespace {

// The first flight of an OpenSSL client (TLS 1.2-1.3, as our clients send it).
std::string client_hello(const char* sni) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  if (sni != nullptr) SSL_set_tlsext_host_name(ssl, sni);
  SSL_connect(ssl);  // wants to read the ServerHello: the ClientHello is in `out`
  char* data = nullptr;
  long n = BIO_get_mem_data(out, &data);
  std::string bytes(data, static_cast<size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return bytes;
}

// The same handshake bytes in records of at most `size` bytes of payload each.
std::string split_records(const std::string& one_record, size_t size) {
  const std::string payload = one_record.substr(5);
  std::string out;
  for (size_t at = 0; at < payload.size(); at += size) {
    const std::string part = payload.substr(at, size);
    out += one_record.substr(0, 3);
    out += static_cast<char>(part.size() >> 8);
    out += static_cast<char>(part.size() & 0xff);
    out += part;
  }
  return out;
}

TEST(ScanClientHello, RealClientHellos) {
  const std::string hello = client_hello("Pt.Example.COM");
  auto info = scan_client_hello(hello);
  ASSERT_EQ(info.state, HelloScan::kComplete);
  EXPECT_EQ(info.sni, "pt.example.com");
  // Whatever follows the ClientHello (early data, the next record) changes nothing.
  EXPECT_EQ(scan_client_hello(hello + "\x17\x03\x03").sni, "pt.example.com");
  // Every cut before its end waits for more.
  for (size_t n = 0; n < hello.size(); ++n) {
    EXPECT_EQ(scan_client_hello(hello.substr(0, n)).state, HelloScan::kIncomplete) << n;
  }
  // Several records (allowed, rare): the same answer, and a wait before the last.
  for (size_t size : {1, 7, 100, 512}) {
    const std::string split = split_records(hello, size);
    auto s = scan_client_hello(split);
    EXPECT_EQ(s.state, HelloScan::kComplete) << size;
    EXPECT_EQ(s.sni, "pt.example.com") << size;
    EXPECT_EQ(scan_client_hello(split.substr(0, split.size() - 1)).state, HelloScan::kIncomplete);
  }
  // Without SNI: complete, no name.
  info = scan_client_hello(client_hello(nullptr));
  EXPECT_EQ(info.state, HelloScan::kComplete);
  EXPECT_EQ(info.sni, "");
}

TEST(ScanClientHello, WhatIsNotAClientHello) {
  EXPECT_EQ(scan_client_hello("GET / HTTP/1.1\r\n").state, HelloScan::kNotTls);
  EXPECT_EQ(scan_client_hello(std::string("\x16\x02\x00\x00\x05", 5)).state, HelloScan::kNotTls);
  // A handshake record of length 0, or past TLS's limit.
  EXPECT_EQ(scan_client_hello(std::string("\x16\x03\x01\x00\x00", 5)).state, HelloScan::kNotTls);
  EXPECT_EQ(scan_client_hello(std::string("\x16\x03\x01\x48\x01", 5)).state, HelloScan::kNotTls);
  // Another handshake message (a ServerHello) first.
  std::string hello = client_hello("a.com");
  hello[5] = 2;
  EXPECT_EQ(scan_client_hello(hello).state, HelloScan::kNotTls);
  // A ClientHello whose inner lengths run past its end: its own length says 40 bytes, its
  // session id (32 bytes, as OpenSSL's clients send one) does not fit in them.
  hello = client_hello("a.com");
  hello[6] = 0;
  hello[7] = 0;
  hello[8] = 40;
  EXPECT_EQ(scan_client_hello(hello).state, HelloScan::kNotTls);
}

}  // namespace
}  // namespace tidegate::dataplane::tls
