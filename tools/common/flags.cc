// The tools' command-line parser (flags.h): why it does not use absl::ParseCommandLine is
// explained there.
#include "tools/common/flags.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tools/common/exit_codes.h"

namespace ember::tools {

namespace {

std::set<std::string>& GivenFlags() {
  static std::set<std::string> given;
  return given;
}

bool Known(const ToolSpec& spec, absl::string_view name) {
  for (std::string_view f : spec.flags) {
    if (f == std::string_view(name.data(), name.size())) return true;
  }
  return false;
}

}  // namespace

void UsageError(const ToolSpec& spec, std::string_view message) {
  std::fprintf(stderr, "%.*s: %.*s\nTry '%.*s --help'.\n", static_cast<int>(spec.name.size()),
               spec.name.data(), static_cast<int>(message.size()), message.data(),
               static_cast<int>(spec.name.size()), spec.name.data());
  std::exit(kExitUsage);
}

bool FlagGiven(std::string_view name) { return GivenFlags().count(std::string(name)) > 0; }

std::vector<std::string> ParseToolFlags(int argc, char** argv, const ToolSpec& spec) {
  std::vector<std::string> positional;
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      positional.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    if (arg == "--help" || arg == "-help" || arg == "-?" || arg == "--helpfull") {
      std::fwrite(spec.usage.data(), 1, spec.usage.size(), stdout);
      std::exit(kExitOk);
    }
    absl::string_view body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    absl::string_view name = body;
    std::optional<absl::string_view> value;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
    }
    absl::CommandLineFlag* flag = Known(spec, name) ? absl::FindCommandLineFlag(name) : nullptr;
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(name, "no") && !value) {
      // -nofull: a bool flag set to false (Abseil's spelling).
      absl::CommandLineFlag* f =
          Known(spec, name.substr(2)) ? absl::FindCommandLineFlag(name.substr(2)) : nullptr;
      if (f != nullptr && f->IsOfType<bool>()) {
        flag = f;
        negated = true;
        name = name.substr(2);
      }
    }
    if (flag == nullptr) UsageError(spec, absl::StrCat("unknown flag '", arg, "'"));
    std::string v;
    if (negated) {
      v = "false";
    } else if (value) {
      v = std::string(*value);
    } else if (flag->IsOfType<bool>()) {
      v = "true";
    } else if (i + 1 < argc) {
      v = argv[++i];  // Firebird style: -par 4
    } else {
      UsageError(spec, absl::StrCat("flag '", arg, "' needs a value"));
    }
    std::string error;
    if (!flag->ParseFrom(v, &error)) {
      UsageError(spec, absl::StrCat("bad value '", v, "' for flag '-", name, "': ", error));
    }
    GivenFlags().insert(std::string(name));
  }
  return positional;
}

}  // namespace ember::tools
