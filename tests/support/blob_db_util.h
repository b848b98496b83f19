// Helpers for the tests that store BLOBs in a database (blob/, backup/): a scratch directory on
// /dev/shm, writing and reading BLOBs in odd segment sizes, header-record inspection, the
// options and the docs table of the BLOB tests, and a clean-Validate assertion.
#pragma once
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ember/ember.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "tests/support/blob_util.h"
#include "tests/support/db_util.h"
#include "tests/support/temp_dir.h"

namespace ember::testing {

// A scratch directory (mkdtemp; removed with its contents at the end) on /dev/shm when there is
// one, else where TempDir puts it. Durability is not what these tests measure (the crash test
// simulates it in io::FaultFile), and on a real disk the fsyncs of tens of MB at Close would
// dominate the runtime. path() names a database file in it.
class Scratch {
 public:
  Scratch();
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string File(const std::string& name) const {
    return dir_.empty() ? fallback_.File(name) : dir_ + "/" + name;
  }
  const std::string& path() const { return db_; }

 private:
  std::string dir_;
  TempDir fallback_;
  std::string db_;
};

// Odd segment sizes, cycled by writers and readers.
inline constexpr size_t kSegments[] = {1, 7, 4093, 65536, 13, 4096, 100003, 1 << 20, 4064, 3};

// A new temporary BLOB written through a BlobWriter in segments of odd sizes.
BlobId WriteBlob(Transaction* t, std::string_view data);

// Every byte of BLOB `id`, read through a BlobReader in segments of odd sizes.
absl::StatusOr<std::string> ReadAllStatus(Transaction* t, BlobId id);
std::string ReadAll(Transaction* t, BlobId id);

// Compares without printing megabytes on failure.
#define REQUIRE_BYTES(actual, expected)                                                 \
  do {                                                                                  \
    const std::string& _a = (actual);                                                   \
    const std::string& _e = (expected);                                                 \
    if (_a != _e) {                                                                     \
      size_t _i = 0;                                                                    \
      while (_i < _a.size() && _i < _e.size() && _a[_i] == _e[_i]) ++_i;                \
      FAIL(#actual << " differs from " << #expected << ": sizes " << _a.size() << " / " \
                   << _e.size() << ", first difference at " << _i);                     \
    }                                                                                   \
  } while (0)

db::DatabaseImpl* Impl(Database* d);

// The header record of stored BLOB `id`.
blob::BlobHeader HeaderOf(Database* d, BlobId id);

// The level of stored BLOB `id` (0 inline, 1 page list, 2 list pages).
int LevelOf(Database* d, BlobId id);

// The level a BLOB of `len` bytes gets at `page_size`.
int ExpectedLevel(uint32_t page_size, uint64_t len);

// Bytes the database's temp space holds now.
uint64_t TempAllocated(Database* d);

// docs(id int64 NOT NULL, name string, body BLOB).
TableSchema DocsSchema();

// Without forced writes: with them every eviction of a page whose prerequisite (its PIP) was
// written since the last sync costs an fsync (careful write), and only the crash test needs that.
Options BlobOptions(uint32_t page_size, int mode, uint32_t cache_pages = 256);

inline BlobId BodyOf(const Row& row) { return std::get<BlobId>(row[2]); }

// The BLOB of the row with id `key` as `t` sees it.
BlobId FindBody(Transaction* t, const Table& table, int64_t key);

// Validate finds no error and, unless `allow_unreachable`, no unreachable page and no orphan BLOB.
void RequireCleanValidate(Database* d, bool allow_unreachable = false);

}  // namespace ember::testing
