// Tests of BLOB compression (Column::zstd_level; engine/blob/blob_codec.h): round trips of
// compressible and incompressible BLOBs across frame and level boundaries, seeks, the column
// setting persisted in the catalog and checked at CREATE, long bytes values compressed, copies
// between compressed and plain columns, freeing, rollback, corrupt frames, concurrent readers.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "engine/blob/blob_codec.h"
#include "engine/blob/blob_format.h"
#include "engine/blob/stored_blobs.h"
#include "engine/page/blob_page.h"
#include "engine/page/page.h"
#include "tests/support/blob_db_util.h"
#include "tests/support/blob_util.h"
#include "tests/support/db_util.h"

namespace ember::testing {
namespace {

// Text-like bytes: words from a small vocabulary with numbers, so zstd shrinks them several
// times over, and every offset still differs (a misplaced frame shows).
std::string Text(uint64_t seed, size_t n) {
  static const char* const kWords[] = {"record ", "version ", "page ",  "commit ", "blob ",
                                       "frame ",  "cache ",   "index ", "sweep ",  "lock "};
  std::string s;
  s.reserve(n + 32);
  uint64_t x = seed;
  for (uint64_t i = 0; s.size() < n; ++i) {
    const uint64_t r = ember::testing::SplitMix(&x);
    s += kWords[r % 10];
    if (r % 7 == 0) s += std::to_string(i) + "\n";
  }
  s.resize(n);
  return s;
}

TableSchema Schema(int level) {
  return TableSchema{"docs",
                     {{"id", ColumnType::kInt64, false},
                      {"name", ColumnType::kString, true, level},
                      {"body", ColumnType::kBlob, true, level}}};
}

// The data pages a stored BLOB occupies (list pages not counted).
size_t DataPages(Database* d, BlobId id) {
  blob::BlobHeader h = HeaderOf(d, id);
  std::vector<page::PageNo> data, lists;
  REQUIRE_OK(blob::DataPagesOf(Impl(d)->cache(), h, &data, &lists));
  return data.size();
}

TEST_CASE("blob compression: round trips across frame and level boundaries, after reopen",
          "[blob][compress]") {
  const uint32_t ps = 4096;
  const uint64_t f = blob::kFrameBytes;
  const std::vector<uint64_t> sizes = {
      1, 100,   ps / 4,     ps / 4 + 1, 5000,    f - 1,
      f, f + 1, 3 * f + 17, 1 << 20,    3u << 20};  // 3 MB incompressible: level 2 at 4096
  Scratch tdb;
  std::vector<std::string> data;
  std::vector<BlobId> ids;
  {
    std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, 1));
    Table docs = VALUE_OR_FAIL(db->CreateTable(Schema(3)));
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (int kind = 0; kind < 2; ++kind) {  // 0: text, 1: random bytes
        CAPTURE(sizes[i], kind);
        data.push_back(kind == 0 ? Text(i, sizes[i]) : Pattern(i, sizes[i]));
        const BlobId temp = WriteBlob(t.get(), data.back());
        const RecordId rid =
            VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(ids.size()), std::monostate{}, temp}));
        std::optional<Row> row = VALUE_OR_FAIL(t->Get(docs, rid));
        REQUIRE(row.has_value());
        const BlobId stored = BodyOf(*row);
        ids.push_back(stored);
        REQUIRE_BYTES(ReadAll(t.get(), stored), data.back());
        const blob::BlobHeader h = HeaderOf(db.get(), stored);
        REQUIRE(h.compressed);
        REQUIRE(h.length == sizes[i]);
        const uint64_t frames = blob::FrameCount(sizes[i], h.frame_bytes);
        if (kind == 1) {
          // Random bytes do not compress: every frame kept raw, only the table added.
          REQUIRE(h.stored_length == sizes[i] + 4 * frames);
        } else if (sizes[i] >= 5000) {
          REQUIRE(h.stored_length * 2 < sizes[i]);
        }
        // Levels follow the stored bytes: inline while they fit a quarter page, and so on.
        REQUIRE(h.level == ExpectedLevel(ps, h.stored_length));
        if (kind == 1 && sizes[i] == (3u << 20)) REQUIRE(h.level == 2);
      }
    }
    REQUIRE_OK(t->Commit());
    RequireCleanValidate(db.get());
    REQUIRE_OK(db->Close());
  }
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, 1));
  Table docs = VALUE_OR_FAIL(db->GetTable("docs"));
  REQUIRE(docs.schema().columns[2].zstd_level == 3);
  REQUIRE(docs.schema().columns[1].zstd_level == 3);
  REQUIRE(docs.schema().columns[0].zstd_level == 0);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  for (size_t i = 0; i < ids.size(); ++i) {
    CAPTURE(i);
    REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, int64_t(i))), data[i]);
  }
  REQUIRE_OK(t->Commit());
  RequireCleanValidate(db.get());
}

