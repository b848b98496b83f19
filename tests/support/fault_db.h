// A new database over a FaultFile (fault_file.h), for tests that inject I/O errors or a power
// loss into a running database through the engine's own handle (db/index_build_test.cc,
// db/sweep_test.cc).
#pragma once
#include <memory>
#include <string>

#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "tests/support/fault_file.h"

namespace ember::testing {

struct FaultDb {
  io::FaultFile* ff = nullptr;  // owned by the database
  std::unique_ptr<db::DatabaseImpl> db;
};

// Creates the database file at `path` (pwrite path: options.use_io_uring is ignored by the
// fault file's hook either way) and opens it with `o`.
FaultDb CreateFaultDb(const std::string& path, const Options& o);

}  // namespace ember::testing
