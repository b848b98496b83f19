// libFuzzer target: the backup stream reader, end to end through ember::Restore. Two kinds of
// input (the first byte): a whole backup file as bytes (the file header and frame checks), or
// a list of frames (type, flags, payload) that the target writes as a well-formed file, with
// true checksums and sequence numbers, so the fuzzer reaches what is inside them: the catalog,
// portable rows, BLOB pieces and the end frame's totals. A restore either fails with an error
// and leaves nothing at the path, or makes a database that opens and validates clean.
#include <filesystem>

#include "ember/ember.h"
#include "engine/backup/backup_format.h"
#include "engine/db/database_impl.h"
#include "tests/fuzz/fuzz_util.h"

using namespace ember;

namespace {

Options FuzzOptions() {
  Options o = fuzz::SmallDbOptions(64);
  o.doublewrite = false;
  return o;
}

// A well-formed file of the frames the input lists: u8 type, u8 flags, u16 length, payload.
std::string FramesToFile(fuzz::Input* in, const std::string& path) {
  absl::StatusOr<std::unique_ptr<backup::FrameFile>> f =
      backup::FrameFile::Create(path, backup::FileHeader{});
  FUZZ_CHECK(f.ok(), f.status().ToString());
  for (int n = 0; n < 64 && !in->empty(); ++n) {
    const auto type = static_cast<backup::FrameType>(in->Byte() % 5);  // 0 is not a type
    const uint16_t flags = in->Byte() & 3;
    const uint16_t len = static_cast<uint16_t>(in->Byte() | (in->Byte() << 8));
    absl::StatusOr<backup::EncodedFrame> e =
        backup::EncodeFrame(type, flags, in->Bytes(len), /*level=*/1);
    FUZZ_CHECK(e.ok(), e.status().ToString());
    FUZZ_CHECK((*f)->Write(std::move(*e)).ok(), "frame write");
  }
  absl::StatusOr<uint64_t> size = (*f)->Finish();
  FUZZ_CHECK(size.ok(), size.status().ToString());
  return path;
}

void RestoreAndCheck(const std::string& backup_path, int workers) {
  const std::string db_path = fuzz::ScratchDir() + "/restored.edb";
  std::error_code ec;
  std::filesystem::remove(db_path, ec);
  RestoreOptions ro;
  ro.workers = workers;
  absl::StatusOr<RestoreResult> r = Restore(backup_path, db_path, FuzzOptions(), ro);
  if (!r.ok()) {
    FUZZ_CHECK(!std::filesystem::exists(db_path),
               "a failed restore left a database behind: " + r.status().ToString());
    FUZZ_CHECK(!absl::IsInternal(r.status()), r.status().ToString());
    return;
  }
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(db_path, FuzzOptions());
  FUZZ_CHECK(db.ok(), "a restored database does not open: " + db.status().ToString());
  absl::StatusOr<ValidationReport> rep = (*db)->Validate();
  FUZZ_CHECK(rep.ok(), rep.status().ToString());
  FUZZ_CHECK(rep->ok(), "a restored database does not validate: " + rep->errors[0]);
  FUZZ_CHECK((*db)->Close().ok(), "close");
  std::filesystem::remove(db_path, ec);
}

// The frame list (input kind 1) of backup file `bak`. `legacy_empty_blobs`: added to the end
// frame's BLOB count, as builds that stored BLOBs of no bytes as records counted them.
std::string FrameList(const std::string& bak, uint64_t legacy_empty_blobs) {
  std::string frames(1, '\1');
  std::unique_ptr<backup::FrameReader> r = fuzz::Must(backup::FrameReader::Open(bak), "open");
  backup::FrameHeader h;
  std::string stored, raw;
  while (fuzz::Must(r->Next(&h, &stored), "frame")) {
    fuzz::MustOk(backup::DecodePayload(h, stored, &raw, r->Where()), "payload");
    if (h.type == backup::FrameType::kEnd && legacy_empty_blobs > 0) {
      backup::EndTotals e = fuzz::Must(backup::DecodeEnd(raw), "end frame");
      e.blobs += legacy_empty_blobs;
      raw = backup::EncodeEnd(e);
    }
    frames += static_cast<char>(h.type);
    frames += static_cast<char>(h.flags);
    const uint16_t len = static_cast<uint16_t>(std::min<size_t>(raw.size(), 65535));
    frames += static_cast<char>(len & 0xFF);
    frames += static_cast<char>(len >> 8);
    frames += raw.substr(0, len);
  }
  return frames;
}

// Seeds: a small database with every column type, NULLs, BLOBs (of no bytes too: records an
// earlier build stored, and the empty BLOB), a unique index, and inactive indexes over data
// they would refuse (a unique one over duplicate keys, one over a key longer than the
// maximum), backed up; the file as it is (kind 0), as the frame list it holds (kind 1), and
// that list with the end frame an earlier build wrote (its records of no bytes counted).
std::vector<std::string> Seeds() {
  const std::string db_path = fuzz::ScratchDir() + "/seed.edb";
  const std::string bak = fuzz::ScratchDir() + "/seed.bak";
  Options o = FuzzOptions();
  o.create_if_missing = true;
  std::unique_ptr<Database> db = fuzz::Must(Database::Open(db_path, o), "create");
  auto* impl = static_cast<db::DatabaseImpl*>(db.get());
  Table t = fuzz::Must(db->CreateTable({"t",
                                        {{"id", ColumnType::kInt64, false},
                                         {"s", ColumnType::kString},
                                         {"d", ColumnType::kDouble},
                                         {"b", ColumnType::kBytes},
                                         {"blob", ColumnType::kBlob}}}),
                       "CreateTable");
  fuzz::Must(db->CreateIndex({"t_id", "t", {"id"}, true}), "CreateIndex");
  fuzz::Must(db->CreateIndex({"t_b", "t", {"b"}, true}), "CreateIndex");
  fuzz::Must(db->CreateIndex({"t_s", "t", {"s"}, false}), "CreateIndex");
  fuzz::MustOk(db->SetIndexActive("t_b", false), "SetIndexActive");
  fuzz::MustOk(db->SetIndexActive("t_s", false), "SetIndexActive");
  fuzz::Must(db->CreateTable({"empty", {{"x", ColumnType::kInt64}}}), "CreateTable");
  std::unique_ptr<Transaction> tx = fuzz::Must(db->Begin(), "Begin");
  uint64_t empty_records = 0;
  for (int64_t i = 0; i < 20; ++i) {
    // Rows 0 and 10: a BLOB of no bytes stored as a record, as earlier builds did.
    impl->TEST_store_empty_blobs = i % 10 == 0;
    empty_records += i % 10 == 0;
    std::unique_ptr<BlobWriter> w = fuzz::Must(tx->CreateBlob(t, "blob"), "CreateBlob");
    const size_t len = i % 10 == 0 ? 0 : static_cast<size_t>(i * 37);
    fuzz::MustOk(w->Write(std::string(len, static_cast<char>('a' + i))), "BLOB write");
    // b repeats (the inactive unique t_b has duplicates); one s is over the longest key.
    Row row{i, "row " + std::to_string(i), i * 0.5, std::string(i % 3, '\x01'), w->id()};
    if (i % 4 == 0) row[1] = std::monostate{};
    if (i == 7) row[1] = std::string(db->max_key_size() + 10, 'k');
    fuzz::Must(tx->Insert(t, row), "Insert");
  }
  impl->TEST_store_empty_blobs = false;
  fuzz::MustOk(tx->Commit(), "Commit");
  tx.reset();
  fuzz::Must(db->Backup(bak), "Backup");
  fuzz::MustOk(db->Close(), "Close");
  db.reset();

  return {std::string(1, '\0') + fuzz::ReadFile(bak), FrameList(bak, 0),
          FrameList(bak, empty_records)};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (std::getenv("EMBER_FUZZ_MAKE_SEEDS") != nullptr) fuzz::MaybeWriteSeeds(Seeds());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t kind = in.Byte();
  const int workers = 1 + (kind >> 7);
  const std::string path = fuzz::ScratchDir() + "/input.bak";
  if ((kind & 1) == 0) {
    fuzz::WriteFile(path, in.Rest());
  } else {
    FramesToFile(&in, path);
  }
  RestoreAndCheck(path, workers);
  return 0;
}