TEST_CASE("blob compression: random seeks and reads across frames", "[blob][compress]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(8192, 1));
  Table docs = VALUE_OR_FAIL(db->CreateTable(Schema(1)));
  // Half text, half random: frames of both kinds in one BLOB.
  const std::string data = Text(7, 700000) + Pattern(7, 300001);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const BlobId temp = WriteBlob(t.get(), data);
  const RecordId rid = VALUE_OR_FAIL(t->Insert(docs, Row{int64_t{1}, std::string("x"), temp}));
  REQUIRE_OK(t->Commit());

  t = VALUE_OR_FAIL(db->Begin());
  const BlobId id = BodyOf(*VALUE_OR_FAIL(t->Get(docs, rid)));
  REQUIRE(HeaderOf(db.get(), id).compressed);
  std::unique_ptr<BlobReader> r = VALUE_OR_FAIL(t->OpenBlob(id));
  REQUIRE(r->size() == data.size());
  std::mt19937_64 rng(42);
  std::string buf;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t pos = rng() % (data.size() + 1);
    // Mostly small reads, some spanning several frames.
    const size_t n = (i % 10 == 0) ? rng() % 300000 : rng() % 9000;
    REQUIRE_OK(r->Seek(pos));
    buf.resize(n);
    const size_t k = VALUE_OR_FAIL(r->Read(buf.data(), n));
    REQUIRE(k == std::min<uint64_t>(n, data.size() - pos));
    REQUIRE(r->position() == pos + k);
    if (std::string_view(buf.data(), k) != std::string_view(data).substr(pos, k)) {
      FAIL("read " << k << " bytes at " << pos << " differ");
    }
  }
  REQUIRE(IsError(r->Seek(data.size() + 1), absl::StatusCode::kOutOfRange));
  REQUIRE_OK(t->Commit());
}

TEST_CASE("blob compression: the column setting is checked at CREATE TABLE", "[blob][compress]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, 1));
  auto one = [](Column c) { return TableSchema{"t", {std::move(c)}}; };
  REQUIRE(IsError(db->CreateTable(one({"n", ColumnType::kInt64, true, 3})).status(),
                  absl::StatusCode::kInvalidArgument, "only BLOB, string and bytes"));
  REQUIRE(IsError(db->CreateTable(one({"d", ColumnType::kDouble, true, 1})).status(),
                  absl::StatusCode::kInvalidArgument));
  REQUIRE(IsError(db->CreateTable(one({"b", ColumnType::kBlob, true, 20})).status(),
                  absl::StatusCode::kInvalidArgument, "zstd_level 20"));
  REQUIRE(IsError(db->CreateTable(one({"b", ColumnType::kBlob, true, -1})).status(),
                  absl::StatusCode::kInvalidArgument, "zstd_level -1"));
  REQUIRE(db->TableNames().empty());
  Table ok = VALUE_OR_FAIL(db->CreateTable(one({"b", ColumnType::kBytes, false, 19})));
  REQUIRE(ok.schema().columns[0].zstd_level == 19);
  REQUIRE_FALSE(ok.schema().columns[0].nullable);
}

