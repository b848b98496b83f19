// bench/backup_restore: Firebird 5's parallel gbak experiment (backup and restore against
// workers). One database is loaded once: the parallel index experiment's WORD_DICTIONARY
// (--rows, ID primary key, random-word NAME with its index), the sweep experiment's BIGTABLE
// with a quarter as many rows (ID primary key, FIELD, a 100-character S) and a table of random
// BLOBs (--blob_mb in all, 64 KB to 2 MB each, so some go in pieces). Then:
//
//   tools/dev bench backup_restore [--rows=1000000] [--blob_mb=100] [--workers=1,2,4]
//       [--zstd=1] [--verify=1] [--benchmark_format=json ...]
//
// Rows:
//   backup_restore/op:backup/workers:W    Database::Backup of the loaded database (opened with
//                                         2048 cache pages, as the Firebird run), timed call
//   backup_restore/op:restore/workers:W   ember::Restore of that backup into a new database
//                                         (8 KiB pages), timed call: load, index build, sync
// Each reports seconds (manual time), MBps (the database's bytes per second for a backup, the
// backup file's for a restore), bytes (the backup file), db_bytes, rows, and for a restore
// load_s and index_s. With --verify, every restored database is compared with the original
// row by row (in primary key order, BLOBs by their bytes) and Validate()d; a difference fails
// the run. After the run: the table against workers, and Firebird 3.0.11's gbak figures.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/util/bench_util.h"
#include "bench/util/rows.h"
#include "ember/ember.h"

namespace eb = ember::bench;
using eb::operator-;

