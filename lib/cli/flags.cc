#include "cli/flags.h"

#include <charconv>
#include <iostream>

#include "log/log.h"

namespace tidegate::cli {

void Flags::define(const std::string& name, std::string default_value, std::string help) {
  flags_[name] = Flag{std::move(default_value), std::move(help), false, false};
}

void Flags::define_bool(const std::string& name, std::string help) {
  flags_[name] = Flag{"false", std::move(help), true, false};
}

bool Flags::parse(int argc, char** argv, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      *error = "unexpected argument \"" + arg + "\"";
      return false;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      *error = "unknown flag --" + name;
      return false;
    }
    Flag& f = it->second;
    if (f.is_bool) {
      if (value && *value != "true" && *value != "false") {
        *error = "--" + name + " takes true or false";
        return false;
      }
      f.value = value.value_or("true");
    } else {
      if (!value) {
        if (i + 1 >= argc) {
          *error = "--" + name + " needs a value";
          return false;
        }
        value = argv[++i];
      }
      f.value = *value;
    }
    f.set = true;
  }
  return true;
}

const std::string& Flags::get(const std::string& name) const { return flags_.at(name).value; }
bool Flags::is_set(const std::string& name) const { return flags_.at(name).set; }
bool Flags::get_bool(const std::string& name) const { return flags_.at(name).value == "true"; }

std::string Flags::usage(const std::string& program) const {
  std::string out = "usage: " + program + " [flags]\n";
  for (const auto& [name, f] : flags_) {
    out += "  --" + name + (f.is_bool ? "" : " VALUE") + "\n      " + f.help;
    if (!f.is_bool && !f.value.empty()) out += " (default " + f.value + ")";
    out += "\n";
  }
  return out;
}

int parse_command_line(Flags& flags, int argc, char** argv, const std::string& program) {
  flags.define("log-level", "info", "debug, info, warn or error");
  flags.define_bool("help", "print this help");
  std::string error;
  if (!flags.parse(argc, argv, &error)) {
    std::cerr << program << ": " << error << "\n" << flags.usage(program);
    return 2;
  }
  if (flags.get_bool("help")) {
    std::cout << flags.usage(program);
    return 0;
  }
  static const std::map<std::string, log::Level> kLevels = {{"debug", log::Level::kDebug},
                                                            {"info", log::Level::kInfo},
                                                            {"warn", log::Level::kWarn},
                                                            {"error", log::Level::kError}};
  auto level = kLevels.find(flags.get("log-level"));
  if (level == kLevels.end()) {
    std::cerr << program << ": --log-level must be debug, info, warn or error\n";
    return 2;
  }
  log::set_level(level->second);
  return -1;
}

std::optional<HostPort> parse_host_port(const std::string& text) {
  HostPort hp;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    hp.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return std::nullopt;
    hp.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (hp.host.empty() || port.empty()) return std::nullopt;
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || ptr != port.data() + port.size() || value > 65535) return std::nullopt;
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

}  // namespace tidegate::cli