TEST_CASE("blob compression: long bytes values are stored compressed, short ones in the record",
          "[blob][compress]") {
  // The same rows in a compressed and a plain table of one database: the compressed one takes
  // far fewer pages, and both read back as plain strings.
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(8192, 1));
  auto schema = [](std::string name, int level) {
    return TableSchema{std::move(name),
                       {{"id", ColumnType::kInt64, false}, {"v", ColumnType::kBytes, true, level}}};
  };
  Table packed = VALUE_OR_FAIL(db->CreateTable(schema("packed", 6)));
  Table plain = VALUE_OR_FAIL(db->CreateTable(schema("plain", 0)));
  std::vector<std::string> values;
  for (int i = 0; i < 20; ++i) values.push_back(Text(100 + i, i % 4 == 0 ? 300 : 200000 + i));
  // How far each table's rows grow the file, one table per transaction (page_count grows in
  // preallocation steps, so only the ratio is checked).
  auto fill = [&](const Table& tab) {
    const uint64_t before = db->stats().page_count;
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (int i = 0; i < 20; ++i) REQUIRE_OK(t->Insert(tab, Row{int64_t{i}, values[i]}).status());
    REQUIRE_OK(t->Commit());
    return db->stats().page_count - before;
  };
  const uint64_t packed_pages = fill(packed);
  const uint64_t plain_pages = fill(plain);
  CAPTURE(packed_pages, plain_pages);
  REQUIRE(packed_pages * 2 < plain_pages);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  for (const Table* tab : {&packed, &plain}) {
    auto rows = VALUE_OR_FAIL(ScanAll(t.get(), *tab));
    REQUIRE(rows.size() == 20);
    for (const auto& [rid, row] : rows) {
      const int64_t i = std::get<int64_t>(row[0]);
      REQUIRE(std::holds_alternative<std::string>(row[1]));
      REQUIRE_BYTES(std::get<std::string>(row[1]), values[i]);
    }
  }
  REQUIRE_OK(t->Commit());
  RequireCleanValidate(db.get());
}

TEST_CASE("blob compression: BLOBs move between compressed and plain columns", "[blob][compress]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, 1));
  Table packed = VALUE_OR_FAIL(db->CreateTable(Schema(3)));
  TableSchema ps = Schema(0);
  ps.name = "plain";
  Table plain = VALUE_OR_FAIL(db->CreateTable(ps));
  const std::string a = Text(1, 300000), b = Pattern(2, 150000);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const RecordId ra =
      VALUE_OR_FAIL(t->Insert(packed, Row{int64_t{1}, std::monostate{}, WriteBlob(t.get(), a)}));
  const RecordId rb =
      VALUE_OR_FAIL(t->Insert(plain, Row{int64_t{2}, std::monostate{}, WriteBlob(t.get(), b)}));
  REQUIRE_OK(t->Commit());

  t = VALUE_OR_FAIL(db->Begin());
  const BlobId sa = BodyOf(*VALUE_OR_FAIL(t->Get(packed, ra)));
  const BlobId sb = BodyOf(*VALUE_OR_FAIL(t->Get(plain, rb)));
  REQUIRE(HeaderOf(db.get(), sa).compressed);
  REQUIRE_FALSE(HeaderOf(db.get(), sb).compressed);
  // Assigning a stored BLOB to another table's column stores a copy in that column's form.
  const RecordId ca = VALUE_OR_FAIL(t->Insert(plain, Row{int64_t{3}, std::monostate{}, sa}));
  const RecordId cb = VALUE_OR_FAIL(t->Insert(packed, Row{int64_t{4}, std::monostate{}, sb}));
  // A temporary BLOB built from both kinds, stored compressed.
  const BlobId both = VALUE_OR_FAIL(t->Concat(sa, sb));
  const BlobId both2 = VALUE_OR_FAIL(t->Concat(both, "tail"));
  const RecordId cc = VALUE_OR_FAIL(t->Insert(packed, Row{int64_t{5}, std::monostate{}, both2}));
  REQUIRE_OK(t->Commit());

  t = VALUE_OR_FAIL(db->Begin());
  const BlobId xa = BodyOf(*VALUE_OR_FAIL(t->Get(plain, ca)));
  const BlobId xb = BodyOf(*VALUE_OR_FAIL(t->Get(packed, cb)));
  const BlobId xc = BodyOf(*VALUE_OR_FAIL(t->Get(packed, cc)));
  REQUIRE_FALSE(HeaderOf(db.get(), xa).compressed);
  REQUIRE(HeaderOf(db.get(), xb).compressed);
  REQUIRE(HeaderOf(db.get(), xc).compressed);
  REQUIRE_BYTES(ReadAll(t.get(), xa), a);
  REQUIRE_BYTES(ReadAll(t.get(), xb), b);
  REQUIRE_BYTES(ReadAll(t.get(), xc), a + b + "tail");
  // The compressed text takes far fewer pages than its plain copy.
  REQUIRE(DataPages(db.get(), sa) * 3 < DataPages(db.get(), xa));
  REQUIRE_OK(t->Commit());
  RequireCleanValidate(db.get());
}

