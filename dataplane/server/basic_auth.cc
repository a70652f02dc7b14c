#include "server/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cstring>
#include <string>

namespace tidegate::dataplane::server {

namespace {

constexpr char kItoa64[] = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

bool equal_constant_time(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// Base64 (RFC 4648, with padding) of `in`.
std::string base64(const unsigned char* in, std::size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  const int len =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), in, static_cast<int>(n));
  out.resize(static_cast<std::size_t>(len));
  return out;
}

// Decodes standard base64; false when it is not.
bool unbase64(std::string_view in, std::string* out) {
  if (in.empty() || in.size() % 4 != 0 || in.size() > 4096) return false;
  std::string buf(in.size() / 4 * 3, '\0');
  const int len = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(buf.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()),
                                  static_cast<int>(in.size()));
  if (len < 0) return false;
  std::size_t n = static_cast<std::size_t>(len);
  // EVP_DecodeBlock counts the padding as bytes.
  if (in.size() >= 1 && in[in.size() - 1] == '=') --n;
  if (in.size() >= 2 && in[in.size() - 2] == '=') --n;
  buf.resize(n);
  *out = std::move(buf);
  return true;
}

struct Md5 {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Md5() { EVP_DigestInit_ex(ctx, EVP_md5(), nullptr); }
  ~Md5() { EVP_MD_CTX_free(ctx); }
  void add(std::string_view s) { EVP_DigestUpdate(ctx, s.data(), s.size()); }
  void add(const unsigned char* p, std::size_t n) { EVP_DigestUpdate(ctx, p, n); }
  void finish(unsigned char out[16]) {
    unsigned int n = 16;
    EVP_DigestFinal_ex(ctx, out, &n);
  }
};

}  // namespace

std::string apr1_md5(std::string_view pw, std::string_view salt) {
  // The MD5-crypt algorithm (Poul-Henning Kamp's, as Apache's apr_md5.c has it) with the magic
  // "$apr1$".
  constexpr std::string_view kMagic = "$apr1$";
  salt = salt.substr(0, std::min<std::size_t>(salt.find('$'), 8));
  unsigned char final[16];
  {
    Md5 alt;
    alt.add(pw);
    alt.add(salt);
    alt.add(pw);
    alt.finish(final);
  }
  Md5 ctx;
  ctx.add(pw);
  ctx.add(kMagic);
  ctx.add(salt);
  for (std::size_t left = pw.size(); left > 0; left -= std::min<std::size_t>(left, 16)) {
    ctx.add(final, std::min<std::size_t>(left, 16));
  }
  std::memset(final, 0, sizeof(final));
  for (std::size_t i = pw.size(); i != 0; i >>= 1) {
    if (i & 1) {
      ctx.add(final, 1);
    } else {
      ctx.add(pw.substr(0, 1));
    }
  }
  ctx.finish(final);
  for (int i = 0; i < 1000; ++i) {
    Md5 round;
    if (i & 1) {
      round.add(pw);
    } else {
      round.add(final, 16);
    }
    if (i % 3) round.add(salt);
    if (i % 7) round.add(pw);
    if (i & 1) {
      round.add(final, 16);
    } else {
      round.add(pw);
    }
    round.finish(final);
  }
  std::string out(kMagic);
  out.append(salt);
  out += '$';
  auto to64 = [&out](unsigned long v, int n) {
    while (n-- > 0) {
      out += kItoa64[v & 0x3f];
      v >>= 6;
    }
  };
  to64((final[0] << 16) | (final[6] << 8) | final[12], 4);
  to64((final[1] << 16) | (final[7] << 8) | final[13], 4);
  to64((final[2] << 16) | (final[8] << 8) | final[14], 4);
  to64((final[3] << 16) | (final[9] << 8) | final[15], 4);
  to64((final[4] << 16) | (final[10] << 8) | final[5], 4);
  to64(final[11], 2);
  return out;
}

bool verify_password(std::string_view password, std::string_view hash) {
  if (hash.starts_with("$apr1$")) {
    return equal_constant_time(apr1_md5(password, hash.substr(6)), hash);
  }
  if (hash.starts_with("{SHA}")) {
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(password.data()), password.size(), digest);
    return equal_constant_time(base64(digest, sizeof(digest)), hash.substr(5));
  }
  if (password.find('\0') != std::string_view::npos) return false;  // crypt reads C strings
  // bcrypt, SHA-crypt, MD5-crypt. crypt_data is large: one per thread, reused.
  thread_local std::unique_ptr<crypt_data> data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const std::string pw(password);
  const std::string setting(hash);
  const char* out = crypt_r(pw.c_str(), setting.c_str(), data.get());
  // libxcrypt answers a failure with a string starting with '*'.
  if (out == nullptr || out[0] == '*') return false;
  return equal_constant_time(out, hash);
}

std::size_t BasicAuthCheck::DigestHash::operator()(
    const std::array<unsigned char, 32>& d) const noexcept {
  std::size_t h;
  std::memcpy(&h, d.data(), sizeof(h));
  return h;
}

BasicAuthCheck::BasicAuthCheck(const model::BasicAuth& config, std::size_t workers)
    : challenge_("Basic realm=\"" + config.realm + "\", charset=\"UTF-8\""),
      caches_(std::make_unique<Cache[]>(workers)),
      workers_(workers) {
  for (const auto& u : config.users) users_.emplace(u.name, u.hash);
}

BasicAuthCheck::Verdict BasicAuthCheck::check(std::string_view authorization,
                                              std::size_t worker) const {
  if (users_.empty()) return Verdict::kUnconfigured;
  // "Basic <base64 user:password>", the scheme case-insensitive (RFC 7617).
  constexpr std::string_view kScheme = "basic ";
  if (authorization.size() <= kScheme.size()) return Verdict::kDenied;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) {
      return Verdict::kDenied;
    }
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  std::array<unsigned char, 32> digest;
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest.data());
  Cache* cache = worker < workers_ ? &caches_[worker] : nullptr;
  if (cache != nullptr && cache->accepted.contains(digest)) return Verdict::kAllowed;
  std::string decoded;
  if (!unbase64(token, &decoded)) return Verdict::kDenied;
  const std::size_t colon = decoded.find(':');
  if (colon == std::string::npos) return Verdict::kDenied;
  auto user = users_.find(decoded.substr(0, colon));
  if (user == users_.end()) return Verdict::kDenied;
  if (!verify_password(std::string_view(decoded).substr(colon + 1), user->second)) {
    return Verdict::kDenied;
  }
  if (cache != nullptr) {
    if (cache->accepted.size() >= kCachePerWorker) cache->accepted.clear();
    cache->accepted.insert(digest);
  }
  return Verdict::kAllowed;
}

}  // namespace tidegate::dataplane::server
