// bench/blob_store: files stored as a bytes column, as a striped table or as a BLOB, on EmberDB
// and on SQLite doing the same work in the same run. The three layouts are those of the
// PostgreSQL comparison of BYTEA, BYTEA cut into segments, and large objects (LOB): one value
// per file, one row per segment of a file, or a value streamed through a handle.
//
//   tools/dev bench blob_store [--mb_per_class=N] [--segment=S[,S...]] [--buffer=B[,B...]]
//                              [--layouts=bytes,striped,blob] [--classes=very_small,...]
//                              [--runs=N] [--seed=N] [--sqlite_journal=delete|wal]
//                              [--sqlite_secure_delete=0|1] [--forced_writes=0|1]
//                              [--content=random|text] [--zstd_level=0..19]
//                              [common flags, see bench/util/bench_util.h]
//                              [--benchmark_filter=... --benchmark_out=x.json ...]
//
// Files: random bytes from a seeded generator, kept in memory (never timed), in four size
// classes of about --mb_per_class MB each (MB = 2^20 bytes; files are added until the class
// holds at least that much):
//   very_small 1 KB - 100 KB, small 128 KB - 512 KB, medium 512 KB - 1 MB, large 5 MB - 10 MB.
// Sizes are uniform in the range; the same files (same seed) for every layout and engine.
// --content=text makes them compressible text instead, and --zstd_level compresses EmberDB's
// data columns (Column::zstd_level): what compression costs and saves (db_mb) against SQLite.
//
// Layouts (the database is created anew for every layout, size class, engine and run):
//   bytes          files(id, size, data bytes): the whole file in one column value.
//                  SQLite: files(id INTEGER PRIMARY KEY, size, data BLOB), bound and read whole.
//   striped:S      files(id, size) plus seg(file_id, seq, data bytes) holding the file cut into
//                  segments of S bytes, with a unique index on (file_id, seq) in both engines
//                  (SQLite: a rowid table + CREATE UNIQUE INDEX, the same layout as EmberDB).
//   blob:B         files(id, size, data BLOB). EmberDB: written through a BlobWriter and read
//                  through a BlobReader, B bytes per Write/Read call. SQLite: the row is inserted
//                  with zeroblob(size), then written and read with sqlite3_blob_write / _read in
//                  pieces of B bytes (incremental I/O; one handle moved with sqlite3_blob_reopen
//                  for the reads).
// EmberDB addresses a files row by the RecordId its insert returned (kept in memory, as an
// application keeps a file's handle); SQLite by its rowid (id INTEGER PRIMARY KEY): both direct,
// no secondary index. Segments are found through the (file_id, seq) index in both.
//
// Phases, one benchmark row each (Iterations(1), manual time of the phase alone):
//   store   every file stored, ONE transaction per file (begin, insert(s), commit)
//   read    every file read back in one read-only transaction; every byte goes into a CRC32C
//           that must equal the in-memory file's (and so must the length and the stored size)
//   delete  every file deleted, one transaction per file: the files row (EmberDB: its BLOB or
//           out-of-line value goes with it), for striped also every segment row (EmberDB: found
//           through the index, then deleted; SQLite: DELETE ... WHERE file_id = ?, the changed
//           row count checked). The same work on both sides means the space is free again when
//           the phase ends: SQLite puts the pages on its freelist inside each DELETE, while an
//           EmberDB delete leaves a stub and the pages go back to the free list when the garbage
//           is collected. So EmberDB's timed phase ends with Database::CollectGarbage, and its
//           databases here run without the background collector (GcPolicy::kCooperative): all
//           of the collection is on the timed thread, none of it before or after the timing.
//           After the timed part, untimed checks: no row is left, and the pages are free again
//           in both engines (EmberDB: Validate finds no unreachable page or orphan BLOB, and
//           the pages in use are back to what the empty database used, within a small
//           allowance; SQLite: page_count - freelist_count, the same way). A failed check fails
//           the row and the binary exits with 1.
// Row names: blob_store/<class>/<layout>/run:<r>/<engine>/<phase>, in that order (class by
// class, so only one class of files is in memory). Within a run an engine does its three phases
// and closes its database before the other engine starts, so no thread or cache of one engine
// lives through the other's phases. Run r takes EmberDB first or SQLite first in turn (ABBA,
// bench/util/compare.h), alternating also from one layout and class to the next. A read or
// delete row whose store row did not run (filters) loads its database untimed first; a store
// always starts from a fresh database. The database is closed and removed after its delete row.
//
// Counters: MB/s (file bytes of the phase / seconds; also bytes_per_second), files, cpu_s
// (process CPU of the phase; with the other engine's database closed and EmberDB's collector
// off this is the engine's own work), db_mb (database file size after the phase), and pages:
// EmberDB fetches, marks, reads, writes (pages written home) and dw_writes (torn-page
// protection copies) of the phase (DatabaseStats). SQLite fetches and reads from its pager
// (hits + misses, misses), writes = pages written to the database file and journal_writes =
// bytes written to the rollback journal (or WAL) in pages, both counted by a VFS layer
// (bench/util/sqlite_util.h), and syncs. all_writes on both = every page written: EmberDB
// writes + dw_writes, SQLite writes + journal_writes. Delete rows add gc_ms (EmberDB: the
// CollectGarbage part of the phase) and pages_in_use after the phase.
//
// Durability is matched: --forced_writes=1 (default) = EmberDB fsync at commit and SQLite
// synchronous=FULL; 0 = no fsync, synchronous=OFF. SQLite's journal is the rollback journal
// (journal_mode=DELETE, the closest to careful write) unless --sqlite_journal says otherwise,
// and secure_delete is off (freed pages are not overwritten, as in EmberDB) unless
// --sqlite_secure_delete=1. Both use --page_size and a cache of --cache_pages pages.
//
// --reuse_check=1 adds, after each delete row, an untimed check of space reuse: the files
// stored again, and the growth of the database file reported (reuse_growth_mb, and a table at
// the end).
//
// At the end a table per layout and size class: for each phase the median seconds of EmberDB
// and SQLite, the median of the per-run ratios EmberDB / SQLite (below 1: EmberDB faster) and of
// the CPU ratios, then the count of wins, losses and evens; on stdout for the console format,
// else on stderr.
#include <sqlite3.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/util/bench_util.h"
#include "bench/util/compare.h"
#include "bench/util/sqlite_util.h"
#include "ember/ember.h"
#include "engine/util/crc32c.h"

