#include "model/source_ranges.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/syntax.h"

namespace tidegate::model {

using detail::is_digit;
using detail::quote;
using nlohmann::json;

namespace {

bool is_cidr_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::optional<std::string> check_cidr(std::string_view text) {
  // The rules of dataplane/ratelimit/cidr_set.cc (Cidr::parse), cross-checked by the tests.
  if (text.empty()) return "empty network";
  std::string_view address = text;
  std::optional<unsigned> prefix;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    address = text.substr(0, slash);
    std::string_view digits = text.substr(slash + 1);
    if (digits.empty()) return "missing prefix length after '/'";
    if (digits.size() > 3 || !std::all_of(digits.begin(), digits.end(), is_digit)) {
      return "prefix length " + quote(digits) + " is not a number 0-128";
    }
    if (digits.size() > 1 && digits[0] == '0') {
      return "prefix length " + quote(digits) + " has a leading zero";
    }
    prefix = static_cast<unsigned>(std::stoul(std::string(digits)));
  }
  if (address.find('%') != std::string_view::npos) {
    return quote(address) + " has a zone index, which networks cannot have";
  }
  if (address.find(':') == std::string_view::npos) {
    if (!detail::is_ipv4(address)) return quote(address) + " is not an IPv4 or IPv6 address";
    if (prefix.value_or(32) > 32) {
      return "prefix length " + std::to_string(*prefix) + " is out of range 0-32 for IPv4";
    }
    return std::nullopt;
  }
  if (!detail::ipv6_mapped(address)) return quote(address) + " is not an IPv4 or IPv6 address";
  if (prefix.value_or(128) > 128) {
    return "prefix length " + std::to_string(*prefix) + " is out of range 0-128 for IPv6";
  }
  return std::nullopt;
}

std::optional<std::string> parse_cidr_list(std::string_view text, std::vector<std::string>* out) {
  std::vector<std::string> entries;
  size_t pos = 0;
  bool expect_entry = true;  // at the start and after a comma an entry must follow
  while (true) {
    while (pos < text.size() && is_cidr_space(text[pos])) ++pos;
    if (pos == text.size()) break;
    if (text[pos] == ',') {
      if (expect_entry) return "entry " + std::to_string(entries.size() + 1) + " is empty";
      expect_entry = true;
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && text[end] != ',' && !is_cidr_space(text[end])) ++end;
    std::string_view entry = text.substr(pos, end - pos);
    if (entries.size() == kMaxCidrEntries) {
      return "more than " + std::to_string(kMaxCidrEntries) + " entries";
    }
    if (auto why = check_cidr(entry)) {
      return "entry " + std::to_string(entries.size() + 1) + " " + quote(entry) + ": " + *why;
    }
    entries.emplace_back(entry);
    expect_entry = false;
    pos = end;
  }
  if (entries.empty()) return "no network given";
  if (expect_entry) return "trailing comma after entry " + std::to_string(entries.size());
  if (out) *out = std::move(entries);
  return std::nullopt;
}

void check_cidrs(const std::vector<std::string>& cidrs, const std::string& what,
                 std::vector<std::string>& problems) {
  if (cidrs.size() > kMaxCidrEntries) {
    problems.push_back(what + ": more than " + std::to_string(kMaxCidrEntries) + " entries");
    return;
  }
  for (size_t i = 0; i < cidrs.size(); ++i) {
    if (auto why = check_cidr(cidrs[i])) {
      problems.push_back(what + " entry " + std::to_string(i + 1) + " " + quote(cidrs[i]) + ": " +
                         *why);
    }
  }
}

void validate_allow_ranges(const SourceRanges& r, std::vector<std::string>& problems) {
  check_cidrs(r.cidrs, "source range", problems);
}

void validate_deny_ranges(const SourceRanges& r, std::vector<std::string>& problems) {
  if (r.cidrs.empty()) problems.push_back("deny ranges are empty");
  check_cidrs(r.cidrs, "deny range", problems);
}

json to_json(const SourceRanges& r) { return r.cidrs; }

void source_ranges_from_json(detail::ObjectReader& r, const char* key,
                             std::optional<SourceRanges>& out) {
  if (r.find(key)) {
    SourceRanges ranges;
    r.strings(key, ranges.cidrs);
    out = std::move(ranges);
  }
}

}  // namespace tidegate::model