TEST_CASE("blob compression: delete, update and rollback give every page back",
          "[blob][compress]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, 2));
  Table docs = VALUE_OR_FAIL(db->CreateTable(Schema(5)));
  const uint64_t empty = db->stats().page_count;
  // Rolled back: nothing stays allocated.
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (int i = 0; i < 10; ++i) {
      REQUIRE_OK(
          t->Insert(docs, Row{int64_t{i}, Text(i, 50000), WriteBlob(t.get(), Text(i, 400000))})
              .status());
    }
    REQUIRE_OK(t->Rollback());
  }
  RequireCleanValidate(db.get());
  // Stored, then replaced and deleted: garbage collection frees the old BLOBs.
  std::vector<RecordId> rids;
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (int i = 0; i < 10; ++i) {
      rids.push_back(VALUE_OR_FAIL(
          t->Insert(docs, Row{int64_t{i}, Text(i, 50000), WriteBlob(t.get(), Text(i, 400000))})));
    }
    REQUIRE_OK(t->Commit());
  }
  const uint64_t full = db->stats().page_count;
  for (int round = 0; round < 5; ++round) {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (int i = 0; i < 10; ++i) {
      const std::string body = Text(1000 * round + i, 400000);
      REQUIRE_OK(
          t->Update(docs, rids[i], Row{int64_t{i}, Text(round, 50000), WriteBlob(t.get(), body)}));
    }
    REQUIRE_OK(t->Commit());
    REQUIRE_OK(db->CollectGarbage());
  }
  RequireCleanValidate(db.get());
  // Five rounds of replacement reuse the freed pages: the file does not grow fivefold.
  CAPTURE(empty, full, db->stats().page_count);
  REQUIRE(db->stats().page_count - empty < 3 * (full - empty));
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (const RecordId rid : rids) REQUIRE_OK(t->Delete(docs, rid));
    REQUIRE_OK(t->Commit());
  }
  REQUIRE_OK(db->CollectGarbage());
  ValidationReport rep = VALUE_OR_FAIL(db->Validate());
  REQUIRE(rep.ok());
  REQUIRE(rep.orphan_blobs.empty());
  REQUIRE(rep.unreachable_pages.empty());
}

TEST_CASE("blob compression: a corrupt frame or frame table is a DataLoss error",
          "[blob][compress]") {
  Scratch tdb;
  const uint32_t ps = 4096;
  std::vector<page::PageNo> pages;
  RecordId rid;
  {
    std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, 1));
    Table docs = VALUE_OR_FAIL(db->CreateTable(Schema(3)));
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    rid = VALUE_OR_FAIL(
        t->Insert(docs, Row{int64_t{1}, std::monostate{}, WriteBlob(t.get(), Text(3, 500000))}));
    REQUIRE_OK(t->Commit());
    t = VALUE_OR_FAIL(db->Begin());
    const blob::BlobHeader h = HeaderOf(db.get(), BodyOf(*VALUE_OR_FAIL(t->Get(docs, rid))));
    REQUIRE(h.level == 1);
    std::vector<page::PageNo> lists;
    REQUIRE_OK(blob::DataPagesOf(Impl(db.get())->cache(), h, &pages, &lists));
    REQUIRE(pages.size() >= 2);
    REQUIRE_OK(t->Commit());
    REQUIRE_OK(db->Close());
  }
  // Rewrites bytes of a page with a valid checksum (as a bug, not the disk, would).
  auto corrupt = [&](page::PageNo p, size_t at, std::string_view bytes) {
    std::string file = ember::testing::ReadFileBytes(tdb.path());
    auto* pg = reinterpret_cast<uint8_t*>(file.data() + uint64_t{p} * ps);
    std::memcpy(page::BlobData(pg) + at, bytes.data(), bytes.size());
    page::SealPage(pg, ps);
    ember::testing::WriteFileBytes(tdb.path(), file);
  };
  auto read = [&]() -> absl::Status {
    std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, 1));
    Table docs = VALUE_OR_FAIL(db->GetTable("docs"));
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    return ReadAllStatus(t.get(), BodyOf(*VALUE_OR_FAIL(t->Get(docs, rid)))).status();
  };
  REQUIRE_OK(read());
  SECTION("a frame that is not a zstd frame") {
    corrupt(pages[0], 0, "XXXX");  // the first frame's magic number
    REQUIRE(IsError(read(), absl::StatusCode::kDataLoss, "a frame does not decode"));
  }
  SECTION("a frame table that does not add up") {
    // The table is the last bytes of the stored stream, on the last page.
    std::string file = ember::testing::ReadFileBytes(tdb.path());
    const uint8_t* last =
        reinterpret_cast<const uint8_t*>(file.data() + uint64_t{pages.back()} * ps);
    const uint32_t used = page::BlobUsed(last);
    REQUIRE(used >= 4);
    corrupt(pages.back(), used - 4, std::string_view("\x01\x00\x00\x00", 4));
    REQUIRE(IsError(read(), absl::StatusCode::kDataLoss, "corrupt compressed BLOB"));
  }
}

