// bench/blob_temp: the BlobTempSpace experiment (HQbird; ../shared/design/experiments.md §1).
//
// One transaction builds a BLOB from --chunks pieces of --chunk_bytes with b = Concat(b, piece)
// (Firebird's `b = b || x`: every step makes a new temporary BLOB; the intermediate BLOBs live
// until the transaction ends, as in Firebird), assigns it to a row and commits. In database
// pages every step copies both operands (quadratic); in temp space the new BLOB shares the
// operands' extents (linear). Where the temporary BLOBs live is blob_temp_space:
//   mode 0 = database pages (the "off" case, for real: every byte goes through the buffer cache
//            into the database file), 1 = temp space for engine-made BLOBs (default), 2 = temp
//            space for all.
// Temp space = memory up to temp_cache_limit (--temp_cache_mb), then spill files in the temp
// directory: `ram` = /dev/shm, `disk` = a directory on the database's file system (or
// --temp_dir=DIR for any other).
//
// Rows:
//   blob_temp/mode:M/temp:ram|disk    Concat, M = 0, 1, 2
//   blob_append/mode:M/temp:ram|disk  the same BLOB built with Append (in place: linear)
//   blob_temp_scaling/mode:1/chunks:N and blob_append_scaling/mode:1/chunks:N (N = 250, 750,
//   2250; --scaling=0 skips them)
// Counters: block_s, commit_s, fetches, marks, reads, writes (block + commit), db_growth_bytes,
// temp_spill_bytes. Every run checks the stored BLOB (length and content) after the commit.
// At the end a table like the article's: time off vs on, speed-up, page writes off vs on.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/util/bench_util.h"
#include "ember/ember.h"

namespace eb = ember::bench;

eb::Flag FLAGS_chunks("chunks", int64_t{750}, "pieces concatenated into the BLOB");
eb::Flag FLAGS_chunk_bytes("chunk_bytes", int64_t{32768}, "bytes per piece");
eb::Flag FLAGS_temp_cache_mb("temp_cache_mb", int64_t{64}, "TempCacheLimit in MB");
eb::Flag FLAGS_modes("modes", "0,1,2", "blob_temp_space modes to run");
eb::Flag FLAGS_scaling("scaling", true, "run the scaling series (250, 750, 2250 chunks)");

namespace {

struct Result {
  double block_s = 0, commit_s = 0;
  ember::Counters pages;
  uint64_t growth = 0, spill = 0;
};
std::map<std::string, Result> g_results;  // by row name

uint64_t FileSize(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string TempDirFor(const std::string& where) {
  std::string dir;
  if (where == "ram") dir = absl::StrCat("/dev/shm/ember-blob-temp-", getpid());
  else if (where == "disk") dir = eb::DbDir() + "/temp";
  else dir = where;
  std::filesystem::create_directories(dir);
  return dir;
}

// The piece for step i: deterministic bytes, so the stored BLOB can be checked.
void FillPiece(std::string* piece, int64_t i) {
  for (size_t k = 0; k < piece->size(); ++k) (*piece)[k] = static_cast<char>((i * 131 + k * 7) & 0xFF);
}

void Run(benchmark::State& state, int mode, const std::string& where, int64_t chunks, bool append,
         const std::string& name) {
  for (auto _ : state) {
    const std::string path = eb::NewDbPath("blob_temp");
    const std::string tdir = TempDirFor(where);
    ember::Options o = eb::DefaultOptions();
    o.create_if_missing = true;
    o.blob_temp_space = mode;
    o.temp_directories = {tdir};
    o.temp_cache_limit = static_cast<uint64_t>(FLAGS_temp_cache_mb.i64()) << 20;
    Result r;
    {
      auto db = ember::Database::Open(path, o);
      if (eb::Failed(state, db.status(), "open")) return;
      auto table = (*db)->CreateTable({"t", {{"id", ember::ColumnType::kInt64},
                                             {"b", ember::ColumnType::kBlob}}});
      if (eb::Failed(state, table.status(), "create table")) return;
      const uint64_t size0 = FileSize(path);
      auto txn = (*db)->Begin();
      if (eb::Failed(state, txn.status(), "begin")) return;
      std::string piece(static_cast<size_t>(FLAGS_chunk_bytes.i64()), '\0');
      const auto t0 = std::chrono::steady_clock::now();
      ember::BlobId b{};
      for (int64_t i = 0; i < chunks; ++i) {
        FillPiece(&piece, i);
        if (append) {
          if (eb::Failed(state, (*txn)->Append(&b, piece), "append")) return;
        } else {
          auto nb = (*txn)->Concat(b, piece);
          if (eb::Failed(state, nb.status(), "concat")) return;
          b = *nb;
        }
      }
      const auto t1 = std::chrono::steady_clock::now();
      if (eb::Failed(state, (*txn)->Insert(*table, {int64_t{1}, b}).status(), "insert")) return;
      const ember::DatabaseStats before_commit = (*db)->stats();
      if (eb::Failed(state, (*txn)->Commit(), "commit")) return;
      const auto t2 = std::chrono::steady_clock::now();
      r.block_s = std::chrono::duration<double>(t1 - t0).count();
      r.commit_s = std::chrono::duration<double>(t2 - t1).count();
      r.pages = (*txn)->counters();
      r.spill = before_commit.temp_bytes_on_disk;
      r.growth = FileSize(path) - size0;
      txn->reset();
      // Check what was stored.
      auto check = (*db)->Begin();
      if (eb::Failed(state, check.status(), "begin check")) return;
      auto cur = (*check)->Scan(*table);
      if (eb::Failed(state, cur.status(), "scan") || !(*cur)->Valid()) {
        state.SkipWithError("stored row missing");
        return;
      }
      auto reader = (*check)->OpenBlob(std::get<ember::BlobId>((*cur)->row()[1]));
      if (eb::Failed(state, reader.status(), "open blob")) return;
      if ((*reader)->size() != static_cast<uint64_t>(chunks) * piece.size()) {
        state.SkipWithError("stored BLOB has the wrong length");
        return;
      }
      std::string got(piece.size(), '\0');
      for (int64_t i : {int64_t{0}, chunks / 2, chunks - 1}) {
        FillPiece(&piece, i);
        if (eb::Failed(state, (*reader)->Seek(static_cast<uint64_t>(i) * piece.size()), "seek")) return;
        auto n = (*reader)->Read(got.data(), got.size());
        if (eb::Failed(state, n.status(), "read") || got != piece) {
          state.SkipWithError("stored BLOB has the wrong content");
          return;
        }
      }
      reader->reset();
      cur->reset();
      (void)(*check)->Commit();
      check->reset();
      if (eb::Failed(state, (*db)->Close(), "close")) return;
    }
    eb::RemoveDbFiles(path);
    std::filesystem::remove_all(tdir);
    state.SetIterationTime(r.block_s + r.commit_s);
    g_results[name] = r;
    state.counters["block_s"] = r.block_s;
    state.counters["commit_s"] = r.commit_s;
    eb::SetPageCounters(state, r.pages);
    state.counters["db_growth_bytes"] = static_cast<double>(r.growth);
    state.counters["temp_spill_bytes"] = static_cast<double>(r.spill);
    state.counters["blob_bytes"] = static_cast<double>(chunks * FLAGS_chunk_bytes.i64());
  }
}

void Register(const std::string& name, int mode, const std::string& where, int64_t chunks,
              bool append) {
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
    Run(s, mode, where, chunks, append, name);
  })->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);
}

