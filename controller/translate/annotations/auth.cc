// Authentication: auth-type (basic), auth-secret, auth-secret-type, auth-realm. The parser checks
// the annotations and the Secret reference; the translator reads the Secret into the users
// (translate.cc, resolve_basic_auth). A broken setup never opens the route: it fails closed.

#include "text/text.h"
#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_auth() {
  auto type = get("auth-type");
  if (!type) {
    for (std::string_view name : {"auth-secret", "auth-secret-type", "auth-realm"}) {
      if (auto a = get(name)) warn(*a, "has no effect without auth-type; ignored");
    }
    return;
  }
  // Whatever goes wrong from here, the route keeps an authentication without users: the data
  // plane refuses every request (503) rather than letting them through.
  const std::string closed = "the route refuses every request (503) until it is fixed";
  model::BasicAuth auth;
  auto& slot = route_.basic_auth;
  const std::string t = text::ascii_lower(std::string(trim(type->value)));
  if (t != "basic") {
    invalid(*type,
            t == "digest" ? "digest authentication is not supported (use basic)" : "expected basic",
            closed);
    slot = std::move(auth);
    return;
  }
  if (auto r = get("auth-realm")) {
    std::string realm(trim(r->value));
    if (auto why = model::check_auth_realm(realm)) {
      invalid(*r, *why, "the default realm applies");
    } else {
      auth.realm = std::move(realm);
    }
  }
  if (auto st = get("auth-secret-type")) {
    std::string_view v = trim(st->value);
    if (v != "auth-file" && v != "auth-map") {
      invalid(*st, "expected auth-file or auth-map", "auth-file applies");
    }
  }
  auto secret = get("auth-secret");
  if (!secret) {
    invalid(*type, "auth-type basic needs auth-secret (the Secret with the users)", closed);
    slot = std::move(auth);
    return;
  }
  if (auto ref = own_secret(*secret, closed)) auth.secret = std::move(*ref);
  slot = std::move(auth);
}

}  // namespace tidegate::controller::translate::annotations_detail
