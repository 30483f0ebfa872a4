#include "util/flags.h"

#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/closest_name.h"

namespace meshrt {

FlagSet::FlagSet(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {}

void FlagSet::String(const std::string& name, std::string* target, const std::string& help) {
  flags_.push_back({name, help, *target, false, [target](const std::string& v) {
                      *target = v;
                      return true;
                    }});
}

void FlagSet::Int(const std::string& name, int64_t* target, const std::string& help) {
  flags_.push_back({name, help, absl::StrCat(*target), false,
                    [target](const std::string& v) { return absl::SimpleAtoi(v, target); }});
}

void FlagSet::Double(const std::string& name, double* target, const std::string& help) {
  flags_.push_back({name, help, absl::StrCat(*target), false, [target](const std::string& v) {
                      double d;
                      if (!absl::SimpleAtod(v, &d) || !std::isfinite(d)) return false;
                      *target = d;
                      return true;
                    }});
}

void FlagSet::Bool(const std::string& name, bool* target, const std::string& help) {
  flags_.push_back({name, help, *target ? "true" : "false", true,
                    [target](const std::string& v) { return absl::SimpleAtob(v, target); }});
}

void FlagSet::Repeated(const std::string& name, std::vector<std::string>* target,
                       const std::string& help) {
  flags_.push_back({name, help, absl::StrJoin(*target, ","), false, [target](const std::string& v) {
                      target->push_back(v);
                      return true;
                    }});
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(int argc, char** argv, int first) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) args.push_back(argv[i]);
  return Parse(args);
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional.insert(positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg == "--help" || arg == "-h" || arg == "-help") {
      help_ = true;
      continue;
    }
    if (arg == "--version") {
      version_ = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr && !has_value && name.rfind("no", 0) == 0) {
      const Flag* negated = Find(name.substr(2));
      if (negated != nullptr && negated->is_bool) {
        negated->set("false");
        continue;
      }
    }
    if (flag == nullptr) {
      std::set<std::string> names;
      for (const Flag& f : flags_) names.insert(f.name);
      const std::string closest = ClosestName(name, names);
      return absl::InvalidArgumentError(
          closest.empty()
              ? absl::StrCat("unknown flag --", name, " (see --help)")
              : absl::StrCat("unknown flag --", name, "; did you mean --", closest, "?"));
    }
    if (!has_value) {
      if (flag->is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
    }
    if (!flag->set(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, ": cannot parse '", value, "'"));
    }
  }
  return positional;
}

std::string FlagSet::Help() const {
  std::string out = absl::StrCat("usage: ", usage_, "\n\n", description_, "\n");
  if (!flags_.empty()) absl::StrAppend(&out, "\nflags:\n");
  for (const Flag& f : flags_) {
    absl::StrAppend(&out, "  --", f.name, f.is_bool ? "" : " VALUE", "\n      ", f.help);
    if (!f.default_value.empty()) absl::StrAppend(&out, " (default: ", f.default_value, ")");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace meshrt
