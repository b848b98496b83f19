// The database BLOB test helpers declared in blob_db_util.h.
#include "tests/support/blob_db_util.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "engine/page/blob_page.h"
#include "engine/record/relation.h"
#include "tests/support/status_matchers.h"

namespace ember::testing {

Scratch::Scratch() {
  std::string tmpl = "/dev/shm/ember-blob-XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  REQUIRE((!dir_.empty() || fallback_.ok()));
  db_ = File("test.edb");
}

Scratch::~Scratch() {
  std::error_code ec;  // best effort
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

BlobId WriteBlob(Transaction* t, std::string_view data) {
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

absl::StatusOr<std::string> ReadAllStatus(Transaction* t, BlobId id) {
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

std::string ReadAll(Transaction* t, BlobId id) { return VALUE_OR_FAIL(ReadAllStatus(t, id)); }

db::DatabaseImpl* Impl(Database* d) {
  auto* impl = dynamic_cast<db::DatabaseImpl*>(d);
  REQUIRE(impl != nullptr);
  return impl;
}

blob::BlobHeader HeaderOf(Database* d, BlobId id) {
  REQUIRE(id.value != 0);
  REQUIRE_FALSE(blob::IsTemp(id.value));
  record::Relation* rel = Impl(d)->RelationById(blob::IdRelation(id.value));
  REQUIRE(rel != nullptr);
  std::string body =
      VALUE_OR_FAIL(rel->ReadBlobRecord(blob::IdPage(id.value), blob::IdLine(id.value)));
  return VALUE_OR_FAIL(blob::DecodeBlobHeader(body));
}

int LevelOf(Database* d, BlobId id) { return HeaderOf(d, id).level; }

int ExpectedLevel(uint32_t page_size, uint64_t len) {
  if (len <= page_size / 4) return 0;
  const uint64_t cap = page::BlobPageCapacity(page_size);
  return (len + cap - 1) / cap <= page_size / 8 ? 1 : 2;
}

uint64_t TempAllocated(Database* d) { return Impl(d)->temp_space()->stats().bytes_allocated; }

TableSchema DocsSchema() {
  return TableSchema{"docs",
                     {{"id", ColumnType::kInt64, false},
                      {"name", ColumnType::kString, true},
                      {"body", ColumnType::kBlob, true}}};
}

Options BlobOptions(uint32_t page_size, int mode, uint32_t cache_pages) {
  Options o = CreateOptions(page_size, cache_pages);
  o.blob_temp_space = mode;
  o.forced_writes = false;
  return o;
}

BlobId FindBody(Transaction* t, const Table& table, int64_t key) {
  auto rows = VALUE_OR_FAIL(ScanAll(t, table));
  for (const auto& [rid, row] : rows) {
    if (std::get<int64_t>(row[0]) == key) return BodyOf(row);
  }
  FAIL("no row with id " << key);
  return {};
}

void RequireCleanValidate(Database* d, bool allow_unreachable) {
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