TEST_CASE("blob compression: concurrent readers of one compressed BLOB", "[blob][compress]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(8192, 1));
  Table docs = VALUE_OR_FAIL(db->CreateTable(Schema(2)));
  const std::string data = Text(11, 1500000);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const RecordId rid =
      VALUE_OR_FAIL(t->Insert(docs, Row{int64_t{1}, std::monostate{}, WriteBlob(t.get(), data)}));
  REQUIRE_OK(t->Commit());
  ErrorLog log;
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      std::mt19937_64 rng(k);
      for (int round = 0; round < 5; ++round) {
        absl::StatusOr<std::unique_ptr<Transaction>> tx = db->Begin();
        if (!tx.ok()) return log.Add(tx.status().ToString());
        absl::StatusOr<std::optional<Row>> row = (*tx)->Get(docs, rid);
        if (!row.ok() || !row->has_value()) return log.Add("row not found");
        absl::StatusOr<std::unique_ptr<BlobReader>> r = (*tx)->OpenBlob(BodyOf(**row));
        if (!r.ok()) return log.Add(r.status().ToString());
        std::string buf(1 + rng() % 100000, '\0');
        const uint64_t pos = rng() % data.size();
        if (absl::Status s = (*r)->Seek(pos); !s.ok()) return log.Add(s.ToString());
        absl::StatusOr<size_t> n = (*r)->Read(buf.data(), buf.size());
        if (!n.ok()) return log.Add(n.status().ToString());
        if (std::string_view(buf.data(), *n) != std::string_view(data).substr(pos, *n)) {
          return log.Add(absl::StrCat("thread ", k, ": bytes at ", pos, " differ"));
        }
        if (absl::Status s = (*tx)->Commit(); !s.ok()) return log.Add(s.ToString());
      }
    });
  }
  for (auto& th : threads) th.join();
  RequireNoErrors(log);
}

