// The response cache: enable-cache (Tidegate's own; ingress-nginx users configure proxy_cache
// in snippets, which Tidegate never reads). Sizes are the data plane's (--cache-size-mb,
// --cache-max-item-kb).

#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_cache() {
  if (get_bool("enable-cache").value_or(false)) route_.cache = true;
}

}  // namespace tidegate::controller::translate::annotations_detail