namespace ember::bench {
namespace {

Flag FLAGS_mb_per_class("mb_per_class", int64_t{100},
                        "MB (2^20 bytes) of random files per size class");
Flag FLAGS_segment("segment", "65536",
                   "striped layout: segment size(s) in bytes, comma-separated, 512..262144, "
                   "K suffix allowed ('all' = 512, 1K, ..., 256K)");
Flag FLAGS_buffer("buffer", "65536",
                  "BLOB layout: bytes per streaming Write/Read call, comma-separated, "
                  "512..262144, K suffix allowed ('all' = 512, 1K, ..., 256K)");
Flag FLAGS_layouts("layouts", "bytes,striped,blob", "layouts to run: bytes, striped, blob");
Flag FLAGS_classes("classes", "very_small,small,medium,large",
                   "size classes to run: very_small, small, medium, large");
Flag FLAGS_seed("seed", int64_t{42}, "seed of the file sizes and contents");
Flag FLAGS_content("content", "random",
                   "file contents: random (incompressible, the experiment's) or text "
                   "(words and numbers, compressible several times over)");
Flag FLAGS_zstd_level("zstd_level", int64_t{0},
                      "EmberDB: Column::zstd_level of the data columns (0 = uncompressed, the "
                      "default; 1..19). SQLite stores the same bytes uncompressed");
Flag FLAGS_reuse_check("reuse_check", false,
                       "after each delete row: store the files again (untimed) and report how "
                       "much the database file grew (reuse_growth_mb; ~0 when the deleted space "
                       "is reused)");

constexpr double kMB = 1048576.0;

// ---------------------------------------------------------------- the files

struct SizeClass {
  const char* name;
  const char* range;
  uint64_t lo, hi;  // file sizes, inclusive
};
constexpr SizeClass kClasses[] = {
    {"very_small", "1-100 KB", 1u << 10, 100u << 10},
    {"small", "128-512 KB", 128u << 10, 512u << 10},
    {"medium", "512 KB-1 MB", 512u << 10, 1u << 20},
    {"large", "5-10 MB", 5u << 20, 10u << 20},
};
constexpr int kNumClasses = 4;

struct File {
  std::string data;
  uint32_t crc = 0;  // CRC32C of data
};

struct FileSet {
  int cls = -1;
  std::vector<File> files;
  uint64_t bytes = 0;
};
FileSet g_files;                   // the files of one size class at a time
std::map<int, double> g_files_mb;  // class -> MB of its files (for the summary)
std::map<int, size_t> g_files_n;   // class -> number of files

// The files of class `cls` (made on first use, untimed; the previous class's are freed).
FileSet& FilesFor(int cls) {
  if (g_files.cls == cls) return g_files;
  g_files = FileSet();
  g_files.cls = cls;
  const SizeClass& c = kClasses[cls];
  std::mt19937_64 rng(static_cast<uint64_t>(FLAGS_seed.i64()) * 1000003u +
                      static_cast<uint64_t>(cls));
  std::uniform_int_distribution<uint64_t> size_of(c.lo, c.hi);
  const uint64_t target = static_cast<uint64_t>(std::max<int64_t>(1, FLAGS_mb_per_class.i64()))
                          << 20;
  const bool text = FLAGS_content.str() == "text";
  const auto t0 = Clock::now();
  while (g_files.bytes < target) {
    File f;
    f.data.resize(size_of(rng));
    uint64_t h = rng();
    if (text) {
      // Words from a small vocabulary with a running number now and then: zstd shrinks such
      // text about as much as it does logs or documents.
      static const char* const kWords[] = {"record ", "version ", "page ",  "commit ", "blob ",
                                           "frame ",  "cache ",   "index ", "sweep ",  "lock "};
      size_t off = 0;
      for (uint64_t n = 0; off < f.data.size(); ++n) {
        h = Mix(h);
        std::string w = kWords[h % 10];
        if (h % 7 == 0) w += std::to_string(n) + "\n";
        const size_t k = std::min(w.size(), f.data.size() - off);
        std::memcpy(f.data.data() + off, w.data(), k);
        off += k;
      }
    } else {
      for (size_t off = 0; off < f.data.size(); off += 8) {
        h = Mix(h);
        std::memcpy(f.data.data() + off, &h, std::min<size_t>(8, f.data.size() - off));
      }
    }
    f.crc = util::Crc32c(f.data.data(), f.data.size());
    g_files.bytes += f.data.size();
    g_files.files.push_back(std::move(f));
  }
  g_files_mb[cls] = static_cast<double>(g_files.bytes) / kMB;
  g_files_n[cls] = g_files.files.size();
  std::fprintf(stderr, "bench: %s files: %zu files, %.1f MB (generated in %.2f s, untimed)\n",
               c.name, g_files.files.size(), static_cast<double>(g_files.bytes) / kMB,
               Seconds(t0, Clock::now()));
  return g_files;
}

// What was read back for file `i` (0-based; its id is i + 1) against the file in memory.
absl::Status Verify(const File& f, size_t i, uint64_t len, uint32_t crc) {
  if (len != f.data.size() || crc != f.crc) {
    return Wrong(
        absl::StrFormat("file %d: read back %d bytes with CRC32C %08x, stored %d bytes "
                        "with CRC32C %08x",
                        i + 1, len, crc, f.data.size(), f.crc));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- layouts

enum class Layout { kBytes, kStriped, kBlob };
constexpr const char* kLayoutNames[] = {"bytes", "striped", "blob"};

struct Variant {
  Layout layout = Layout::kBytes;
  size_t param = 0;  // segment size (striped) or streaming buffer size (blob); 0 for bytes
  std::string Name() const {
    if (layout == Layout::kBytes) return "bytes";
    return absl::StrCat(kLayoutNames[static_cast<int>(layout)], ":", param);
  }
};

size_t Segments(size_t bytes, size_t seg) { return (bytes + seg - 1) / seg; }

// One engine's database for one variant and class, and the three phases on it.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual bool has_marks() const = 0;
  // A fresh database for `v` (the previous one is closed and removed).
  virtual absl::Status Create(const Variant& v) = 0;
  virtual absl::Status Store(FileSet& fs) = 0;  // may move a file's bytes out and back
  virtual absl::Status Read(const FileSet& fs) = 0;
  // Deletes every file and makes its space free again (see the file comment); *gc_seconds is
  // the part of it that was garbage collection (0 for SQLite, whose DELETE frees the pages).
  virtual absl::Status Delete(const FileSet& fs, double* gc_seconds) = 0;
  // No row left (after Delete).
  virtual absl::Status CheckEmpty() = 0;
  // Pages of the database file in use (not free), found untimed.
  virtual absl::StatusOr<uint64_t> PagesInUse() = 0;
  // Closes and removes the database.
  virtual absl::Status Drop() = 0;
  // Page counters since the previous call (SQLite: with its file writes, see SetCounters).
  virtual Counters TakePages() = 0;
  // Puts the page counters of a phase on its row.
  virtual void SetCounters(benchmark::State& state, const Counters& pages) = 0;
  uint64_t DbBytes() const { return path_.empty() ? 0 : FileBytes(path_); }

  // After Delete: the deleted files' pages are free again. Pages in use may exceed the empty
  // database's by an allowance for the pages a table keeps once it has held rows (pointer
  // pages, index levels): 16 pages plus 1% of the pages the files took, far below the pages
  // of the files themselves.
  absl::Status CheckFreed(const FileSet& fs, uint64_t* in_use) {
    absl::StatusOr<uint64_t> now = PagesInUse();
    if (!now.ok()) return With(now.status(), "pages in use");
    *in_use = *now;
    const uint64_t file_pages = fs.bytes / static_cast<uint64_t>(FLAGS_page_size.i64());
    const uint64_t allowed = empty_in_use_ + 16 + file_pages / 100;
    if (*now > allowed) {
      return Wrong(absl::StrCat(name(), ": ", *now,
                                " pages in use after the delete phase; the "
                                "empty database used ",
                                empty_in_use_, ", the files about ", file_pages,
                                ": their pages were not freed"));
    }
    return absl::OkStatus();
  }

  std::string loaded_key;  // variant/class whose files the database holds ("" = none)

 protected:
  // Call at the end of Create: the pages the empty database uses.
  absl::Status NoteEmpty() {
    absl::StatusOr<uint64_t> n = PagesInUse();
    if (!n.ok()) return With(n.status(), "pages in use");
    empty_in_use_ = *n;
    return absl::OkStatus();
  }

  Variant v_;
  std::string path_;
  uint64_t empty_in_use_ = 0;
};

// ---------------------------------------------------------------- EmberDB

class EmberBackend : public Backend {
 public:
  const char* name() const override { return "ember"; }
  bool has_marks() const override { return true; }

  absl::Status Create(const Variant& v) override {
    (void)Drop();
    v_ = v;
    path_ = NewDbPath("blob_store-ember");
    Options o = DefaultOptions();
    o.gc_policy = GcPolicy::kCooperative;  // no collector thread: the delete phase collects
    auto d = Database::Open(path_, o);
    if (!d.ok()) return With(d.status(), "open");
    db_ = std::move(*d);
    last_ = db_->stats().pages;
    std::vector<Column> cols = {{"id", ColumnType::kInt64, false},
                                {"size", ColumnType::kInt64, false}};
    const int z = static_cast<int>(FLAGS_zstd_level.i64());
    if (v.layout == Layout::kBytes) cols.push_back({"data", ColumnType::kBytes, false, z});
    if (v.layout == Layout::kBlob) cols.push_back({"data", ColumnType::kBlob, false, z});
    auto t = db_->CreateTable({"files", cols});
    if (!t.ok()) return With(t.status(), "create table files");
    files_ = *t;
    if (v.layout == Layout::kStriped) {
      auto s = db_->CreateTable(
          {"seg",
           {{"file_id", ColumnType::kInt64, false},
            {"seq", ColumnType::kInt64, false},
            {"data", ColumnType::kBytes, false, static_cast<int>(FLAGS_zstd_level.i64())}}});
      if (!s.ok()) return With(s.status(), "create table seg");
      seg_ = *s;
      auto ix = db_->CreateIndex({"seg_ix", "seg", {"file_id", "seq"}, /*unique=*/true});
      if (!ix.ok()) return With(ix.status(), "create index seg_ix");
      seg_ix_ = *ix;
    }
    return NoteEmpty();
  }

  absl::Status Drop() override {
    absl::Status s;
    if (db_) s = db_->Close();
    db_.reset();
    if (!path_.empty()) RemoveDbFiles(path_);
    path_.clear();
    rids_.clear();
    loaded_key.clear();
    return s;
  }

  Counters TakePages() override {
    if (!db_) return {};
    const Counters now = db_->stats().pages;
    const Counters d = now - last_;
    last_ = now;
    return d;
  }

  void SetCounters(benchmark::State& state, const Counters& pages) override {
    SetPageCounters(state, pages);
    SetAllWrites(state, pages);
  }

  // Pages reachable from the catalog (Validate's pages_checked), once Validate has found no
  // damage, no unreachable page and no orphan BLOB: every other page below page_count is free.
  absl::StatusOr<uint64_t> PagesInUse() override {
    auto rep = db_->Validate();
    if (!rep.ok()) return rep.status();
    if (!rep->ok()) return Wrong(absl::StrCat("Validate: ", rep->errors.front()));
    if (!rep->unreachable_pages.empty() || !rep->orphan_blobs.empty()) {
      return Wrong(absl::StrCat("Validate: ", rep->unreachable_pages.size(), " unreachable pages, ",
                                rep->orphan_blobs.size(),
                                " orphan BLOBs (pages neither in use nor free)"));
    }
    return rep->pages_checked;
  }

  absl::Status Store(FileSet& fs) override {
    rids_.assign(fs.files.size(), RecordId{});
    Row seg_row = {int64_t{0}, int64_t{0}, std::string()};
    for (size_t i = 0; i < fs.files.size(); ++i) {
      File& f = fs.files[i];
      const int64_t id = static_cast<int64_t>(i) + 1;
      const int64_t size = static_cast<int64_t>(f.data.size());
      const std::string ctx = absl::StrCat("store file ", id, " (", size, " bytes)");
      auto txn = db_->Begin();
      if (!txn.ok()) return With(txn.status(), ctx);
      absl::StatusOr<RecordId> rid;
      switch (v_.layout) {
        case Layout::kBytes: {
          // The file's bytes are moved into the row and back (Insert takes the row by const
          // reference), so no copy is made on our side, as SQLite binds them in place.
          Row row;
          row.reserve(3);
          row.emplace_back(id);
          row.emplace_back(size);
          row.emplace_back(std::move(f.data));  // (a braced list would copy)
          rid = (*txn)->Insert(files_, row);
          f.data = std::move(std::get<std::string>(row[2]));
          break;
        }
        case Layout::kStriped: {
          rid = (*txn)->Insert(files_, {id, size});
          if (!rid.ok()) break;
          seg_row[0] = id;
          std::string& piece = std::get<std::string>(seg_row[2]);
          for (size_t off = 0, seq = 0; off < f.data.size(); off += v_.param, ++seq) {
            seg_row[1] = static_cast<int64_t>(seq);
            piece.assign(f.data, off, v_.param);
            auto r = (*txn)->Insert(seg_, seg_row);
            if (!r.ok()) return With(r.status(), absl::StrCat(ctx, ", segment ", seq));
          }
          break;
        }
        case Layout::kBlob: {
          auto w = (*txn)->CreateBlob(files_, "data");
          if (!w.ok()) return With(w.status(), absl::StrCat(ctx, ", CreateBlob"));
          for (size_t off = 0; off < f.data.size(); off += v_.param) {
            std::string_view piece(f.data.data() + off, std::min(v_.param, f.data.size() - off));
            if (absl::Status s = (*w)->Write(piece); !s.ok()) {
              return With(s, absl::StrCat(ctx, ", BlobWriter::Write at ", off));
            }
          }
          rid = (*txn)->Insert(files_, {id, size, (*w)->id()});
          break;
        }
      }
      if (!rid.ok()) return With(rid.status(), absl::StrCat(ctx, ", insert"));
      rids_[i] = *rid;
      if (absl::Status s = (*txn)->Commit(); !s.ok()) return With(s, absl::StrCat(ctx, ", commit"));
    }
    return absl::OkStatus();
  }

  absl::Status Read(const FileSet& fs) override {
    if (rids_.size() != fs.files.size()) return Wrong("read: the files were not stored");
    TransactionOptions ro;
    ro.read_only = true;
    auto txn = db_->Begin(ro);
    if (!txn.ok()) return With(txn.status(), "read: begin");
    std::vector<char> buf(v_.layout == Layout::kBlob ? v_.param : 0);
    for (size_t i = 0; i < fs.files.size(); ++i) {
      const File& f = fs.files[i];
      const int64_t id = static_cast<int64_t>(i) + 1;
      const std::string ctx = absl::StrCat("read file ", id);
      auto got = (*txn)->Get(files_, rids_[i]);
      if (!got.ok()) return With(got.status(), ctx);
      if (!got->has_value()) return Wrong(absl::StrCat(ctx, ": row not found"));
      const Row& row = **got;
      if (std::get<int64_t>(row[0]) != id) return Wrong(absl::StrCat(ctx, ": another row"));
      if (std::get<int64_t>(row[1]) != static_cast<int64_t>(f.data.size())) {
        return Wrong(absl::StrCat(ctx, ": stored size ", std::get<int64_t>(row[1])));
      }
      uint64_t len = 0;
      uint32_t crc = 0;
      switch (v_.layout) {
        case Layout::kBytes: {
          const std::string& d = std::get<std::string>(row[2]);
          len = d.size();
          crc = util::Crc32c(d.data(), d.size());
          break;
        }
        case Layout::kStriped: {
          auto cur = (*txn)->IndexScan(seg_ix_, {id}, {id});
          if (!cur.ok()) return With(cur.status(), absl::StrCat(ctx, ", segment scan"));
          int64_t seq = 0;
          while ((*cur)->Valid()) {
            const Row& r = (*cur)->row();
            if (std::get<int64_t>(r[0]) != id || std::get<int64_t>(r[1]) != seq) {
              return Wrong(absl::StrCat(ctx, ": segment ", std::get<int64_t>(r[0]), "/",
                                        std::get<int64_t>(r[1]), " where ", id, "/", seq,
                                        " was due"));
            }
            const std::string& d = std::get<std::string>(r[2]);
            crc = util::Crc32cExtend(crc, d.data(), d.size());
            len += d.size();
            ++seq;
            if (absl::Status s = (*cur)->Next(); !s.ok()) {
              return With(s, absl::StrCat(ctx, ", segment scan"));
            }
          }
          break;
        }
        case Layout::kBlob: {
          auto rd = (*txn)->OpenBlob(std::get<BlobId>(row[2]));
          if (!rd.ok()) return With(rd.status(), absl::StrCat(ctx, ", OpenBlob"));
          for (;;) {
            auto n = (*rd)->Read(buf.data(), buf.size());
            if (!n.ok()) return With(n.status(), absl::StrCat(ctx, ", BlobReader::Read at ", len));
            if (*n == 0) break;
            crc = util::Crc32cExtend(crc, buf.data(), *n);
            len += *n;
          }
          break;
        }
      }
      if (absl::Status s = Verify(f, i, len, crc); !s.ok()) return s;
    }
    return With((*txn)->Commit(), "read: commit");
  }

  absl::Status Delete(const FileSet& fs, double* gc_seconds) override {
    if (rids_.size() != fs.files.size()) return Wrong("delete: the files were not stored");
    std::vector<RecordId> segs;
    for (size_t i = 0; i < fs.files.size(); ++i) {
      const int64_t id = static_cast<int64_t>(i) + 1;
      const std::string ctx = absl::StrCat("delete file ", id);
      auto txn = db_->Begin();
      if (!txn.ok()) return With(txn.status(), ctx);
      if (v_.layout == Layout::kStriped) {
        // DELETE FROM seg WHERE file_id = ?: find the rows through the index, then delete them.
        segs.clear();
        {
          auto cur = (*txn)->IndexScan(seg_ix_, {id}, {id});
          if (!cur.ok()) return With(cur.status(), absl::StrCat(ctx, ", segment scan"));
          while ((*cur)->Valid()) {
            segs.push_back((*cur)->id());
            if (absl::Status s = (*cur)->Next(); !s.ok()) {
              return With(s, absl::StrCat(ctx, ", segment scan"));
            }
          }
        }
        const size_t want = Segments(fs.files[i].data.size(), v_.param);
        if (segs.size() != want) {
          return Wrong(absl::StrCat(ctx, ": found ", segs.size(), " segments of ", want));
        }
        for (RecordId r : segs) {
          if (absl::Status s = (*txn)->Delete(seg_, r); !s.ok()) {
            return With(s, absl::StrCat(ctx, ", segment record ", r.value));
          }
        }
      }
      if (absl::Status s = (*txn)->Delete(files_, rids_[i]); !s.ok()) return With(s, ctx);
      if (absl::Status s = (*txn)->Commit(); !s.ok()) return With(s, absl::StrCat(ctx, ", commit"));
    }
    rids_.clear();
    // What SQLite's DELETE did inline: the records and the pages of their values go.
    const auto t0 = Clock::now();
    absl::Status s = With(db_->CollectGarbage(), "delete: CollectGarbage");
    *gc_seconds = Seconds(t0, Clock::now());
    return s;
  }

  absl::Status CheckEmpty() override {
    TransactionOptions ro;
    ro.read_only = true;
    auto txn = db_->Begin(ro);
    if (!txn.ok()) return txn.status();
    {
      auto cur = (*txn)->Scan(files_);
      if (!cur.ok()) return With(cur.status(), "check: scan files");
      if ((*cur)->Valid()) return Wrong("a files row is still visible after the delete phase");
    }
    if (v_.layout == Layout::kStriped) {
      auto cur = (*txn)->IndexScan(seg_ix_, {}, {});
      if (!cur.ok()) return With(cur.status(), "check: scan seg");
      if ((*cur)->Valid()) return Wrong("a seg row is still visible after the delete phase");
    }
    return (*txn)->Commit();
  }

 private:
  std::unique_ptr<Database> db_;
  Table files_, seg_;
  Index seg_ix_;
  std::vector<RecordId> rids_;  // the files row of file i
  Counters last_;
};

// ---------------------------------------------------------------- SQLite

class SqliteBackend : public Backend {
 public:
  const char* name() const override { return "sqlite"; }
  bool has_marks() const override { return false; }

  absl::Status Create(const Variant& v) override {
    (void)Drop();
    v_ = v;
    path_ = NewDbPath("blob_store-sqlite", ".sqlite");
    if (absl::Status s = OpenSqlite(path_, &db_); !s.ok()) return s;
    std::vector<std::string> sql;
    if (v.layout == Layout::kStriped) {
      sql.push_back("CREATE TABLE files(id INTEGER PRIMARY KEY, size INTEGER NOT NULL)");
      sql.push_back(
          "CREATE TABLE seg(file_id INTEGER NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL)");
      sql.push_back("CREATE UNIQUE INDEX seg_ix ON seg(file_id, seq)");
    } else {
      sql.push_back(
          "CREATE TABLE files(id INTEGER PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL)");
    }
    for (const std::string& s : sql) {
      if (absl::Status st = Exec(s); !st.ok()) return st;
    }
    return NoteEmpty();
  }

  absl::Status Drop() override {
    absl::Status s;
    if (db_ && sqlite3_close(db_) != SQLITE_OK) s = SqlError(db_, "close");
    db_ = nullptr;
    if (!path_.empty()) RemoveDbFiles(path_);
    path_.clear();
    loaded_key.clear();
    return s;
  }

  Counters TakePages() override {
    io_ = TakeSqliteIo();
    return TakeSqlitePages(db_);
  }
  void SetCounters(benchmark::State& state, const Counters& pages) override {
    SetSqliteCounters(state, pages, io_);
  }

  absl::StatusOr<uint64_t> PagesInUse() override {
    int64_t n[2] = {0, 0};
    const char* sql[2] = {"PRAGMA page_count", "PRAGMA freelist_count"};
    for (int i = 0; i < 2; ++i) {
      Stmt st;
      if (absl::Status s = st.Prepare(db_, sql[i]); !s.ok()) return s;
      if (sqlite3_step(st.get()) != SQLITE_ROW) return SqlError(db_, sql[i]);
      n[i] = sqlite3_column_int64(st.get(), 0);
    }
    return static_cast<uint64_t>(n[0] - n[1]);
  }

  absl::Status Store(FileSet& fs) override {
    Stmt ins, ins_seg;
    const char* ins_sql = v_.layout == Layout::kBytes
                              ? "INSERT INTO files(id, size, data) VALUES(?1, ?2, ?3)"
                          : v_.layout == Layout::kBlob
                              ? "INSERT INTO files(id, size, data) VALUES(?1, ?2, zeroblob(?2))"
                              : "INSERT INTO files(id, size) VALUES(?1, ?2)";
    if (absl::Status s = ins.Prepare(db_, ins_sql); !s.ok()) return s;
    if (v_.layout == Layout::kStriped) {
      if (absl::Status s =
              ins_seg.Prepare(db_, "INSERT INTO seg(file_id, seq, data) VALUES(?1, ?2, ?3)");
          !s.ok()) {
        return s;
      }
    }
    for (size_t i = 0; i < fs.files.size(); ++i) {
      const File& f = fs.files[i];
      const int64_t id = static_cast<int64_t>(i) + 1;
      const std::string ctx = absl::StrCat("store file ", id, " (", f.data.size(), " bytes)");
      if (absl::Status s = Exec("BEGIN"); !s.ok()) return With(s, ctx);
      sqlite3_stmt* st = ins.get();
      sqlite3_bind_int64(st, 1, id);
      sqlite3_bind_int64(st, 2, static_cast<int64_t>(f.data.size()));
      if (v_.layout == Layout::kBytes) {
        sqlite3_bind_blob64(st, 3, f.data.data(), f.data.size(), SQLITE_STATIC);
      }
      if (sqlite3_step(st) != SQLITE_DONE) return SqlError(db_, absl::StrCat(ctx, ", insert"));
      sqlite3_reset(st);
      if (v_.layout == Layout::kStriped) {
        sqlite3_stmt* ss = ins_seg.get();
        for (size_t off = 0, seq = 0; off < f.data.size(); off += v_.param, ++seq) {
          sqlite3_bind_int64(ss, 1, id);
          sqlite3_bind_int64(ss, 2, static_cast<int64_t>(seq));
          sqlite3_bind_blob64(ss, 3, f.data.data() + off, std::min(v_.param, f.data.size() - off),
                              SQLITE_STATIC);
          if (sqlite3_step(ss) != SQLITE_DONE) {
            return SqlError(db_, absl::StrCat(ctx, ", segment ", seq));
          }
          sqlite3_reset(ss);
        }
      }
      if (v_.layout == Layout::kBlob) {
        sqlite3_blob* b = nullptr;
        if (sqlite3_blob_open(db_, "main", "files", "data", id, 1, &b) != SQLITE_OK) {
          absl::Status s = SqlError(db_, absl::StrCat(ctx, ", sqlite3_blob_open"));
          sqlite3_blob_close(b);
          return s;
        }
        for (size_t off = 0; off < f.data.size(); off += v_.param) {
          const int n = static_cast<int>(std::min(v_.param, f.data.size() - off));
          if (sqlite3_blob_write(b, f.data.data() + off, n, static_cast<int>(off)) != SQLITE_OK) {
            absl::Status s = SqlError(db_, absl::StrCat(ctx, ", sqlite3_blob_write at ", off));
            sqlite3_blob_close(b);
            return s;
          }
        }
        if (sqlite3_blob_close(b) != SQLITE_OK) {
          return SqlError(db_, absl::StrCat(ctx, ", sqlite3_blob_close"));
        }
      }
      if (absl::Status s = Exec("COMMIT"); !s.ok()) return With(s, ctx);
    }
    return absl::OkStatus();
  }

  absl::Status Read(const FileSet& fs) override {
    Stmt sel, sel_seg;
    if (v_.layout == Layout::kBytes) {
      if (absl::Status s = sel.Prepare(db_, "SELECT size, data FROM files WHERE id = ?1");
          !s.ok()) {
        return s;
      }
    } else if (v_.layout == Layout::kStriped) {
      if (absl::Status s = sel.Prepare(db_, "SELECT size FROM files WHERE id = ?1"); !s.ok()) {
        return s;
      }
      if (absl::Status s = sel_seg.Prepare(
              db_, "SELECT file_id, seq, data FROM seg WHERE file_id = ?1 ORDER BY seq");
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = Exec("BEGIN"); !s.ok()) return s;
    std::vector<char> buf(v_.layout == Layout::kBlob ? v_.param : 0);
    sqlite3_blob* blob = nullptr;  // one handle, moved from row to row
    absl::Status status;
    for (size_t i = 0; i < fs.files.size() && status.ok(); ++i) {
      const File& f = fs.files[i];
      const int64_t id = static_cast<int64_t>(i) + 1;
      const std::string ctx = absl::StrCat("read file ", id);
      uint64_t len = 0;
      uint32_t crc = 0;
      if (v_.layout == Layout::kBlob) {
        const int rc = blob ? sqlite3_blob_reopen(blob, id)
                            : sqlite3_blob_open(db_, "main", "files", "data", id, 0, &blob);
        if (rc != SQLITE_OK) {
          status = SqlError(db_, absl::StrCat(ctx, ", sqlite3_blob_open/reopen"));
          break;
        }
        const int size = sqlite3_blob_bytes(blob);
        for (int off = 0; off < size;) {
          const int n = std::min(static_cast<int>(buf.size()), size - off);
          if (sqlite3_blob_read(blob, buf.data(), n, off) != SQLITE_OK) {
            status = SqlError(db_, absl::StrCat(ctx, ", sqlite3_blob_read at ", off));
            break;
          }
          crc = util::Crc32cExtend(crc, buf.data(), static_cast<size_t>(n));
          off += n;
          len += static_cast<uint64_t>(n);
        }
        if (!status.ok()) break;
      } else {
        sqlite3_stmt* st = sel.get();
        sqlite3_bind_int64(st, 1, id);
        const int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
          status =
              rc == SQLITE_DONE ? Wrong(absl::StrCat(ctx, ": row not found")) : SqlError(db_, ctx);
          sqlite3_reset(st);
          break;
        }
        const int64_t size = sqlite3_column_int64(st, 0);
        if (size != static_cast<int64_t>(f.data.size())) {
          status = Wrong(absl::StrCat(ctx, ": stored size ", size));
        } else if (v_.layout == Layout::kBytes) {
          const void* d = sqlite3_column_blob(st, 1);
          const int n = sqlite3_column_bytes(st, 1);
          len = static_cast<uint64_t>(n);
          crc = util::Crc32c(d, static_cast<size_t>(n));
        }
        sqlite3_reset(st);
        if (!status.ok()) break;
        if (v_.layout == Layout::kStriped) {
          sqlite3_stmt* ss = sel_seg.get();
          sqlite3_bind_int64(ss, 1, id);
          int64_t seq = 0;
          int src;
          while ((src = sqlite3_step(ss)) == SQLITE_ROW) {
            if (sqlite3_column_int64(ss, 0) != id || sqlite3_column_int64(ss, 1) != seq) {
              status = Wrong(absl::StrCat(ctx, ": segment ", sqlite3_column_int64(ss, 0), "/",
                                          sqlite3_column_int64(ss, 1), " where ", id, "/", seq,
                                          " was due"));
              break;
            }
            const void* d = sqlite3_column_blob(ss, 2);
            const int n = sqlite3_column_bytes(ss, 2);
            crc = util::Crc32cExtend(crc, d, static_cast<size_t>(n));
            len += static_cast<uint64_t>(n);
            ++seq;
          }
          if (status.ok() && src != SQLITE_DONE)
            status = SqlError(db_, absl::StrCat(ctx, ", segments"));
          sqlite3_reset(ss);
          if (!status.ok()) break;
        }
      }
      status = Verify(f, i, len, crc);
    }
    if (blob) sqlite3_blob_close(blob);
    if (!status.ok()) {
      (void)Exec("ROLLBACK");
      return status;
    }
    return Exec("COMMIT");
  }

  absl::Status Delete(const FileSet& fs, double* gc_seconds) override {
    *gc_seconds = 0;
    Stmt del, del_seg;
    if (absl::Status s = del.Prepare(db_, "DELETE FROM files WHERE id = ?1"); !s.ok()) return s;
    if (v_.layout == Layout::kStriped) {
      if (absl::Status s = del_seg.Prepare(db_, "DELETE FROM seg WHERE file_id = ?1"); !s.ok()) {
        return s;
      }
    }
    for (size_t i = 0; i < fs.files.size(); ++i) {
      const int64_t id = static_cast<int64_t>(i) + 1;
      const std::string ctx = absl::StrCat("delete file ", id);
      if (absl::Status s = Exec("BEGIN"); !s.ok()) return With(s, ctx);
      if (v_.layout == Layout::kStriped) {
        sqlite3_stmt* ss = del_seg.get();
        sqlite3_bind_int64(ss, 1, id);
        if (sqlite3_step(ss) != SQLITE_DONE) return SqlError(db_, absl::StrCat(ctx, ", segments"));
        sqlite3_reset(ss);
        const size_t want = Segments(fs.files[i].data.size(), v_.param);
        if (static_cast<size_t>(sqlite3_changes(db_)) != want) {
          return Wrong(
              absl::StrCat(ctx, ": deleted ", sqlite3_changes(db_), " segments of ", want));
        }
      }
      sqlite3_stmt* st = del.get();
      sqlite3_bind_int64(st, 1, id);
      if (sqlite3_step(st) != SQLITE_DONE) return SqlError(db_, ctx);
      sqlite3_reset(st);
      if (sqlite3_changes(db_) != 1) return Wrong(absl::StrCat(ctx, ": no row deleted"));
      if (absl::Status s = Exec("COMMIT"); !s.ok()) return With(s, ctx);
    }
    return absl::OkStatus();
  }

  absl::Status CheckEmpty() override {
    for (const char* sql : {"SELECT count(*) FROM files", "SELECT count(*) FROM seg"}) {
      if (v_.layout != Layout::kStriped && std::strstr(sql, "seg")) continue;
      Stmt st;
      if (absl::Status s = st.Prepare(db_, sql); !s.ok()) return s;
      if (sqlite3_step(st.get()) != SQLITE_ROW) return SqlError(db_, sql);
      if (sqlite3_column_int64(st.get(), 0) != 0) {
        return Wrong(
            absl::StrCat(sql, " = ", sqlite3_column_int64(st.get(), 0), " after the delete phase"));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Exec(const std::string& sql) { return SqlExec(db_, sql); }

  sqlite3* db_ = nullptr;
  SqliteIo io_;  // file writes of the last TakePages interval
};

// ---------------------------------------------------------------- benchmark rows

enum class Phase { kStore, kRead, kDelete };
constexpr const char* kPhaseNames[] = {"store", "read", "delete"};
constexpr int kEngines = 2;  // 0 = EmberDB, 1 = SQLite

std::unique_ptr<Backend> g_backends[kEngines];

// (variant name, class, phase) -> both engines' samples by run
std::map<std::tuple<std::string, int, int>, Comparison> g_results;
// (variant name, class, engine) -> database growth of the last reuse check
std::map<std::tuple<std::string, int, int>, double> g_reuse_mb;
std::vector<Variant> g_variants;
std::vector<int> g_classes;

std::string Key(const Variant& v, int cls) {
  return absl::StrCat(v.Name(), "/", kClasses[cls].name);
}

// Gets the engine's database ready for `phase`: a fresh one for store, else one holding the
// class's files (stored untimed when the store row did not just do it). The other engine's
// database is closed first, so none of its threads or memory is around during the phase.
absl::Status Prepare(int engine, const Variant& v, int cls, Phase phase, FileSet& fs) {
  for (int other = 0; other < kEngines; ++other) {
    if (other == engine) continue;
    if (absl::Status s = g_backends[other]->Drop(); !s.ok()) {
      return With(s, absl::StrCat("closing the ", g_backends[other]->name(), " database"));
    }
  }
  Backend& b = *g_backends[engine];
  if (phase == Phase::kStore) return b.Create(v);
  if (b.loaded_key == Key(v, cls)) return absl::OkStatus();
  std::fprintf(stderr, "bench: storing the %s files in %s for %s (untimed)\n", kClasses[cls].name,
               b.name(), v.Name().c_str());
  if (absl::Status s = b.Create(v); !s.ok()) return s;
  if (absl::Status s = b.Store(fs); !s.ok()) return s;
  b.loaded_key = Key(v, cls);
  return absl::OkStatus();
}

void BM_Phase(benchmark::State& state, int engine, Variant v, int cls, Phase phase, int run,
              std::string what) {
  Backend& b = *g_backends[engine];
  FileSet& fs = FilesFor(cls);
  if (Failed(state, Prepare(engine, v, cls, phase, fs), what + " setup")) {
    (void)b.Drop();
    return;
  }
  for (auto _ : state) {
    (void)b.TakePages();
    // Process CPU: the other engine's database is closed and EmberDB runs no collector thread
    // here, so this is the engine's own work on this thread.
    const double cpu0 = ProcessCpuSeconds();
    const auto t0 = Clock::now();
    absl::Status s;
    double gc_secs = 0;
    switch (phase) {
      case Phase::kStore: s = b.Store(fs); break;
      case Phase::kRead: s = b.Read(fs); break;
      case Phase::kDelete: s = b.Delete(fs, &gc_secs); break;
    }
    const double secs = Seconds(t0, Clock::now());
    const double cpu_secs = ProcessCpuSeconds() - cpu0;
    const Counters pages = b.TakePages();
    if (Failed(state, s, what)) {
      (void)b.Drop();  // half done: start over next time
      return;
    }
    if (phase == Phase::kStore) b.loaded_key = Key(v, cls);
    if (phase == Phase::kDelete) {
      b.loaded_key.clear();
      // Freed first: EmberDB's scan for rows in CheckEmpty collects the garbage it meets, which
      // would hide a delete phase that left the collection undone.
      uint64_t in_use = 0;
      absl::Status check = b.CheckFreed(fs, &in_use);
      if (check.ok()) check = b.CheckEmpty();
      if (Failed(state, check, what + " check")) {
        (void)b.Drop();
        return;
      }
      state.counters["gc_ms"] = gc_secs * 1e3;
      state.counters["pages_in_use"] = static_cast<double>(in_use);
    }
    state.SetIterationTime(secs);
    const double mb = static_cast<double>(fs.bytes) / kMB;
    state.counters["MB/s"] = secs > 0 ? mb / secs : 0;
    state.counters["files"] = static_cast<double>(fs.files.size());
    state.counters["cpu_s"] = cpu_secs;
    state.counters["db_mb"] = static_cast<double>(b.DbBytes()) / kMB;
    b.SetCounters(state, pages);
    if (phase == Phase::kDelete && FLAGS_reuse_check.b()) {
      // Untimed: does storing the same files again reuse the space the delete gave back?
      const uint64_t size0 = b.DbBytes();
      if (Failed(state, b.Store(fs), what + " reuse check")) {
        (void)b.Drop();
        return;
      }
      const double growth = static_cast<double>(b.DbBytes() - size0) / kMB;
      state.counters["reuse_growth_mb"] = growth;
      g_reuse_mb[{v.Name(), cls, engine}] = growth;
    }
    g_results[{v.Name(), cls, static_cast<int>(phase)}].Set(engine == 0, run,
                                                            Sample{secs, cpu_secs});
  }
  state.SetBytesProcessed(static_cast<int64_t>(fs.bytes) * state.iterations());
  if (phase == Phase::kDelete) Failed(state, b.Drop(), what + " close");
}

// ---------------------------------------------------------------- flags -> variants

// "a,b,,c" -> {"a", "b", "c"} (Debian's Abseil has its own string_view, so no absl::StrSplit).
std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool ParseSizes(const Flag& f, std::vector<size_t>* out) {
  out->clear();
  if (f.str() == "all") {
    for (size_t s = 512; s <= 262144; s *= 2) out->push_back(s);
    return true;
  }
  for (std::string part : SplitList(f.str())) {
    uint64_t mult = 1;
    if (part.back() == 'K' || part.back() == 'k') {
      mult = 1024;
      part.pop_back();
    }
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || end != part.data() + part.size() || v * mult < 512 ||
        v * mult > 262144) {
      std::fprintf(stderr, "bench: --%s: '%s' is not a size in 512..262144 bytes\n", f.name(),
                   f.str().c_str());
      return false;
    }
    out->push_back(static_cast<size_t>(v * mult));
  }
  if (out->empty()) {
    std::fprintf(stderr, "bench: --%s: no size given\n", f.name());
    return false;
  }
  return true;
}

bool ParseVariants() {
  std::vector<size_t> segments, buffers;
  if (!ParseSizes(FLAGS_segment, &segments) || !ParseSizes(FLAGS_buffer, &buffers)) return false;
  for (const std::string& l : SplitList(FLAGS_layouts.str())) {
    if (l == "bytes") {
      g_variants.push_back({Layout::kBytes, 0});
    } else if (l == "striped") {
      for (size_t s : segments) g_variants.push_back({Layout::kStriped, s});
    } else if (l == "blob") {
      for (size_t s : buffers) g_variants.push_back({Layout::kBlob, s});
    } else {
      std::fprintf(stderr, "bench: --layouts: unknown layout '%s' (bytes, striped, blob)\n",
                   l.c_str());
      return false;
    }
  }
  for (const std::string& c : SplitList(FLAGS_classes.str())) {
    int found = -1;
    for (int i = 0; i < kNumClasses; ++i) {
      if (c == kClasses[i].name) found = i;
    }
    if (found < 0) {
      std::fprintf(stderr,
                   "bench: --classes: unknown class '%s' (very_small, small, medium, large)\n",
                   c.c_str());
      return false;
    }
    g_classes.push_back(found);
  }
  if (g_variants.empty() || g_classes.empty()) {
    std::fprintf(stderr, "bench: nothing to run (--layouts / --classes empty)\n");
    return false;
  }
  if (FLAGS_mb_per_class.i64() < 1) {
    std::fprintf(stderr, "bench: --mb_per_class must be at least 1\n");
    return false;
  }
  return true;
}

void Register() {
  int pair = 0;  // (class, layout) pairs so far: alternates the first engine with one run too
  for (int cls : g_classes) {
    for (const Variant& v : g_variants) {
      for (int run = 0; run < Runs(); ++run) {
        const bool ember_first = EmberFirst(run, pair);
        for (int engine : {ember_first ? 0 : 1, ember_first ? 1 : 0}) {
          for (Phase p : {Phase::kStore, Phase::kRead, Phase::kDelete}) {
            const std::string name =
                absl::StrCat("blob_store/", kClasses[cls].name, "/", v.Name(), "/run:", run, "/",
                             g_backends[engine]->name(), "/", kPhaseNames[static_cast<int>(p)]);
            benchmark::RegisterBenchmark(name.c_str(), BM_Phase, engine, v, cls, p, run, name)
                ->Iterations(1)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
      ++pair;
    }
  }
}

// ---------------------------------------------------------------- summary

void PrintSummary() {
  if (g_results.empty()) return;
  std::FILE* out = SummaryStream();
  std::fprintf(out,
               "\nblob_store: EmberDB vs SQLite, the same files (mb_per_class=%lld, MB = 2^20 "
               "bytes; forced_writes=%s -> SQLite synchronous=%s, journal_mode=%s, "
               "secure_delete=%s; one transaction per file for store and delete; %d run%s, "
               "alternating which engine goes first)\n",
               static_cast<long long>(FLAGS_mb_per_class.i64()), FLAGS_forced_writes.str().c_str(),
               FLAGS_forced_writes.b() ? "FULL" : "OFF", FLAGS_sqlite_journal.str().c_str(),
               FLAGS_sqlite_secure_delete.str().c_str(), Runs(), Runs() == 1 ? "" : "s");
  std::fprintf(out, "files:");
  for (auto [cls, mb] : g_files_mb) {
    std::fprintf(out, "  %s (%s) %zu files %.1f MB;", kClasses[cls].name, kClasses[cls].range,
                 g_files_n[cls], mb);
  }
  std::fprintf(out, "\n");
  std::fprintf(out, "%-15s %-11s |", "", "");
  for (const char* p : kPhaseNames) std::fprintf(out, " %-32s |", p);
  std::fprintf(out, "\n%-15s %-11s |", "layout", "class");
  for (int p = 0; p < 3; ++p) {
    std::fprintf(out, " %8s %8s %6s %6s |", "EmberDB", "SQLite", "ratio", "cpu");
  }
  std::fprintf(out, "\n");
  Tally tally;
  for (const Variant& v : g_variants) {
    for (int cls : g_classes) {
      bool any = false;
      for (int p = 0; p < 3; ++p) any |= g_results.count({v.Name(), cls, p}) > 0;
      if (!any) continue;
      std::fprintf(out, "%-15s %-11s |", v.Name().c_str(), kClasses[cls].name);
      for (int p = 0; p < 3; ++p) {
        auto it = g_results.find({v.Name(), cls, p});
        const Paired r = it == g_results.end() ? Paired() : Pair(it->second);
        if (r.runs == 0) {
          std::fprintf(out, " %8s %8s %6s %6s |", "-", "-", "-", "-");
          continue;
        }
        std::fprintf(out, " %8.4f %8.4f %6.2f %6.2f |", r.ember_s, r.other_s, r.ratio, r.cpu_ratio);
        tally.Add(absl::StrCat(v.Name(), "/", kClasses[cls].name, "/", kPhaseNames[p]), r);
      }
      std::fprintf(out, "\n");
    }
  }
  std::fprintf(out,
               "EmberDB and SQLite: median seconds of wall clock per phase; ratio: median of the "
               "per-run ratios EmberDB / SQLite (below 1: EmberDB faster); cpu: the same for "
               "process CPU. EmberDB's delete includes the garbage collection that frees the "
               "files' pages (gc_ms in its rows); every delete row checked that the pages are "
               "free again. Each run's times and counters (all_writes = every page written, "
               "journal and doublewrite copies included) are in the benchmark rows.\n");
  tally.Print(out, "phases compared");
  if (AnyFailed()) {
    std::fprintf(out,
                 "Some rows FAILED (see 'bench: FAILED' on stderr): they are not in the table.\n");
  }
  if (FLAGS_reuse_check.b() && !g_reuse_mb.empty()) {
    std::fprintf(out,
                 "\nreuse check: database file growth when the deleted files are stored again, "
                 "MB (last run)\n%-15s %-11s %9s %9s %9s\n",
                 "layout", "class", "files MB", "EmberDB", "SQLite");
    for (const Variant& v : g_variants) {
      for (int cls : g_classes) {
        auto e = g_reuse_mb.find({v.Name(), cls, 0});
        auto q = g_reuse_mb.find({v.Name(), cls, 1});
        if (e == g_reuse_mb.end() && q == g_reuse_mb.end()) continue;
        auto mb = [&](auto it) {
          return it == g_reuse_mb.end() ? std::string("-") : absl::StrFormat("%.1f", it->second);
        };
        std::fprintf(out, "%-15s %-11s %9s %9s %9s\n", v.Name().c_str(), kClasses[cls].name,
                     g_files_mb.count(cls) ? absl::StrFormat("%.1f", g_files_mb[cls]).c_str() : "-",
                     mb(e).c_str(), mb(q).c_str());
      }
    }
  }
  std::fflush(out);
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  using namespace ember::bench;
  if (!CheckNoRepetitions(argc, argv) || !Init(&argc, argv)) return 1;
  const std::string content = FLAGS_content.str();
  const int64_t level = FLAGS_zstd_level.i64();
  if ((content != "random" && content != "text") || level < 0 || level > 19) {
    std::fprintf(stderr, "bench: --content must be random or text and --zstd_level 0..19\n");
    Finish();
    return 1;
  }
  if (!ParseVariants()) {
    Finish();
    return 1;
  }
  g_backends[0] = std::make_unique<EmberBackend>();
  g_backends[1] = std::make_unique<SqliteBackend>();
  benchmark::AddCustomContext("mb_per_class", FLAGS_mb_per_class.str());
  benchmark::AddCustomContext("segment", FLAGS_segment.str());
  benchmark::AddCustomContext("buffer", FLAGS_buffer.str());
  benchmark::AddCustomContext("runs", FLAGS_runs.str());
  AddSqliteContext();
  benchmark::AddCustomContext("content", content);
  benchmark::AddCustomContext("zstd_level", FLAGS_zstd_level.str());
  Register();
  benchmark::RunSpecifiedBenchmarks();
  bool ok = !AnyFailed();
  for (auto& b : g_backends) {
    if (absl::Status s = b->Drop(); !s.ok()) {
      std::fprintf(stderr, "bench: FAILED: closing the %s database: %s\n", b->name(),
                   s.ToString().c_str());
      ok = false;
    }
  }
  PrintSummary();
  Finish();
  return ok ? 0 : 1;
}
