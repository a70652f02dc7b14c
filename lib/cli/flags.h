#pragma once
// Command-line flags shared by both programs: "--name value" or "--name=value", every flag
// declared with a default and a help line; unknown flags and missing values are errors.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tidegate::cli {

class Flags {
 public:
  void define(const std::string& name, std::string default_value, std::string help);
  void define_bool(const std::string& name, std::string help);  // "--name" alone means true
  // Returns false and sets *error on a bad command line.
  bool parse(int argc, char** argv, std::string* error);
  const std::string& get(const std::string& name) const;
  bool is_set(const std::string& name) const;  // given on the command line
  bool get_bool(const std::string& name) const;
  std::string usage(const std::string& program) const;

 private:
  struct Flag {
    std::string value;
    std::string help;
    bool is_bool = false;
    bool set = false;
  };
  std::map<std::string, Flag> flags_;
};

// The start of both programs' main(): defines --log-level and --help, parses, prints the usage or
// the error, and sets the log level. Returns -1 to go on, otherwise the exit code.
int parse_command_line(Flags& flags, int argc, char** argv, const std::string& program);

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "0.0.0.0:8080", "[::1]:80", "localhost:0". Returns nullopt on anything else.
std::optional<HostPort> parse_host_port(const std::string& text);

}  // namespace tidegate::cli
