// libFuzzer target: a damaged page in a database, met on every read path. A small database
// (a table with an index, updated and deleted rows with back versions and deltas, BLOBs inline
// and in pages, a compressed BLOB column) is made once; each input picks a page and overwrites
// or flips bytes of it, either leaving the checksum to catch it or sealing the page again (page
// number and checksum made right, as a bug or a device that checksums could leave it), so the
// decoders behind the checksum see the bytes. Then: open, Validate, scan every table, read
// every BLOB, look keys up, write and commit, close. Any of them may fail with an error;
// nothing may crash, hang or fail a sanitizer check.
#include <cstring>
#include <filesystem>

#include "ember/ember.h"
#include "engine/page/page.h"
#include "engine/util/coding.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/template_db.h"

using namespace ember;

namespace {

constexpr uint32_t kPageSize = 4096;

Options FuzzOptions() {
  Options o = fuzz::SmallDbOptions(32);
  o.gc_policy = GcPolicy::kCooperative;  // one thread: a finding replays exactly
  return o;
}

const std::string& Template() {
  static const std::string bytes =
      fuzz::MakeTemplateDb(fuzz::ScratchDir() + "/template.edb", FuzzOptions(), {150, 10, 400});
  return bytes;
}

void Exercise(const std::string& path, bool write) {
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path, FuzzOptions());
  if (!db.ok()) return;
  (void)(*db)->Validate();
  absl::StatusOr<Table> t = (*db)->GetTable("t");
  absl::StatusOr<Index> by_id = (*db)->GetIndex("t_id");
  absl::StatusOr<Index> by_s = (*db)->GetIndex("t_s");
  if (t.ok()) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = (*db)->Begin();
    if (tx.ok()) {
      absl::StatusOr<std::unique_ptr<Cursor>> c = (*tx)->Scan(*t);
      for (int n = 0; c.ok() && (*c)->Valid() && n < 1000; ++n) {
        const Row& row = (*c)->row();
        if (row.size() > 2) {
          if (const BlobId* b = std::get_if<BlobId>(&row[2])) {
            absl::StatusOr<std::unique_ptr<BlobReader>> r = (*tx)->OpenBlob(*b);
            char buf[8192];
            while (r.ok()) {
              absl::StatusOr<size_t> got = (*r)->Read(buf, sizeof buf);
              if (!got.ok() || *got == 0) break;
            }
          }
        }
        if (!(*c)->Next().ok()) break;
      }
      if (c.ok()) c->reset();  // the table cursor ends before the index scans
      for (const absl::StatusOr<Index>* ix : {&by_id, &by_s}) {
        if (!ix->ok()) continue;
        absl::StatusOr<std::unique_ptr<Cursor>> s = (*tx)->IndexScan(**ix, {}, {});
        for (int n = 0; s.ok() && (*s)->Valid() && n < 1000; ++n) {
          if (!(*s)->Next().ok()) break;
        }
      }
      if (by_id.ok()) {
        for (int64_t k : {0, 3, 75, 149}) (void)(*tx)->Lookup(*by_id, {k});
      }
      if (write) {
        absl::StatusOr<RecordId> id =
            (*tx)->Insert(*t, Row{int64_t{1000}, "new", std::monostate{}});
        if (id.ok()) (void)(*tx)->Update(*t, *id, Row{int64_t{1001}, "newer", std::monostate{}});
        (void)(*tx)->Commit();
      } else {
        (void)(*tx)->Rollback();
      }
    }
  }
  (void)(*db)->Close();
}

std::vector<std::string> Seeds() {
  // One seed per page type met first: the page overwritten with itself, sealed.
  const std::string& tpl = Template();
  std::vector<std::string> out;
  std::vector<uint8_t> seen(256, 0);
  for (size_t p = 0; p * kPageSize < tpl.size(); ++p) {
    const uint8_t type = static_cast<uint8_t>(tpl[p * kPageSize]);
    if (seen[type]++ >= 2) continue;
    std::string s;
    s += static_cast<char>(p & 0xFF);
    s += static_cast<char>(p >> 8);
    s += '\x01';                // sealed, overwrite, read only
    s += std::string(2, '\0');  // at offset 0
    s += tpl.substr(p * kPageSize, kPageSize);
    out.push_back(s);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (std::getenv("EMBER_FUZZ_MAKE_SEEDS") != nullptr) fuzz::MaybeWriteSeeds(Seeds());
  (void)Template();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& tpl = Template();
  const size_t pages = tpl.size() / kPageSize;
  fuzz::Input in(data, size);
  const uint32_t lo = in.Byte();
  const uint32_t p = (lo | (uint32_t{in.Byte()} << 8)) % pages;
  const uint8_t flags = in.Byte();
  const bool seal = flags & 1, flip = flags & 2, write = flags & 4;
  const uint32_t lo_off = in.Byte();
  const uint32_t off = (lo_off | (uint32_t{in.Byte()} << 8)) % kPageSize;
  const std::string_view bytes = in.Bytes(kPageSize - off);
  std::string file = tpl;
  uint8_t* page = reinterpret_cast<uint8_t*>(file.data()) + size_t{p} * kPageSize;
  for (size_t i = 0; i < bytes.size(); ++i) {
    page[off + i] =
        flip ? page[off + i] ^ static_cast<uint8_t>(bytes[i]) : static_cast<uint8_t>(bytes[i]);
  }
  if (seal) {
    util::Put32(page + page::hdr::kPageNo, p);
    util::Put32(page + page::hdr::kChecksum, page::ComputeChecksum(page, kPageSize));
  }
  const std::string path = fuzz::ScratchDir() + "/damaged.edb";
  fuzz::WriteFile(path, file);
  Exercise(path, write);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  return 0;
}