TEST_CASE("blob compression: a BLOB written for a compressed column stays out of the pages",
          "[blob][compress]") {
  ScopedNoEmberTmp no_env;
  Scratch tdb;
  for (int mode : {0, 1}) {
    CAPTURE(mode);
    Options o = BlobOptions(4096, mode);
    o.temp_directories = {tdb.File("")};
    const std::string path = tdb.File(absl::StrCat("m", mode, ".edb"));
    std::unique_ptr<Database> db = OpenOrFail(path, o);
    Table docs = VALUE_OR_FAIL(db->CreateTable(Schema(3)));
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    REQUIRE(IsError(t->CreateBlob(docs, "nope").status(), absl::StatusCode::kNotFound, "nope"));
    REQUIRE(IsError(t->CreateBlob(docs, "id").status(), absl::StatusCode::kInvalidArgument,
                    "not a BLOB column"));
    REQUIRE(IsError(t->CreateBlob(Table(), "body").status(), absl::StatusCode::kInvalidArgument));
    const uint64_t pages_before = db->stats().page_count;
    std::unique_ptr<BlobWriter> w = VALUE_OR_FAIL(t->CreateBlob(docs, "body"));
    const std::string data = Text(9, 2000000);
    for (size_t off = 0; off < data.size(); off += 50000)
      REQUIRE_OK(w->Write(data.substr(off, 50000)));
    // Mode 1: the raw bytes are in temp space, not in database pages; mode 0 keeps them in
    // pages, as it keeps every temporary BLOB.
    if (mode == 1) {
      REQUIRE(TempAllocated(db.get()) >= data.size());
      REQUIRE(db->stats().page_count - pages_before < 50);
    } else {
      REQUIRE(TempAllocated(db.get()) == 0);
      REQUIRE(db->stats().page_count - pages_before >= data.size() / 4096);
    }
    const RecordId rid = VALUE_OR_FAIL(t->Insert(docs, Row{int64_t{1}, std::monostate{}, w->id()}));
    REQUIRE(TempAllocated(db.get()) == 0);
    const BlobId stored = BodyOf(*VALUE_OR_FAIL(t->Get(docs, rid)));
    REQUIRE(HeaderOf(db.get(), stored).compressed);
    REQUIRE(DataPages(db.get(), stored) * 4 < data.size() / 4096);
    REQUIRE_BYTES(ReadAll(t.get(), stored), data);
    REQUIRE_OK(t->Commit());
    RequireCleanValidate(db.get());
    REQUIRE_OK(db->Close());
  }
}

TEST_CASE("blob compression: frame codec checks what it decodes", "[blob][compress]") {
  blob::FrameCompressor c;
  blob::FrameDecompressor d;
  const std::string text = Text(5, 50000), noise = Pattern(5, 50000);
  std::string stored;
  const uint32_t et = VALUE_OR_FAIL(c.Compress(3, text, &stored));
  REQUIRE((et & blob::kRawFrame) == 0);
  REQUIRE(et == stored.size());
  REQUIRE(et < text.size() / 2);
  const uint32_t en = VALUE_OR_FAIL(c.Compress(3, noise, &stored));
  REQUIRE(en == (noise.size() | blob::kRawFrame));
  std::string out;
  REQUIRE_OK(d.Decompress(std::string_view(stored).substr(0, et), false, text.size(), &out));
  REQUIRE(out == text);
  REQUIRE_OK(d.Decompress(std::string_view(stored).substr(et), true, noise.size(), &out));
  REQUIRE(out == noise);
  // The wrong size, a truncated frame, a raw frame of the wrong length.
  REQUIRE(
      IsError(d.Decompress(std::string_view(stored).substr(0, et), false, text.size() - 1, &out),
              absl::StatusCode::kDataLoss));
  REQUIRE(
      IsError(d.Decompress(std::string_view(stored).substr(0, et - 1), false, text.size(), &out),
              absl::StatusCode::kDataLoss));
  REQUIRE(IsError(d.Decompress(noise.substr(1), true, noise.size(), &out),
                  absl::StatusCode::kDataLoss));
  // Frame tables: entries larger than their frame, zero, or not filling the stored size.
  std::string table;
  blob::FrameCompressor::AppendTable({et, en}, &table);
  const uint64_t len = 2 * 50000;
  REQUIRE_OK(blob::DecodeFrameTable(table, len, et + noise.size() + 8, 50000).status());
  REQUIRE(IsError(blob::DecodeFrameTable(table, len, et + noise.size() + 9, 50000).status(),
                  absl::StatusCode::kDataLoss));
  REQUIRE(IsError(blob::DecodeFrameTable(table, len + 50000, et + noise.size() + 8, 50000).status(),
                  absl::StatusCode::kDataLoss));
  REQUIRE(IsError(blob::DecodeFrameTable(table, len, et + noise.size() + 8, 100).status(),
                  absl::StatusCode::kDataLoss));
  std::string zero;
  blob::FrameCompressor::AppendTable({0, en}, &zero);
  REQUIRE(IsError(blob::DecodeFrameTable(zero, len, noise.size() + 8, 50000).status(),
                  absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace ember::testing
