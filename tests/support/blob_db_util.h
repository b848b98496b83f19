// Catch2 helpers shared by the BLOB tests that open databases (blob/blob_test.cc,
// blob/blob_compress_test.cc): a scratch directory, writing and reading BLOBs in odd segment
// sizes, header-record inspection, and a clean-Validate assertion.
//
// Header-only on purpose: tests/CMakeLists.txt compiles only *_test.cc files.
#pragma once
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "engine/page/blob_page.h"
#include "engine/record/relation.h"
#include "tests/support/blob_util.h"
#include "tests/support/db_util.h"

namespace ember::testing {

// A scratch directory (mkdtemp; removed with its contents at the end) on /dev/shm when there is
// one, else where TempDir puts it. Durability is not what these tests measure (the crash test
// simulates it in io::FaultFile), and on a real disk the fsyncs of tens of MB at Close would
// dominate the runtime. path() names a database file in it.
class Scratch {
 public:
  Scratch() {
    std::string tmpl = "/dev/shm/ember-blob-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
    REQUIRE((!dir_.empty() || fallback_.ok()));
    db_ = File("test.edb");
  }
  ~Scratch() {
    std::error_code ec;  // best effort
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
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
inline BlobId WriteBlob(Transaction* t, std::string_view data) {
  std::unique_ptr<BlobWriter> w = VALUE_OR_FAIL(t->CreateBlob());
  size_t off = 0, i = 0;
  while (off < data.size()) {
    const size_t n = std::min(kSegments[i++ % std::size(kSegments)], data.size() - off);
    REQUIRE_OK(w->Write(data.substr(off, n)));
    off += n;
  }
  REQUIRE_OK(w->Write({}));  // an empty segment is fine
  const BlobId id = w->id();
  REQUIRE(blob::IsTemp(id.value));
  return id;
}

// Every byte of BLOB `id`, read through a BlobReader in segments of odd sizes.
inline absl::StatusOr<std::string> ReadAllStatus(Transaction* t, BlobId id) {
  absl::StatusOr<std::unique_ptr<BlobReader>> r = t->OpenBlob(id);
  if (!r.ok()) return r.status();
  const uint64_t size = (*r)->size();
  std::string out(size, '\0');
  uint64_t pos = 0;
  for (size_t i = 0; pos < size; ++i) {
    const size_t n = kSegments[i % std::size(kSegments)];
    absl::StatusOr<size_t> k = (*r)->Read(out.data() + pos, std::min<uint64_t>(n, size - pos));
    if (!k.ok()) return k.status();
    if (*k == 0) return absl::InternalError(absl::StrCat("Read returned 0 at ", pos, " of ", size));
    pos += *k;
    if ((*r)->position() != pos) return absl::InternalError("position() does not follow Read");
  }
  char c;
  absl::StatusOr<size_t> k = (*r)->Read(&c, 1);
  if (!k.ok()) return k.status();
  if (*k != 0) return absl::InternalError("Read past the end returned bytes");
  return out;
}

inline std::string ReadAll(Transaction* t, BlobId id) {
  return VALUE_OR_FAIL(ReadAllStatus(t, id));
}

// Compares without printing megabytes on failure.
#define REQUIRE_BYTES(actual, expected)                                                   \
  do {                                                                                    \
    const std::string& _a = (actual);                                                     \
    const std::string& _e = (expected);                                                   \
    if (_a != _e) {                                                                       \
      size_t _i = 0;                                                                      \
      while (_i < _a.size() && _i < _e.size() && _a[_i] == _e[_i]) ++_i;                  \
      FAIL(#actual << " differs from " << #expected << ": sizes " << _a.size() << " / "   \
                   << _e.size() << ", first difference at " << _i);                       \
    }                                                                                     \
  } while (0)

inline db::DatabaseImpl* Impl(Database* d) {
  auto* impl = dynamic_cast<db::DatabaseImpl*>(d);
  REQUIRE(impl != nullptr);
  return impl;
}

// The header record of stored BLOB `id`.
inline blob::BlobHeader HeaderOf(Database* d, BlobId id) {
  REQUIRE(id.value != 0);
  REQUIRE_FALSE(blob::IsTemp(id.value));
  record::Relation* rel = Impl(d)->RelationById(blob::IdRelation(id.value));
  REQUIRE(rel != nullptr);
  std::string body =
      VALUE_OR_FAIL(rel->ReadBlobRecord(blob::IdPage(id.value), blob::IdLine(id.value)));
  return VALUE_OR_FAIL(blob::DecodeBlobHeader(body));
}

// The level of stored BLOB `id` (0 inline, 1 page list, 2 list pages).
inline int LevelOf(Database* d, BlobId id) { return HeaderOf(d, id).level; }

inline int ExpectedLevel(uint32_t page_size, uint64_t len) {
  if (len <= page_size / 4) return 0;
  const uint64_t cap = page::BlobPageCapacity(page_size);
  return (len + cap - 1) / cap <= page_size / 8 ? 1 : 2;
}

inline uint64_t TempAllocated(Database* d) {
  return Impl(d)->temp_space()->stats().bytes_allocated;
}

inline TableSchema DocsSchema() {
  return TableSchema{"docs",
                     {{"id", ColumnType::kInt64, false},
                      {"name", ColumnType::kString, true},
                      {"body", ColumnType::kBlob, true}}};
}

// Without forced writes: with them every eviction of a page whose prerequisite (its PIP) was
// written since the last sync costs an fsync (careful write), and only the crash test needs that.
inline Options BlobOptions(uint32_t page_size, int mode, uint32_t cache_pages = 256) {
  Options o = CreateOptions(page_size, cache_pages);
  o.blob_temp_space = mode;
  o.forced_writes = false;
  return o;
}

inline BlobId BodyOf(const Row& row) { return std::get<BlobId>(row[2]); }

// The BLOB of the row with id `key` as `t` sees it.
inline BlobId FindBody(Transaction* t, const Table& table, int64_t key) {
  auto rows = VALUE_OR_FAIL(ScanAll(t, table));
  for (const auto& [rid, row] : rows) {
    if (std::get<int64_t>(row[0]) == key) return BodyOf(row);
  }
  FAIL("no row with id " << key);
  return {};
}

inline void RequireCleanValidate(Database* d, bool allow_unreachable = false) {
  ValidationReport rep = VALUE_OR_FAIL(d->Validate());
  INFO("errors: " << rep.errors.size() << (rep.errors.empty() ? "" : " first: " + rep.errors[0]));
  REQUIRE(rep.ok());
  if (!allow_unreachable) {
    INFO("unreachable pages: " << rep.unreachable_pages.size()
                               << (rep.unreachable_pages.empty()
                                       ? ""
                                       : " first: " + std::to_string(rep.unreachable_pages[0])));
    REQUIRE(rep.unreachable_pages.empty());
    // Without a crash every stored BLOB is named by a version or was freed with the last one.
    INFO("orphan BLOBs: " << rep.orphan_blobs.size());
    REQUIRE(rep.orphan_blobs.empty());
  }
}

}  // namespace ember::testing
