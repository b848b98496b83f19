// A new database over a FaultFile (engine/io/fault_file.h), for tests that inject I/O errors or
// a power loss into a running database through the engine's own handle.
#pragma once
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "engine/db/database_impl.h"
#include "engine/io/fault_file.h"
#include "tests/support/db_util.h"

namespace ember::testing {

struct FaultDb {
  io::FaultFile* ff = nullptr;            // owned by the database
  std::unique_ptr<db::DatabaseImpl> db;
};

// Creates the database file at `path` (pwrite path: options.use_io_uring is ignored by the
// fault file's hook either way) and opens it with `o`.
inline FaultDb CreateFaultDb(const std::string& path, const Options& o) {
  io::FileOptions fo;
  fo.mode = io::OpenMode::kCreateNew;
  auto fault = std::make_unique<io::FaultFile>(VALUE_OR_FAIL(io::OpenPosixFile(path, fo)));
  FaultDb out;
  out.ff = fault.get();
  out.db = VALUE_OR_FAIL(db::DatabaseImpl::OpenFile(std::move(fault), o, /*create=*/true));
  return out;
}

}  // namespace ember::testing
