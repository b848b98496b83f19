// CreateFaultDb (fault_db.h): a new database over a FaultFile.
#include "tests/support/fault_db.h"

#include <utility>

#include "engine/io/file.h"
#include "tests/support/status_matchers.h"

namespace ember::testing {

FaultDb CreateFaultDb(const std::string& path, const Options& o) {
  io::FileOptions fo;
  fo.mode = io::OpenMode::kCreateNew;
  auto fault = std::make_unique<io::FaultFile>(VALUE_OR_FAIL(io::OpenPosixFile(path, fo)));
  FaultDb out;
  out.ff = fault.get();
  out.db = VALUE_OR_FAIL(db::DatabaseImpl::OpenFile(std::move(fault), o, /*create=*/true));
  return out;
}

}  // namespace ember::testing
