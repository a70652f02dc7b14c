// Error pages: custom-http-errors (served by the route's default backend, which the translator
// resolves: the default-backend annotation or --default-backend-service).

#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_error_pages() {
  auto a = get("custom-http-errors");
  if (!a) return;
  std::vector<uint16_t> codes;
  std::string why;
  for (const std::string& item : split_commas(a->value)) {
    if (!all_digits(item) || item.size() != 3) {
      why = "entry " + quote(item) + " is not a status code";
      break;
    }
    const int code = std::stoi(item);
    if (code < 400 || code > 599) {
      why = "status " + item + " is not an error (400-599)";
      break;
    }
    codes.push_back(static_cast<uint16_t>(code));
  }
  std::sort(codes.begin(), codes.end());
  codes.erase(std::unique(codes.begin(), codes.end()), codes.end());
  if (why.empty() && codes.size() > RoutePolicy::kMaxErrorCodes) why = "more than 64 codes";
  if (!why.empty()) {
    invalid(*a, why + " (a comma-separated list such as \"404,503\")");
    return;
  }
  route_.error_codes = std::move(codes);
}

}  // namespace tidegate::controller::translate::annotations_detail