namespace {

eb::Flag FLAGS_rows("rows", int64_t{1000000}, "rows of WORD_DICTIONARY (BIGTABLE gets a quarter)");
eb::Flag FLAGS_blob_mb("blob_mb", int64_t{100}, "megabytes of random BLOBs (0: no BLOB table)");
eb::Flag FLAGS_workers("workers", "1,2,4", "worker counts (comma-separated)");
eb::Flag FLAGS_zstd("zstd", int64_t{1}, "zstd level of the backups");
eb::Flag FLAGS_verify("verify", true, "compare every restored database with the original");
eb::Flag FLAGS_seed("seed", int64_t{20261206}, "seed of the generated data");

constexpr uint32_t kPageSize = 8192;
constexpr uint32_t kCachePages = 2048;  // the Firebird 3.0 run's

std::string g_db;      // the loaded database
std::string g_backup;  // the newest backup of it
uint64_t g_db_bytes = 0;
uint64_t g_rows = 0;  // rows in all tables

ember::Options OptionsFor(int workers) {
  ember::Options o = eb::DefaultOptions();
  o.page_size = kPageSize;
  o.cache_pages = kCachePages;
  o.max_parallel_workers = std::max(1, workers);
  o.parallel_workers = std::max(1, workers);
  o.create_if_missing = false;  // opens of the loaded database (Load and Restore create)
  o.error_if_exists = false;
  return o;
}

std::string Word(std::mt19937_64& rng) {
  std::string w(3 + rng() % 12, 'a');
  for (char& c : w) c = static_cast<char>('a' + rng() % 26);
  return w;
}

absl::Status Load(int64_t rows, int64_t blob_mb) {
  g_db = eb::NewDbPath("backup-source");
  ember::Options o = OptionsFor(1);
  o.create_if_missing = true;
  o.cache_pages = 65536;
  o.forced_writes = false;  // the load is not measured
  absl::StatusOr<std::unique_ptr<ember::Database>> db = ember::Database::Open(g_db, o);
  if (!db.ok()) return db.status();
  ember::Database* d = db->get();
  absl::StatusOr<ember::Table> words = d->CreateTable(
      {"WORD_DICTIONARY",
       {{"ID", ember::ColumnType::kInt64, false}, {"NAME", ember::ColumnType::kString, false}}});
  if (!words.ok()) return words.status();
  absl::StatusOr<ember::Table> big = d->CreateTable({"BIGTABLE",
                                                     {{"ID", ember::ColumnType::kInt64, false},
                                                      {"FIELD", ember::ColumnType::kInt64},
                                                      {"S", ember::ColumnType::kString}}});
  if (!big.ok()) return big.status();
  std::mt19937_64 rng(static_cast<uint64_t>(FLAGS_seed.i64()));
  constexpr int64_t kBatch = 100000;
  for (int64_t done = 0; done < rows;) {
    auto txn = d->Begin();
    if (!txn.ok()) return txn.status();
    for (int64_t end = std::min(rows, done + kBatch); done < end; ++done) {
      if (auto r = (*txn)->Insert(*words, {done + 1, Word(rng)}); !r.ok()) return r.status();
    }
    if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  }
  const int64_t big_rows = rows / 4;
  for (int64_t done = 0; done < big_rows;) {
    auto txn = d->Begin();
    if (!txn.ok()) return txn.status();
    for (int64_t end = std::min(big_rows, done + kBatch); done < end; ++done) {
      auto r = (*txn)->Insert(
          *big, {done + 1, done, std::string(100, static_cast<char>('a' + done % 26))});
      if (!r.ok()) return r.status();
    }
    if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  }
  g_rows = static_cast<uint64_t>(rows + big_rows);
  if (blob_mb > 0) {
    absl::StatusOr<ember::Table> blobs = d->CreateTable(
        {"BLOBS", {{"ID", ember::ColumnType::kInt64, false}, {"DATA", ember::ColumnType::kBlob}}});
    if (!blobs.ok()) return blobs.status();
    auto txn = d->Begin();
    if (!txn.ok()) return txn.status();
    std::string bytes;
    int64_t id = 0;
    for (uint64_t left = static_cast<uint64_t>(blob_mb) << 20; left > 0; ++id) {
      const uint64_t n = std::min<uint64_t>(left, (64u << 10) + rng() % (2u << 20));
      bytes.resize(n);
      for (size_t i = 0; i + 8 <= n; i += 8) {
        const uint64_t x = rng();
        std::memcpy(bytes.data() + i, &x, 8);
      }
      auto w = (*txn)->CreateBlob();
      if (!w.ok()) return w.status();
      if (absl::Status s = (*w)->Write(bytes); !s.ok()) return s;
      if (auto r = (*txn)->Insert(*blobs, {id, (*w)->id()}); !r.ok()) return r.status();
      left -= n;
    }
    if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
    if (auto pk = d->CreateIndex({"PK_BLOBS", "BLOBS", {"ID"}, true}); !pk.ok()) return pk.status();
    g_rows += static_cast<uint64_t>(id);
  }
  // The indexes come last, built in bulk, as a restore builds them.
  for (const ember::IndexSchema& ix :
       {ember::IndexSchema{"PK_WORD_DICTIONARY", "WORD_DICTIONARY", {"ID"}, true},
        ember::IndexSchema{"WORD_DICTIONARY_NAME", "WORD_DICTIONARY", {"NAME"}, false},
        ember::IndexSchema{"PK_BIGTABLE", "BIGTABLE", {"ID"}, true}}) {
    if (auto r = d->CreateIndex(ix); !r.ok()) return r.status();
  }
  if (absl::Status s = d->Close(); !s.ok()) return s;
  g_db_bytes = eb::FileBytes(g_db);
  return absl::OkStatus();
}

// The bytes of the BLOB `id` (empty for the empty BLOB).
absl::StatusOr<std::string> BlobBytes(ember::Transaction* txn, ember::BlobId id) {
  absl::StatusOr<std::unique_ptr<ember::BlobReader>> r = txn->OpenBlob(id);
  if (!r.ok()) return r.status();
  std::string out((*r)->size(), '\0');
  for (size_t got = 0; got < out.size();) {
    absl::StatusOr<size_t> n = (*r)->Read(out.data() + got, out.size() - got);
    if (!n.ok()) return n.status();
    if (*n == 0) return eb::Wrong("a BLOB ends before its size");
    got += *n;
  }
  return out;
}

// Every table of `b` equals the same table of `a`, row by row in primary key order.
absl::Status Compare(ember::Database* a, ember::Database* b) {
  if (a->TableNames() != b->TableNames()) return eb::Wrong("the restored tables differ");
  auto ta = a->Begin(), tb = b->Begin();
  if (!ta.ok()) return ta.status();
  if (!tb.ok()) return tb.status();
  for (const std::string& name : a->TableNames()) {
    const std::string pk = "PK_" + name;
    auto ia = a->GetIndex(pk), ib = b->GetIndex(pk);
    if (!ia.ok()) return ia.status();
    if (!ib.ok()) return ib.status();
    auto ca = (*ta)->IndexScan(*ia, {}, {}), cb = (*tb)->IndexScan(*ib, {}, {});
    if (!ca.ok()) return ca.status();
    if (!cb.ok()) return cb.status();
    uint64_t n = 0;
    for (; (*ca)->Valid(); ++n) {
      if (!(*cb)->Valid()) return eb::Wrong(absl::StrCat(name, ": the restore has ", n, " rows"));
      const ember::Row& ra = (*ca)->row();
      const ember::Row& rb = (*cb)->row();
      if (ra.size() != rb.size()) return eb::Wrong(absl::StrCat(name, ": column counts differ"));
      for (size_t c = 0; c < ra.size(); ++c) {
        const auto* ba = std::get_if<ember::BlobId>(&ra[c]);
        const auto* bb = std::get_if<ember::BlobId>(&rb[c]);
        if (ba != nullptr && bb != nullptr) {
          auto xa = BlobBytes(ta->get(), *ba), xb = BlobBytes(tb->get(), *bb);
          if (!xa.ok()) return xa.status();
          if (!xb.ok()) return xb.status();
          if (*xa != *xb) return eb::Wrong(absl::StrCat(name, " row ", n, ": BLOB differs"));
        } else if (ra[c] != rb[c]) {
          return eb::Wrong(absl::StrCat(name, " row ", n, " column ", c, " differs"));
        }
      }
      if (absl::Status s = (*ca)->Next(); !s.ok()) return s;
      if (absl::Status s = (*cb)->Next(); !s.ok()) return s;
    }
    if ((*cb)->Valid()) return eb::Wrong(absl::StrCat(name, ": the restore has more rows"));
  }
  return absl::OkStatus();
}

std::string RowName(const char* op, int64_t w) {
  return absl::StrCat("backup_restore/op:", op, "/workers:", w);
}

void RunBackup(benchmark::State& state, int w) {
  for (auto _ : state) {
    absl::StatusOr<std::unique_ptr<ember::Database>> db =
        ember::Database::Open(g_db, OptionsFor(w));
    if (eb::Failed(state, db.status(), "open")) return;
    const std::string path = eb::NewDbPath("backup", ".ebk");
    ember::BackupOptions bo;
    bo.workers = w;
    bo.zstd_level = static_cast<int>(FLAGS_zstd.i64());
    const ember::Counters before = (*db)->stats().pages;
    absl::StatusOr<ember::BackupResult> r = (*db)->Backup(path, bo);
    if (eb::Failed(state, r.status(), "backup")) return;
    state.SetIterationTime(r->seconds);
    eb::SetPageCounters(state, (*db)->stats().pages - before);
    if (eb::Failed(state, (*db)->Close(), "close")) return;
    if (r->rows != g_rows) {
      eb::Failed(state, eb::Wrong(absl::StrCat("the backup holds ", r->rows, " rows of ", g_rows)),
                 "backup");
      return;
    }
    state.counters["MBps"] = static_cast<double>(g_db_bytes) / 1e6 / r->seconds;
    state.counters["bytes"] = static_cast<double>(r->bytes);
    state.counters["db_bytes"] = static_cast<double>(g_db_bytes);
    state.counters["rows"] = static_cast<double>(r->rows);
    state.counters["workers"] = r->workers;
    if (!g_backup.empty()) eb::RemoveDbFiles(g_backup);
    g_backup = path;
  }
}

void RunRestore(benchmark::State& state, int w) {
  for (auto _ : state) {
    if (g_backup.empty()) {
      eb::Failed(state, eb::Wrong("no backup row ran first"), "restore");
      return;
    }
    const std::string path = eb::NewDbPath("restored");
    ember::RestoreOptions ro;
    ro.workers = w;
    absl::StatusOr<ember::RestoreResult> r = ember::Restore(g_backup, path, OptionsFor(w), ro);
    if (eb::Failed(state, r.status(), "restore")) return;
    state.SetIterationTime(r->seconds);
    const uint64_t bytes = eb::FileBytes(g_backup);
    state.counters["MBps"] = static_cast<double>(bytes) / 1e6 / r->seconds;
    state.counters["bytes"] = static_cast<double>(bytes);
    state.counters["db_bytes"] = static_cast<double>(eb::FileBytes(path));
    state.counters["rows"] = static_cast<double>(r->rows);
    state.counters["load_s"] = r->load_seconds;
    state.counters["index_s"] = r->index_seconds;
    state.counters["workers"] = r->workers;
    if (FLAGS_verify.b()) {
      ember::Options o = OptionsFor(1);
      o.cache_pages = 16384;
      auto a = ember::Database::Open(g_db, o);
      if (eb::Failed(state, a.status(), "open original")) return;
      auto b = ember::Database::Open(path, o);
      if (eb::Failed(state, b.status(), "open restored")) return;
      if (eb::Failed(state, Compare(a->get(), b->get()), "compare")) return;
      auto v = (*b)->Validate();
      if (eb::Failed(state, v.status(), "validate")) return;
      if (!v->ok()) {
        eb::Failed(state, eb::Wrong("the restored database does not validate: " + v->errors[0]),
                   "validate");
        return;
      }
      (void)(*a)->Close();
      (void)(*b)->Close();
    }
    eb::RemoveDbFiles(path);
  }
}

std::vector<int64_t> g_workers;

void PrintSummary() {
  std::FILE* out = eb::SummaryStream();
  std::fprintf(out,
               "\nBackup and restore of %llu rows (+%lld MB of BLOBs), database %.1f MB, page size "
               "%u, %u cores. Seconds; speed-up against %lld worker(s).\n",
               static_cast<unsigned long long>(g_rows), static_cast<long long>(FLAGS_blob_mb.i64()),
               static_cast<double>(g_db_bytes) / 1e6, kPageSize,
               std::thread::hardware_concurrency(), static_cast<long long>(g_workers.front()));
  std::fprintf(out, "%-8s", "op");
  for (int64_t w : g_workers) std::fprintf(out, " %9s %7s", absl::StrCat("w=", w).c_str(), "x");
  std::fprintf(out, "\n");
  for (const char* op : {"backup", "restore"}) {
    const double one = eb::Time(RowName(op, g_workers.front()));
    std::fprintf(out, "%-8s", op);
    for (int64_t w : g_workers) {
      const double s = eb::Time(RowName(op, w));
      std::fprintf(out, " %9s %7s", eb::Cell(s, 3).c_str(), eb::Ratio(one, s).c_str());
    }
    std::fprintf(out, "\n");
  }
  const double bytes = eb::CounterOf(RowName("backup", g_workers.front()), "bytes");
  if (bytes > 0) {
    std::fprintf(out, "backup file %.1f MB = %.2f of the database\n", bytes / 1e6,
                 bytes / static_cast<double>(g_db_bytes));
  }
  std::fprintf(out,
               "Firebird 3.0.11 embedded (8 KiB pages) on a 2-core VM of this class, 1M + 250K "
               "rows, no BLOBs (101 MB database), 2026-12-04: gbak -b 2.2-2.4 s (a 41 MB file), "
               "gbak -c 4.75-4.85 s. The article's Firebird 5, 1 -> 4 workers: backup 35.8 -> "
               "18.3 s, restore 201.6 -> 116.7 s.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (!eb::Init(&argc, argv)) return 1;
  if (!eb::ParseList(FLAGS_workers, &g_workers) || g_workers.empty()) return 1;
  for (int64_t w : g_workers) {
    if (w < 1 || w > 64) {
      std::fprintf(stderr, "backup_restore: workers 1..64, not %lld\n", static_cast<long long>(w));
      return 1;
    }
  }
  if (FLAGS_rows.i64() < 4 || FLAGS_blob_mb.i64() < 0) {
    std::fprintf(stderr, "backup_restore: --rows at least 4, --blob_mb at least 0\n");
    return 1;
  }
  if (FLAGS_zstd.i64() < 1 || FLAGS_zstd.i64() > 19) {
    std::fprintf(stderr, "backup_restore: --zstd takes 1..19\n");
    return 1;
  }
  bool loaded = false;
  auto ensure_loaded = [&loaded](benchmark::State& st) {
    if (loaded) return true;
    loaded = true;
    std::fprintf(stderr, "backup_restore: loading %lld rows and %lld MB of BLOBs...\n",
                 static_cast<long long>(FLAGS_rows.i64()),
                 static_cast<long long>(FLAGS_blob_mb.i64()));
    return !eb::Failed(st, Load(FLAGS_rows.i64(), FLAGS_blob_mb.i64()), "load");
  };
  for (int64_t w : g_workers) {
    eb::AddRow(RowName("backup", w), [w, ensure_loaded](benchmark::State& st) mutable {
      if (ensure_loaded(st)) RunBackup(st, static_cast<int>(w));
    });
  }
  for (int64_t w : g_workers) {
    eb::AddRow(RowName("restore", w), [w, ensure_loaded](benchmark::State& st) mutable {
      if (ensure_loaded(st)) RunRestore(st, static_cast<int>(w));
    });
  }
  eb::ResultReporter reporter(benchmark::CreateDefaultDisplayReporter());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (eb::AnyRowRan()) PrintSummary();
  if (!g_db.empty()) eb::RemoveDbFiles(g_db);
  if (!g_backup.empty()) eb::RemoveDbFiles(g_backup);
  eb::Finish();
  return eb::AnyFailed() ? 1 : 0;
}
