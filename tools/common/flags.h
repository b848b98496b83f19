// Command-line parsing shared by the tools. Flags are Abseil flags (ABSL_FLAG in each tool's
// main file), but the command line is not handed to absl::ParseCommandLine: that one exits
// with 1 both for --help and for an unknown flag, and a script must be able to tell a usage
// error (exit 2) from a database with problems (exit 1). So this parser walks argv itself and
// sets each flag through absl::CommandLineFlag::ParseFrom (Abseil's own value parsing).
//
// Accepted forms, with one dash or two, as Firebird's gstat/gfix and Abseil both write them:
//   -name / --name             a bool flag set to true (-noname: false)
//   -name=value / --name=value
//   -name value / --name value (not for bool flags: "-full x" leaves x a positional argument)
//   --                         everything after it is positional
// --help, -help and -? print the tool's usage and exit 0. `-h` is NOT help: gstat's -h is the
// header page, and ember-stat keeps it; the other tools reject -h as an unknown flag.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ember::tools {

struct ToolSpec {
  std::string_view name;   // "ember-stat"
  std::string_view usage;  // the whole --help text (usage line, flags, exit codes)
  // The flags this tool takes (names of ABSL_FLAGs it defines). Any other name is a usage
  // error, also Abseil's own flags (they are linked in but mean nothing here).
  std::vector<std::string_view> flags;
};

// Parses argv into the tool's Abseil flags and returns the positional arguments (argv[0]
// excluded). Exits the process: 0 after printing the usage for --help, 2 (kExitUsage) with a
// message on stderr for a usage error.
std::vector<std::string> ParseToolFlags(int argc, char** argv, const ToolSpec& spec);

// Prints "NAME: message" and "Try 'NAME --help'." on stderr and exits with kExitUsage.
[[noreturn]] void UsageError(const ToolSpec& spec, std::string_view message);

// Whether the flag was given on the command line (even with its default value).
bool FlagGiven(std::string_view name);

}  // namespace ember::tools
