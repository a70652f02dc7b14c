#include "server/substitution.h"

#include <boost/beast/core/string.hpp>

#include "text/text.h"

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

bool is_identity_encoding(std::string_view content_encoding) {
  auto v = text::trim_ows(content_encoding);
  return v.empty() || boost::beast::iequals(v, "identity");
}

SubstitutionAction decide_substitution(const runtime::CompiledSubstitution& sub,
                                       const ResponseFacts& facts) {
  if (!facts.body_expected) return SubstitutionAction::kPass;
  // A partial body cannot be rewritten: its Content-Range counts the upstream's bytes.
  if (facts.status == 206) return SubstitutionAction::kPass;
  if (facts.content_length && *facts.content_length == 0) return SubstitutionAction::kPass;
  if (!sub.applies_to(facts.content_type)) return SubstitutionAction::kPass;
  if (!is_identity_encoding(facts.content_encoding)) return SubstitutionAction::kPassCompressed;
  return SubstitutionAction::kSubstitute;
}

std::string weak_etag(std::string_view etag) {
  etag = text::trim_ows(etag);
  if (etag.empty() || etag.starts_with("W/")) return std::string(etag);
  std::string out = "W/";
  out.append(etag.data(), etag.size());
  return out;
}

void rewrite_substituted_header(http::response_header<Fields>& res, unsigned client_version) {
  res.erase(http::field::content_length);
  auto etag = res[http::field::etag];
  if (!etag.empty() && !etag.starts_with("W/")) res.set(http::field::etag, weak_etag(etag));
  // The upstream's framing goes: chunked to HTTP/1.1 clients, close-delimited to HTTP/1.0 ones.
  res.erase(http::field::transfer_encoding);
  if (client_version >= 11) res.set(http::field::transfer_encoding, "chunked");
}

void memo_validator(const http::response_header<Fields>& res, std::string* out) {
  out->clear();
  auto etag = text::trim_ows(res[http::field::etag]);
  if (!etag.empty()) {
    out->append("E:");
    out->append(etag.data(), etag.size());
    return;
  }
  auto modified = text::trim_ows(res[http::field::last_modified]);
  if (!modified.empty()) {
    out->append("L:");
    out->append(modified.data(), modified.size());
  }
}

}  // namespace tidegate::dataplane::server
