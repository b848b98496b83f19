// Exit codes of every EmberDB tool (ember-stat, ember-fix, ember-bak), the same for all so that
// a script can test them without knowing which tool ran. Listed by each tool's --help and in
// docs/tools.md.
#pragma once

#include "absl/status/status.h"

namespace ember::tools {

enum ExitCode : int {
  kExitOk = 0,        // the work was done; nothing wrong was found
  kExitProblems = 1,  // the work was done and the database has problems (validate found
                      // errors, stat met unreadable pages): the output says which
  kExitUsage = 2,     // bad command line: unknown flag, bad value, missing database path
  kExitIo = 3,        // the database cannot be opened or read: missing, not an EmberDB file,
                      // unsupported format, I/O error, or the engine failed mid-way
  kExitInUse = 4,     // refused: another process (or handle) owns the database
};

// The exit code for a status that stopped a tool: "in use" (Unavailable, what Database::Open
// returns when another handle owns the file) is 4, every other failure 3.
inline int ExitCodeFor(const absl::Status& s) {
  if (s.ok()) return kExitOk;
  if (absl::IsUnavailable(s)) return kExitInUse;
  return kExitIo;
}

}  // namespace ember::tools
