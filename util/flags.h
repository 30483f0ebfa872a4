// FlagSet: a small command-line parser for meshrt's binaries and subcommands (Abseil's flags are
// process-global, which does not fit one binary with several subcommands sharing flag names).
//
//   FlagSet flags("meshrt-worker --coordinator HOST:PORT [flags]", "Runs a worker daemon.");
//   std::string coordinator;
//   flags.String("coordinator", &coordinator, "coordinator address HOST:PORT (required)");
//   ASSIGN_OR_RETURN(std::vector<std::string> positional, flags.Parse(argc, argv, 1));
//   if (flags.help()) { std::cout << flags.Help(); return 0; }
//
// Accepts `--name value`, `--name=value`, and for booleans `--name`, `--name=true|false`,
// `--noname`. `--` ends flags; `--help` and `--version` are always known. Targets keep their values as defaults when a flag is absent.
// Not thread-safe.
#ifndef MESHRT_UTIL_FLAGS_H_
#define MESHRT_UTIL_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace meshrt {

class FlagSet {
 public:
  FlagSet(std::string usage, std::string description);

  void String(const std::string& name, std::string* target, const std::string& help);
  void Int(const std::string& name, int64_t* target, const std::string& help);
  void Bool(const std::string& name, bool* target, const std::string& help);
  // A finite number (NaN and infinities do not parse).
  void Double(const std::string& name, double* target, const std::string& help);
  // May be given many times; each value is appended.
  void Repeated(const std::string& name, std::vector<std::string>* target, const std::string& help);

  // Parses argv[first..argc). Returns the positional arguments. InvalidArgument naming the flag for
  // an unknown flag, a missing value or a value that does not parse. `--help`/`-h` sets help().
  absl::StatusOr<std::vector<std::string>> Parse(int argc, char** argv, int first = 1);
  absl::StatusOr<std::vector<std::string>> Parse(const std::vector<std::string>& args);

  bool help() const { return help_; }
  // `--version` was given (every FlagSet accepts it; the binary prints its version and exits).
  bool version() const { return version_; }
  // Usage, description, and every flag with its help and default.
  std::string Help() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_value;
    bool is_bool = false;
    std::function<bool(const std::string&)> set;  // false when the value does not parse
  };
  const Flag* Find(const std::string& name) const;

  std::string usage_;
  std::string description_;
  std::vector<Flag> flags_;
  bool help_ = false;
  bool version_ = false;
};

}  // namespace meshrt

#endif  // MESHRT_UTIL_FLAGS_H_
