#include "balancer/hash_expression.h"

#include <optional>

#include "balancer/stable_hash.h"

namespace tidegate::dataplane::balancer {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

constexpr const char* kKnown =
    "known: $remote_addr, $request_uri, $http_<name>, $cookie_<name>, $arg_<name>";

}  // namespace

std::shared_ptr<const HashExpression> HashExpression::compile(std::string_view text,
                                                              std::string* error) {
  auto fail = [&](const std::string& why) -> std::shared_ptr<const HashExpression> {
    *error = why;
    return nullptr;
  };
  if (text.empty()) return fail("empty expression");
  if (text.size() > kMaxTextBytes) {
    return fail("expression longer than " + std::to_string(kMaxTextBytes) + " bytes");
  }
  auto expr = std::make_shared<HashExpression>();
  expr->text_ = std::string(text);
  size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] != '$') {
      size_t end = text.find('$', pos);
      if (end == std::string_view::npos) end = text.size();
      expr->parts_.push_back({Kind::kLiteral, std::string(text.substr(pos, end - pos))});
      pos = end;
      continue;
    }
    const size_t start = pos;
    std::string_view name;
    if (pos + 1 < text.size() && text[pos + 1] == '{') {
      size_t close = text.find('}', pos + 2);
      if (close == std::string_view::npos) {
        return fail("\"${\" at offset " + std::to_string(start) + " is not closed by '}'");
      }
      name = text.substr(pos + 2, close - pos - 2);
      for (char c : name) {
        if (!is_name_char(c)) {
          return fail("variable name \"" + std::string(name) + "\" at offset " +
                      std::to_string(start) + " may hold only letters, digits and '_'");
        }
      }
      pos = close + 1;
    } else {
      size_t end = pos + 1;
      while (end < text.size() && is_name_char(text[end])) ++end;
      name = text.substr(pos + 1, end - pos - 1);
      pos = end;
    }
    if (name.empty()) {
      return fail("'$' at offset " + std::to_string(start) +
                  " is not followed by a variable name (a literal '$' cannot be written)");
    }
    auto with_suffix = [&](std::string_view prefix, Kind kind) -> std::optional<Part> {
      if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
      return Part{kind, std::string(name.substr(prefix.size()))};
    };
    std::optional<Part> part;
    if (name == "remote_addr") {
      part = Part{Kind::kRemoteAddr, {}};
    } else if (name == "request_uri") {
      part = Part{Kind::kRequestUri, {}};
    } else if ((part = with_suffix("http_", Kind::kHeader))) {
      for (char& c : part->name) {
        c = c == '_' ? '-' : static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      }
    } else if (!(part = with_suffix("cookie_", Kind::kCookie))) {
      part = with_suffix("arg_", Kind::kArg);
    }
    if (!part) {
      return fail("unknown variable \"$" + std::string(name) + "\" at offset " +
                  std::to_string(start) + " (" + kKnown + ")");
    }
    if (part->kind != Kind::kRemoteAddr && part->kind != Kind::kRequestUri && part->name.empty()) {
      return fail("variable \"$" + std::string(name) + "\" at offset " + std::to_string(start) +
                  " needs a name after the '_'");
    }
    expr->parts_.push_back(std::move(*part));
    if (expr->parts_.size() > kMaxParts) {
      return fail("more than " + std::to_string(kMaxParts) + " parts");
    }
  }
  return expr;
}

template <class Sink>
void HashExpression::each_piece(const RequestView& request, Sink&& sink) const {
  for (const auto& p : parts_) {
    switch (p.kind) {
      case Kind::kLiteral:
        sink(std::string_view(p.name));
        break;
      case Kind::kRemoteAddr: {
        char buf[ratelimit::IpAddress::kMaxTextBytes];
        size_t n = request.client.format(buf);
        sink(std::string_view(buf, n));
        break;
      }
      case Kind::kRequestUri:
        sink(request.uri);
        break;
      case Kind::kHeader:
        sink(request.find_header(p.name));
        break;
      case Kind::kCookie:
        sink(find_cookie(request.find_header("cookie"), p.name));
        break;
      case Kind::kArg:
        sink(find_query_arg(request.uri, p.name));
        break;
    }
  }
}

HashExpression::Key HashExpression::hash(const RequestView& request, uint64_t seed) const {
  StableHasher h(seed);
  each_piece(request, [&](std::string_view piece) { h.update(piece); });
  return {h.finish(), h.length() == 0};
}

std::string HashExpression::evaluate(const RequestView& request) const {
  std::string out;
  each_piece(request, [&](std::string_view piece) { out.append(piece); });
  return out;
}

}  // namespace tidegate::dataplane::balancer