void PrintSummary() {
  if (g_results.empty()) return;  // nothing ran (a filter, or --benchmark_list_tests)
  std::FILE* out = eb::SummaryStream();
  std::fprintf(out, "\nBLOB temp space: %lld chunks of %lld bytes (b = Concat(b, piece))\n",
               static_cast<long long>(FLAGS_chunks.i64()),
               static_cast<long long>(FLAGS_chunk_bytes.i64()));
  std::fprintf(out, "%-6s %9s %9s %9s %9s %9s %12s %12s %9s\n", "temp", "off:block",
               "off:commit", "on:block", "on:commit", "speed-up", "off:writes", "on:writes",
               "writes x");
  for (const char* where : {"ram", "disk", "custom"}) {
    auto off = g_results.find(absl::StrCat("blob_temp/mode:0/temp:", where));
    auto on = g_results.find(absl::StrCat("blob_temp/mode:1/temp:", where));
    if (off == g_results.end() || on == g_results.end()) continue;
    const Result& a = off->second;
    const Result& b = on->second;
    std::fprintf(out, "%-6s %8.3fs %8.3fs %8.3fs %8.3fs %8.1fx %12llu %12llu %8.1fx\n", where,
                 a.block_s, a.commit_s, b.block_s, b.commit_s,
                 (a.block_s + a.commit_s) / std::max(1e-9, b.block_s + b.commit_s),
                 static_cast<unsigned long long>(a.pages.writes),
                 static_cast<unsigned long long>(b.pages.writes),
                 static_cast<double>(a.pages.writes) / std::max<double>(1, b.pages.writes));
  }
  for (const char* kind : {"blob_temp_scaling", "blob_append_scaling"}) {
    auto lo = g_results.find(absl::StrCat(kind, "/mode:1/chunks:750"));
    auto hi = g_results.find(absl::StrCat(kind, "/mode:1/chunks:2250"));
    if (lo == g_results.end() || hi == g_results.end()) continue;
    const double t_lo = lo->second.block_s + lo->second.commit_s;
    const double t_hi = hi->second.block_s + hi->second.commit_s;
    std::fprintf(out, "%s: 3x the chunks (750 -> 2250) takes %.2fx the time\n", kind,
                 t_hi / std::max(1e-9, t_lo));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!eb::Init(&argc, argv)) return 1;
  std::vector<std::string> wheres = {"ram", "disk"};
  if (eb::FLAGS_temp_dir.str() != "disk" && eb::FLAGS_temp_dir.str() != "ram") {
    wheres = {eb::FLAGS_temp_dir.str()};
  }
  std::vector<int> modes;
  for (char c : FLAGS_modes.str()) {
    if (c >= '0' && c <= '2') modes.push_back(c - '0');
  }
  for (bool append : {false, true}) {
    for (int m : modes) {
      for (const std::string& w : wheres) {
        const std::string label = (w == "ram" || w == "disk") ? w : "custom";
        Register(absl::StrCat(append ? "blob_append" : "blob_temp", "/mode:", m, "/temp:", label),
                 m, w, FLAGS_chunks.i64(), append);
      }
    }
  }
  if (FLAGS_scaling.b()) {
    for (bool append : {false, true}) {
      for (int64_t n : {250, 750, 2250}) {
        Register(absl::StrCat(append ? "blob_append_scaling" : "blob_temp_scaling",
                              "/mode:1/chunks:", n),
                 1, wheres[0], n, append);
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  PrintSummary();
  eb::Finish();
  return eb::AnyFailed() ? 1 : 0;
}
