// Compression: enable-compression, compression-min-length, compression-types,
// compression-breach-mitigation (Tidegate's own;
// ingress-nginx sets gzip controller-wide with use-gzip, which --enable-compression stands for).

#include "text/text.h"
#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_compression() {
  const bool on = get_bool("enable-compression").value_or(options_.compression_default);
  if (!on) {
    for (std::string_view name :
         {"compression-min-length", "compression-types", "compression-breach-mitigation"}) {
      if (auto a = get(name)) warn(*a, "has no effect without enable-compression; ignored");
    }
    return;
  }
  model::Compression c;
  if (auto n = get_integer("compression-min-length", 0, model::Compression::kMaxMinLength)) {
    c.min_length = static_cast<uint32_t>(*n);
  }
  if (auto a = get("compression-types")) {
    // Comma- or space-separated, as ingress-nginx's gzip-types.
    std::vector<std::string> types;
    std::string current;
    std::optional<std::string> why;
    auto flush = [&] {
      if (current.empty()) return;
      if (auto bad = model::check_media_type(current); bad && !why) {
        why = quote(current) + " " + *bad;
      }
      if (std::find(types.begin(), types.end(), current) == types.end()) {
        types.push_back(current);
      }
      current.clear();
    };
    for (char ch : a->value) {
      if (ch == ',' || ch == ' ' || ch == '\t' || ch == '\n') {
        flush();
      } else {
        current.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
      }
    }
    flush();
    if (!why && types.empty()) why = "no media type given";
    if (!why && types.size() > model::Compression::kMaxTypes) why = "more than 64 media types";
    if (why) {
      invalid(*a, *why, "the default list applies");
    } else {
      c.types = std::move(types);
    }
  }
  if (auto a = get("compression-breach-mitigation")) {
    const std::string v = text::ascii_lower(std::string(trim(a->value)));
    if (auto m = model::breach_mitigation_from_string(v)) {
      c.breach = *m;
    } else {
      // Refusing to compress is the reading that cannot leak.
      invalid(*a, "expected off, no-credentials or padding", "no-credentials applies");
      c.breach = model::BreachMitigation::kNoCredentials;
    }
  }
  route_.compression = std::move(c);
}

}  // namespace tidegate::controller::translate::annotations_detail
