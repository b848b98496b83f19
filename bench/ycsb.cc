// bench/ycsb: YCSB's core workloads (A, B, C, E, F) on EmberDB and on SQLite in the same run,
// one transaction per operation, every commit synced.
//
//   tools/dev bench ycsb [--records=200000] [--operations=20000] [--field_length=100]
//                        [--max_scan_length=100] [--workloads=a,b,c,f,e] [--runs=3] [--seed=42]
//                        [--load_batch=10000] [common flags, see bench/util/bench_util.h]
//                        [--benchmark_filter=... --benchmark_format=json ...]
//
// The table (YCSB's `usertable`), in both engines: ycsb_key string, field0..field9 strings of
// --field_length bytes (about 1 KB a row by default). EmberDB: records on data pages + a unique
// index on ycsb_key; SQLite: `ycsb_key TEXT PRIMARY KEY` on a rowid table (its automatic unique
// index: the same layout, and the table YCSB's JDBC binding creates) and ten TEXT columns.
//
// Keys are YCSB's: "user" + the decimal of fnvhash64(keynum) (YCSB's Utils.fnvhash64, its
// default insertorder=hashed), zero-padded to 19 digits (YCSB's zeropadding=19), so every key
// is 23 bytes and key order is the order of the hashes: a scan reads rows inserted at random
// times. A field value starts with 8 hex digits derived from its key and field number (the
// checks below read them), then letters that depend on the operation that wrote it.
//
// Rows (one-shot phases: Iterations(1), manual time; ops/s = items_per_second), per run R:
//   ycsb/load/run:R/ENGINE  a fresh database, keynums 0..records-1 inserted in keynum order in
//                           transactions of --load_batch rows (YCSB's load phase), timed on its
//                           own: it is not part of any workload's figures
//   ycsb/W/run:R/ENGINE     --operations operations of workload W, each its own transaction:
//       a  50% read, 50% update           b  95% read, 5% update        c  100% read
//       f  50% read, 50% read-modify-write
//       e  95% scan of 1..--max_scan_length rows (uniform) from a key, 5% insert of a new key
// As YCSB runs them, the workloads of a run go one after the other on the database the load of
// that run made, in the order A, B, C, F, E (E inserts, so it goes last; D, whose "latest"
// distribution is not implemented here, is left out): B reads what A updated, and so on.
// --workloads picks a subset; the order stays. Every run loads fresh databases.
//
// Operations as YCSB's CoreWorkload generates them (the same sequence for both engines, from
// --seed; generated before the clock starts): the operation by its proportions; the key by the
// request distribution zipfian, i.e. YCSB's ScrambledZipfianGenerator (zipfian constant 0.99
// over 10^10 items, ranks hashed with fnvhash64 onto keynums 0..records + 2 x expected inserts,
// redrawn while past the last key inserted), for reads, updates, read-modify-writes and E's scan
// starts; inserts take the next keynum (records, records + 1, ...: hashed keys); updates write
// one field chosen uniformly (YCSB's writeallfields=false); reads and scans read every field
// (readallfields=true).
//   EmberDB: a read is a read-only transaction with a Lookup through the key's index; an update
// is Lookup + Update + Commit: the API's Update writes a whole row, so the row is read and
// written back with the one field changed (YCSB's read-modify-write does the same plus the
// application's read of the row, which EmberDB's update already has). An insert is Insert +
// Commit; a scan an IndexScan from the start key, `length` rows, in a read-only transaction.
//   SQLite: prepared statements; a read, an update (`UPDATE usertable SET fieldN = ?`, one
// field), an insert and a scan (`WHERE ycsb_key >= ? ORDER BY ycsb_key LIMIT ?`) are one
// statement each in autocommit mode (one transaction each, as BEGIN/COMMIT around it would
// be); a read-modify-write is BEGIN, SELECT, UPDATE, COMMIT.
//
// Durability: --forced_writes=1 (the default) = EmberDB fsync at every commit (with torn-page
// protection, Options::doublewrite, on as by default) and SQLite synchronous=FULL. This
// benchmark always runs SQLite with journal_mode=WAL (YCSB's usual SQLite setup; the commit
// then syncs the log, and the database file is written at checkpoints, which SQLite starts
// itself every 1000 WAL pages inside the commit that crosses that size): --sqlite_journal
// takes only `wal` here.
//
// Timing: a workload's time is its operations plus, at the end, each engine's deferred work on
// what the workload wrote (settle_ms): EmberDB's Database::CollectGarbage (versions the updates
// left behind; SQLite overwrites rows in place) and Database::Checkpoint (pages still only in
// the doublewrite area's records), SQLite's PRAGMA wal_checkpoint(TRUNCATE) (pages still only
// in the WAL). The load ends the
// same way. Every operation is also timed alone: p50 / p99 / max latency per operation type
// (nearest rank over a sorted vector of all samples of the row) in microseconds, counters
// read_p50_us, update_p99_us, scan_max_us, ... with read_ops etc. Before every row the EmberDB
// collector is drained (untimed), so no background work spills into another row; both
// databases of a run stay open from row to row.
//
// Order: run R of every phase takes EmberDB first or SQLite first in turn (ABBA,
// bench/util/compare.h, the first engine also alternating from one phase to the next).
//
// Checks (a failure fails the row and makes the binary exit with 1; the engine's database is
// then dropped and loaded again, untimed, for its next row): every key read exists and comes
// back with ten fields of --field_length bytes whose first 8 bytes are the ones of that key and
// field (in the timed loop, as the CRC32C of everything read); a scan starts at its key and
// returns at most its length in ascending key order; an update or insert changes exactly one
// row. Untimed: everything a workload read (keys and fields, CRC32C) is the same in both
// engines when they ran it on the same history (same run, same workloads before it), and after
// a run's last workload both tables hold records + inserts rows with the same contents.
//
// Counters: ops (all operations), settle_ms, cpu_s (EmberDB: the process's CPU, its collector
// and sweep threads included; SQLite: the calling thread's, where SQLite does all its work),
// the latencies above, and the page counters of bench/core: EmberDB fetches, marks, reads,
// writes, dw_writes, all_writes, plus commits, flushes (group commit fsync rounds) and sweeps
// (automatic sweeps: every SweepInterval transactions); SQLite fetches, reads, writes,
// journal_writes (WAL pages), all_writes, syncs.
//
// At the end a summary per phase: ops/s of each engine (median over runs), the ratio EmberDB /
// SQLite of ops/s (above 1: EmberDB faster) and of the p99 update latency (below 1: EmberDB
// faster), and a table of p50 / p99 per operation type — on stdout for the console format, on
// stderr otherwise (JSON/CSV stay clean).
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/util/bench_util.h"
#include "bench/util/compare.h"
#include "bench/util/rows.h"
#include "bench/util/sqlite_util.h"
#include "ember/ember.h"
#include "engine/util/crc32c.h"

namespace eb = ember::bench;
using eb::operator-;

namespace {

eb::Flag FLAGS_records("records", int64_t{200000},
                       "rows loaded before the workloads (YCSB recordcount)");
eb::Flag FLAGS_operations("operations", int64_t{20000},
                          "operations per workload (YCSB operationcount)");
eb::Flag FLAGS_field_length("field_length", int64_t{100},
                            "bytes of each of the ten fields (YCSB fieldlength; at least 8)");
eb::Flag FLAGS_max_scan_length("max_scan_length", int64_t{100},
                               "workload E: a scan reads 1..N rows, uniform (YCSB maxscanlength)");
eb::Flag FLAGS_workloads("workloads", "a,b,c,f,e",
                         "workloads to run (of a, b, c, e, f); they always run in the order "
                         "A, B, C, F, E");
eb::Flag FLAGS_load_batch("load_batch", int64_t{10000}, "rows per transaction of the load");
eb::Flag FLAGS_seed("seed", int64_t{42}, "seed of the operation sequences");

constexpr int kFields = 10;
using Fields = std::array<std::string, kFields>;
using FieldViews = std::array<std::string_view, kFields>;

// ---------------------------------------------------------------- YCSB's generators

// YCSB's Utils.fnvhash64 (FNV-1a over the 8 bytes of the value, low byte first), with its
// Math.abs (the one value it leaves negative is taken as its magnitude).
uint64_t FnvHash64(uint64_t v) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int i = 0; i < 8; ++i) {
    h ^= v & 0xff;
    v >>= 8;
    h *= 1099511628211ull;
  }
  const auto s = static_cast<int64_t>(h);
  return s < 0 ? ~h + 1 : h;
}

std::string KeyOf(uint64_t keynum) { return absl::StrFormat("user%019u", FnvHash64(keynum)); }

double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// YCSB's ZipfianGenerator (Gray et al.'s algorithm): ranks 0, 1, ... of `items` items, 0 the
// most popular, with zeta(items) given.
class Zipfian {
 public:
  Zipfian(double items, double theta, double zetan)
      : items_(items),
        theta_(theta),
        zetan_(zetan),
        alpha_(1 / (1 - theta)),
        eta_((1 - std::pow(2.0 / items, 1 - theta)) / (1 - (1 + std::pow(0.5, theta)) / zetan)) {}
  uint64_t Next(std::mt19937_64& rng) const {
    const double u = Uniform(rng);
    const double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
    return static_cast<uint64_t>(items_ * std::pow(eta_ * u - eta_ + 1, alpha_));
  }

 private:
  double items_, theta_, zetan_, alpha_, eta_;
};

// YCSB's ScrambledZipfianGenerator(min, max): ranks of a zipfian over 10^10 items (constant
// 0.99, YCSB's precomputed zeta) hashed onto [min, max].
class ScrambledZipfian {
 public:
  ScrambledZipfian(uint64_t min, uint64_t max) : min_(min), count_(max - min + 1) {}
  uint64_t Next(std::mt19937_64& rng) const { return min_ + FnvHash64(zipf_.Next(rng)) % count_; }

 private:
  static constexpr double kItems = 10000000000.0 + 1;  // ZipfianGenerator(0, ITEM_COUNT)
  static constexpr double kZetan = 26.46902820178302;  // YCSB's ZETAN for ITEM_COUNT, 0.99
  uint64_t min_, count_;
  Zipfian zipf_{kItems, 0.99, kZetan};
};

// ---------------------------------------------------------------- values and checks

int64_t FieldLength() { return FLAGS_field_length.i64(); }

// The first 8 bytes of field `field` of the row with a key whose CRC32C is `key_crc`.
void TagOf(uint32_t key_crc, int field, char* out) {
  const uint64_t h = eb::Mix((uint64_t{key_crc} << 4) | static_cast<uint64_t>(field));
  for (int i = 0; i < 8; ++i) out[i] = "0123456789abcdef"[(h >> (4 * i)) & 15];
}

uint32_t KeyCrc(std::string_view key) { return ember::util::Crc32c(key.data(), key.size()); }

// A value for `field` of `key` written by the operation `stamp` (0: the load).
void FieldValue(uint32_t key_crc, int field, uint64_t stamp, std::string* out) {
  out->resize(static_cast<size_t>(FieldLength()));
  TagOf(key_crc, field, out->data());
  uint64_t h = eb::Mix(stamp ^ (uint64_t{key_crc} << 20) ^ static_cast<uint64_t>(field));
  for (size_t i = 8; i < out->size(); ++i) {
    if ((i & 7) == 0) h = eb::Mix(h);
    (*out)[i] = static_cast<char>('a' + ((h >> ((i & 7) * 8)) & 0xFF) % 26);
  }
}

void MakeRecord(uint64_t keynum, std::string* key, Fields* fields) {
  *key = KeyOf(keynum);
  const uint32_t crc = KeyCrc(*key);
  for (int i = 0; i < kFields; ++i) FieldValue(crc, i, 0, &(*fields)[i]);
}

// What the reads of a phase returned: checked row by row, and folded into a CRC32C that the
// other engine's run of the same phase must reproduce.
class Answer {
 public:
  uint32_t digest() const { return digest_; }
  int64_t rows() const { return rows_; }

  // A point read of `want` returned the row (key, fields).
  absl::Status Point(std::string_view want, std::string_view key, const FieldViews& f) {
    if (key != want) {
      return eb::Wrong(absl::StrCat("read of ", std::string(want), " returned ", std::string(key)));
    }
    return Row(key, f);
  }
  static absl::Status Missing(std::string_view key) {
    return eb::Wrong(absl::StrCat("key ", std::string(key), " not found"));
  }
  // A scan from `start` (empty: from the first key, no limit).
  void BeginScan(std::string_view start) {
    start_ = start;
    last_.clear();
    scanned_ = 0;
  }
  absl::Status ScanRow(std::string_view key, const FieldViews& f) {
    if (scanned_ == 0 && !start_.empty() && key != start_) {
      return eb::Wrong(absl::StrCat("scan from ", start_, " began at ", std::string(key)));
    }
    if (scanned_ > 0 && key <= last_) {
      return eb::Wrong(absl::StrCat("scan: ", std::string(key), " after ", last_));
    }
    last_.assign(key);
    ++scanned_;
    return Row(key, f);
  }
  absl::Status EndScan(int64_t limit) {
    if (scanned_ == 0 && !start_.empty()) {
      return eb::Wrong(absl::StrCat("scan from ", start_, " found nothing"));
    }
    if (limit > 0 && scanned_ > limit) {
      return eb::Wrong(absl::StrCat("scan of ", limit, " rows returned ", scanned_));
    }
    digest_ = ember::util::Crc32cExtend(digest_, &scanned_, sizeof scanned_);
    return absl::OkStatus();
  }

 private:
  absl::Status Row(std::string_view key, const FieldViews& f) {
    const uint32_t crc = KeyCrc(key);
    digest_ = ember::util::Crc32cExtend(digest_, key.data(), key.size());
    for (int i = 0; i < kFields; ++i) {
      char tag[8];
      TagOf(crc, i, tag);
      if (static_cast<int64_t>(f[i].size()) != FieldLength() || f[i].compare(0, 8, tag, 8) != 0) {
        return eb::Wrong(
            absl::StrCat("field", i, " of ", std::string(key), " is not a value written for it"));
      }
      digest_ = ember::util::Crc32cExtend(digest_, f[i].data(), f[i].size());
    }
    ++rows_;
    return absl::OkStatus();
  }

  uint32_t digest_ = 0;
  int64_t rows_ = 0;
  std::string start_, last_;
  int64_t scanned_ = 0;
};

// ---------------------------------------------------------------- workloads and operations

enum class OpType { kRead, kUpdate, kInsert, kScan, kRmw };
constexpr int kOpTypes = 5;
constexpr const char* kOpNames[kOpTypes] = {"read", "update", "insert", "scan", "rmw"};

struct Workload {
  char letter;
  const char* mix;              // for the summary
  double proportion[kOpTypes];  // in OpType order, as YCSB's CoreWorkload lists them
};
// Phase 0 is the load; phases 1.. the workloads in the order they run.
constexpr int kLoad = 0;
constexpr Workload kWorkloads[] = {
    {'a', "50% read, 50% update", {0.5, 0.5, 0, 0, 0}},
    {'b', "95% read, 5% update", {0.95, 0.05, 0, 0, 0}},
    {'c', "100% read", {1, 0, 0, 0, 0}},
    {'f', "50% read, 50% rmw", {0.5, 0, 0, 0, 0.5}},
    {'e', "95% scan, 5% insert", {0, 0, 0.05, 0.95, 0}},
};
constexpr int kPhases = 1 + static_cast<int>(std::size(kWorkloads));

std::string PhaseName(int phase) {
  return phase == kLoad ? "load" : std::string(1, kWorkloads[phase - 1].letter);
}

struct Op {
  OpType type;
  std::string key;
  int field = 0;                    // update, rmw: the field written
  int64_t scan_length = 0;          // scan
  std::vector<std::string> values;  // update, rmw: the new field; insert: all ten
};

// The operations of workload `w` on a table holding keynums 0..rows-1: YCSB's CoreWorkload
// (see the file comment), the same for every engine and run.
std::vector<Op> MakeOps(const Workload& w, int phase, int64_t rows) {
  std::mt19937_64 rng(
      eb::Mix(static_cast<uint64_t>(FLAGS_seed.i64()) ^ static_cast<uint64_t>(w.letter)));
  const int64_t n = FLAGS_operations.i64();
  const auto expected_new = static_cast<uint64_t>(static_cast<double>(n) * w.proportion[2] * 2.0);
  const ScrambledZipfian keys(0, static_cast<uint64_t>(rows) + expected_new);
  auto next_insert = static_cast<uint64_t>(rows);
  std::vector<Op> ops(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    Op& op = ops[static_cast<size_t>(i)];
    double u = Uniform(rng);  // YCSB's DiscreteGenerator
    int t = 0;
    while (t < kOpTypes - 1 && u >= w.proportion[t]) u -= w.proportion[t++];
    while (w.proportion[t] == 0) --t;  // rounding past the last one
    op.type = static_cast<OpType>(t);
    uint64_t keynum;
    if (op.type == OpType::kInsert) {
      keynum = next_insert++;
    } else {
      do keynum = keys.Next(rng);
      while (keynum >= next_insert);
    }
    op.key = KeyOf(keynum);
    const uint64_t stamp = (static_cast<uint64_t>(phase) << 32) | static_cast<uint64_t>(i + 1);
    const uint32_t crc = KeyCrc(op.key);
    if (op.type == OpType::kUpdate || op.type == OpType::kRmw) {
      op.field = static_cast<int>(rng() % kFields);
      op.values.resize(1);
      FieldValue(crc, op.field, stamp, &op.values[0]);
    } else if (op.type == OpType::kInsert) {
      op.values.resize(kFields);
      for (int f = 0; f < kFields; ++f) {
        FieldValue(crc, f, stamp, &op.values[static_cast<size_t>(f)]);
      }
    } else if (op.type == OpType::kScan) {
      const auto longest = static_cast<uint64_t>(FLAGS_max_scan_length.i64());
      op.scan_length = 1 + static_cast<int64_t>(rng() % longest);
    }
  }
  return ops;
}

// ---------------------------------------------------------------- the engines

// One engine's database of the benchmark.
class Store {
 public:
  virtual ~Store() = default;
  virtual bool is_open() const = 0;
  virtual absl::Status Create() = 0;  // a fresh empty table (the old database dropped)
  virtual absl::Status Drop() = 0;
  // keynums 0..n-1, in transactions of `batch` rows.
  absl::Status Load(int64_t n, int64_t batch) {
    std::string key;
    Fields fields;
    for (int64_t first = 0; first < n; first += batch) {
      if (absl::Status s = BeginLoad(); !s.ok()) return s;
      for (int64_t k = first; k < std::min(n, first + batch); ++k) {
        MakeRecord(static_cast<uint64_t>(k), &key, &fields);
        if (absl::Status s = LoadRow(key, fields); !s.ok()) return eb::With(s, "load " + key);
      }
      if (absl::Status s = CommitLoad(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  virtual absl::Status Read(const std::string& key, Answer* a) = 0;
  virtual absl::Status Update(const std::string& key, int field, const std::string& value) = 0;
  virtual absl::Status ReadModifyWrite(const std::string& key, int field, const std::string& value,
                                       Answer* a) = 0;
  virtual absl::Status Insert(const std::string& key, const std::vector<std::string>& fields) = 0;
  virtual absl::Status Scan(const std::string& start, int64_t length, Answer* a) = 0;
  virtual absl::Status ScanAll(Answer* a) = 0;  // every row in key order
  virtual absl::Status Settle() = 0;            // the deferred work (file comment)
  virtual absl::Status Quiesce() = 0;           // untimed, before a row
  virtual double Cpu() const = 0;
  virtual void StartCounters() = 0;
  virtual void SetCounters(benchmark::State& state) = 0;

 protected:
  // A transaction of the load, and its rows.
  virtual absl::Status BeginLoad() = 0;
  virtual absl::Status LoadRow(const std::string& key, const Fields& fields) = 0;
  virtual absl::Status CommitLoad() = 0;
  // Removes the database's files (after its close).
  void RemoveFiles() {
    if (!path_.empty()) eb::RemoveDbFiles(path_);
    path_.clear();
  }
  std::string path_;
};

// ---- EmberDB

FieldViews ViewsOf(const ember::Row& row) {
  FieldViews v;
  for (int i = 0; i < kFields; ++i) v[i] = std::get<std::string>(row[static_cast<size_t>(i + 1)]);
  return v;
}

class EmberStore final : public Store {
 public:
  bool is_open() const override { return db_ != nullptr; }

  absl::Status Create() override {
    (void)Drop();
    path_ = eb::NewDbPath("ycsb-ember");
    auto d = ember::Database::Open(path_, eb::DefaultOptions());
    if (!d.ok()) return d.status();
    db_ = std::move(*d);
    ember::TableSchema schema{"usertable", {{"ycsb_key", ember::ColumnType::kString, false}}};
    for (int i = 0; i < kFields; ++i) {
      schema.columns.push_back({absl::StrCat("field", i), ember::ColumnType::kString, false});
    }
    auto t = db_->CreateTable(schema);
    if (!t.ok()) return t.status();
    table_ = *t;
    auto ix = db_->CreateIndex({"usertable_pk", "usertable", {"ycsb_key"}, /*unique=*/true});
    if (!ix.ok()) return ix.status();
    pk_ = *ix;
    return absl::OkStatus();
  }

  absl::Status Drop() override {
    load_txn_.reset();
    absl::Status s;
    if (db_) s = db_->Close();
    db_.reset();
    RemoveFiles();
    return s;
  }

  absl::Status Read(const std::string& key, Answer* a) override {
    auto txn = db_->Begin(ReadOnly());
    if (!txn.ok()) return txn.status();
    auto r = (*txn)->Lookup(pk_, {key});
    if (!r.ok()) return r.status();
    if (!r->has_value()) return Answer::Missing(key);
    const ember::Row& row = (*r)->second;
    if (absl::Status s = a->Point(key, std::get<std::string>(row[0]), ViewsOf(row)); !s.ok()) {
      return s;
    }
    return (*txn)->Commit();
  }

  absl::Status Update(const std::string& key, int field, const std::string& value) override {
    return Write(key, field, value, nullptr);
  }
  absl::Status ReadModifyWrite(const std::string& key, int field, const std::string& value,
                               Answer* a) override {
    return Write(key, field, value, a);
  }

  absl::Status Insert(const std::string& key, const std::vector<std::string>& fields) override {
    auto txn = db_->Begin();
    if (!txn.ok()) return txn.status();
    if (auto r = (*txn)->Insert(table_, RowOf(key, fields)); !r.ok()) return r.status();
    return (*txn)->Commit();
  }

  absl::Status Scan(const std::string& start, int64_t length, Answer* a) override {
    auto txn = db_->Begin(ReadOnly());
    if (!txn.ok()) return txn.status();
    if (absl::Status s = ScanFrom(**txn, {start}, start, length, a); !s.ok()) return s;
    return (*txn)->Commit();
  }

  absl::Status ScanAll(Answer* a) override {
    auto txn = db_->Begin(ReadOnly());
    if (!txn.ok()) return txn.status();
    if (absl::Status s = ScanFrom(**txn, {}, "", 0, a); !s.ok()) return s;
    return (*txn)->Commit();
  }

  absl::Status Settle() override {
    absl::Status s = db_->CollectGarbage();
    return s.ok() ? db_->Checkpoint() : s;  // the records' pages, written home
  }
  absl::Status Quiesce() override {
    return db_ ? eb::WaitForCollector(*db_, path_) : absl::OkStatus();
  }
  double Cpu() const override { return eb::ProcessCpuSeconds(); }
  void StartCounters() override { before_ = db_->stats(); }
  void SetCounters(benchmark::State& state) override {
    const ember::DatabaseStats after = db_->stats();
    const ember::Counters pages = after.pages - before_.pages;
    eb::SetPageCounters(state, pages);
    eb::SetAllWrites(state, pages);
    state.counters["commits"] = static_cast<double>(after.commits - before_.commits);
    state.counters["flushes"] =
        static_cast<double>(after.group_commit_flushes - before_.group_commit_flushes);
    state.counters["sweeps"] = static_cast<double>(after.sweeps - before_.sweeps);
  }

 private:
  absl::Status BeginLoad() override {
    auto txn = db_->Begin();
    if (!txn.ok()) return txn.status();
    load_txn_ = std::move(*txn);
    return absl::OkStatus();
  }
  absl::Status LoadRow(const std::string& key, const Fields& fields) override {
    return load_txn_->Insert(table_, RowOf(key, fields)).status();
  }
  absl::Status CommitLoad() override {
    absl::Status s = load_txn_->Commit();
    load_txn_.reset();
    return s;
  }

  template <typename Values>
  static ember::Row RowOf(const std::string& key, const Values& fields) {
    ember::Row row(kFields + 1);
    row[0] = key;
    for (size_t i = 0; i < kFields; ++i) row[i + 1] = fields[i];
    return row;
  }

  static ember::TransactionOptions ReadOnly() {
    ember::TransactionOptions ro;
    ro.read_only = true;
    return ro;
  }

  // An update (a == nullptr) or a read-modify-write: the row is read and written back whole
  // with one field changed (Transaction::Update replaces the row).
  absl::Status Write(const std::string& key, int field, const std::string& value, Answer* a) {
    auto txn = db_->Begin();
    if (!txn.ok()) return txn.status();
    auto r = (*txn)->Lookup(pk_, {key});
    if (!r.ok()) return r.status();
    if (!r->has_value()) return Answer::Missing(key);
    ember::Row row = std::move((*r)->second);
    if (a) {
      if (absl::Status s = a->Point(key, std::get<std::string>(row[0]), ViewsOf(row)); !s.ok()) {
        return s;
      }
    }
    row[static_cast<size_t>(field + 1)] = value;
    if (absl::Status s = (*txn)->Update(table_, (*r)->first, row); !s.ok()) return s;
    return (*txn)->Commit();
  }

  absl::Status ScanFrom(ember::Transaction& txn, const ember::Row& lo, const std::string& start,
                        int64_t length, Answer* a) {
    auto cur = txn.IndexScan(pk_, lo, {});
    if (!cur.ok()) return cur.status();
    a->BeginScan(start);
    for (int64_t n = 0; (*cur)->Valid() && (length == 0 || n < length); ++n) {
      const ember::Row& row = (*cur)->row();
      if (absl::Status s = a->ScanRow(std::get<std::string>(row[0]), ViewsOf(row)); !s.ok()) {
        return s;
      }
      if (absl::Status s = (*cur)->Next(); !s.ok()) return s;
    }
    return a->EndScan(length);
  }

  std::unique_ptr<ember::Database> db_;
  std::unique_ptr<ember::Transaction> load_txn_;
  ember::Table table_;
  ember::Index pk_;
  ember::DatabaseStats before_;
};

// ---- SQLite

constexpr const char* kColumns =
    "ycsb_key, field0, field1, field2, field3, field4, field5, field6, field7, field8, field9";

std::string_view TextOf(sqlite3_stmt* st, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, col));
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(st, col)))
           : std::string_view();
}

FieldViews ViewsOf(sqlite3_stmt* st) {
  FieldViews v;
  for (int i = 0; i < kFields; ++i) v[i] = TextOf(st, i + 1);
  return v;
}

void BindText(sqlite3_stmt* st, int i, std::string_view s) {
  sqlite3_bind_text(st, i, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

class SqliteStore final : public Store {
 public:
  bool is_open() const override { return db_ != nullptr; }

  absl::Status Create() override {
    (void)Drop();
    path_ = eb::NewDbPath("ycsb-sqlite", ".sqlite");
    if (absl::Status s = eb::OpenSqlite(path_, &db_); !s.ok()) return s;
    std::string create = "CREATE TABLE usertable(ycsb_key TEXT PRIMARY KEY";
    for (int i = 0; i < kFields; ++i) absl::StrAppend(&create, ", field", i, " TEXT NOT NULL");
    if (absl::Status s = eb::SqlExec(db_, create + ")"); !s.ok()) return s;
    st_ = std::make_unique<Statements>();
    const std::string select = absl::StrCat("SELECT ", kColumns, " FROM usertable");
    for (auto [stmt, sql] : std::initializer_list<std::pair<eb::Stmt*, std::string>>{
             {&st_->read, select + " WHERE ycsb_key = ?1"},
             {&st_->scan, select + " WHERE ycsb_key >= ?1 ORDER BY ycsb_key LIMIT ?2"},
             {&st_->all, select + " ORDER BY ycsb_key"},
             {&st_->insert, absl::StrCat("INSERT INTO usertable(", kColumns,
                                         ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)")},
             {&st_->begin, "BEGIN"},
             {&st_->commit, "COMMIT"}}) {
      if (absl::Status s = stmt->Prepare(db_, sql.c_str()); !s.ok()) return s;
    }
    for (int i = 0; i < kFields; ++i) {
      const std::string sql =
          absl::StrCat("UPDATE usertable SET field", i, " = ?1 WHERE ycsb_key = ?2");
      if (absl::Status s = st_->update[i].Prepare(db_, sql.c_str()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Drop() override {
    st_.reset();  // statements are finalized before the close
    absl::Status s;
    if (db_ && sqlite3_close(db_) != SQLITE_OK) s = eb::SqlError(db_, "close");
    db_ = nullptr;
    RemoveFiles();
    return s;
  }

  absl::Status Read(const std::string& key, Answer* a) override {
    sqlite3_stmt* st = st_->read.get();
    BindText(st, 1, key);
    absl::Status s = ReadRow(st, key, a);
    sqlite3_reset(st);
    return s;
  }

  absl::Status Update(const std::string& key, int field, const std::string& value) override {
    sqlite3_stmt* st = st_->update[field].get();
    BindText(st, 1, value);
    BindText(st, 2, key);
    if (absl::Status s = Done(st, "update"); !s.ok()) return s;
    if (sqlite3_changes(db_) != 1) {
      return eb::Wrong(absl::StrCat("update of ", key, " changed ", sqlite3_changes(db_), " rows"));
    }
    return absl::OkStatus();
  }

  absl::Status ReadModifyWrite(const std::string& key, int field, const std::string& value,
                               Answer* a) override {
    if (absl::Status s = Done(st_->begin.get(), "begin"); !s.ok()) return s;
    absl::Status s = Read(key, a);
    if (s.ok()) s = Update(key, field, value);
    if (s.ok()) return Done(st_->commit.get(), "commit");
    (void)eb::SqlExec(db_, "ROLLBACK");
    return s;
  }

  absl::Status Insert(const std::string& key, const std::vector<std::string>& fields) override {
    return InsertRow(key, fields);
  }

  absl::Status Scan(const std::string& start, int64_t length, Answer* a) override {
    sqlite3_stmt* st = st_->scan.get();
    BindText(st, 1, start);
    sqlite3_bind_int64(st, 2, length);
    absl::Status s = ScanRows(st, start, length, a);
    sqlite3_reset(st);
    return s;
  }

  absl::Status ScanAll(Answer* a) override {
    absl::Status s = ScanRows(st_->all.get(), "", 0, a);
    sqlite3_reset(st_->all.get());
    return s;
  }

  absl::Status Settle() override { return eb::SqliteCheckpoint(db_); }
  absl::Status Quiesce() override { return absl::OkStatus(); }
  double Cpu() const override { return eb::ThreadCpuSeconds(); }
  void StartCounters() override {
    (void)eb::TakeSqlitePages(db_);
    (void)eb::TakeSqliteIo();
  }
  void SetCounters(benchmark::State& state) override {
    const ember::Counters pages = eb::TakeSqlitePages(db_);
    eb::SetSqliteCounters(state, pages, eb::TakeSqliteIo());
  }

 private:
  absl::Status BeginLoad() override { return Done(st_->begin.get(), "begin"); }
  absl::Status LoadRow(const std::string& key, const Fields& fields) override {
    return InsertRow(key, fields);
  }
  absl::Status CommitLoad() override { return Done(st_->commit.get(), "commit"); }

  template <typename Values>
  absl::Status InsertRow(const std::string& key, const Values& fields) {
    sqlite3_stmt* st = st_->insert.get();
    BindText(st, 1, key);
    for (size_t i = 0; i < kFields; ++i) BindText(st, static_cast<int>(i) + 2, fields[i]);
    return Done(st, "insert");
  }

  struct Statements {
    eb::Stmt read, scan, all, insert, begin, commit;
    eb::Stmt update[kFields];
  };

  // Steps a statement that returns no rows, and resets it.
  absl::Status Done(sqlite3_stmt* st, const char* what) {
    const int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? absl::OkStatus() : eb::SqlError(db_, what);
  }

  absl::Status ReadRow(sqlite3_stmt* st, const std::string& key, Answer* a) {
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return Answer::Missing(key);
    if (rc != SQLITE_ROW) return eb::SqlError(db_, "read");
    return a->Point(key, TextOf(st, 0), ViewsOf(st));
  }

  absl::Status ScanRows(sqlite3_stmt* st, const std::string& start, int64_t length, Answer* a) {
    a->BeginScan(start);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      if (absl::Status s = a->ScanRow(TextOf(st, 0), ViewsOf(st)); !s.ok()) return s;
    }
    if (rc != SQLITE_DONE) return eb::SqlError(db_, "scan");
    return a->EndScan(length);
  }

  sqlite3* db_ = nullptr;
  std::unique_ptr<Statements> st_;
};

// ---------------------------------------------------------------- the phases

enum Engine { kEmber, kSqlite };
constexpr const char* kEngineNames[] = {"ember", "sqlite"};

EmberStore g_ember;
SqliteStore g_sqlite;
Store& StoreOf(int e) { return e == kEmber ? static_cast<Store&>(g_ember) : g_sqlite; }

// What an engine's database holds: loaded by run `run` (-1: nothing), the workloads applied
// since (their letters), and its row count.
struct History {
  int run = -1;
  std::string applied;
  int64_t rows = 0;
};
History g_history[2];

std::vector<int> g_phases;  // the phases that run, in order (the load first)
int64_t Records() { return FLAGS_records.i64(); }

std::string RowName(int phase, int engine, int run) {
  return absl::StrCat("ycsb/", PhaseName(phase), "/run:", run, "/", kEngineNames[engine]);
}

// Results for the summary: per phase, the paired times; per (phase, engine, op type), each
// run's p50 and p99 in microseconds.
eb::Comparison g_cmp[kPhases];
int64_t g_items[kPhases];
std::map<std::tuple<int, int, int>, std::vector<double>> g_p50, g_p99;
// CRC32C of the answers of the first engine to run a phase on a given history, for the second.
std::map<std::string, uint32_t> g_digests;

// Loads the engine's database for `run` (untimed) unless it holds it already.
absl::Status EnsureLoaded(int engine, int run) {
  History& h = g_history[engine];
  Store& store = StoreOf(engine);
  if (store.is_open() && h.run == run) return absl::OkStatus();
  std::fprintf(stderr, "bench: loading %lld rows into %s (untimed)\n",
               static_cast<long long>(Records()), kEngineNames[engine]);
  h = History{};
  if (absl::Status s = store.Create(); !s.ok()) return s;
  if (absl::Status s = store.Load(Records(), FLAGS_load_batch.i64()); !s.ok()) return s;
  h = {run, "", Records()};
  return absl::OkStatus();
}

// The first engine to reach `key` leaves its digest there; the second must match it.
absl::Status SameAsOther(const std::string& key, uint32_t digest, int engine) {
  auto [it, first] = g_digests.emplace(key, digest);
  if (first || it->second == digest) return absl::OkStatus();
  return eb::Wrong(absl::StrCat("what ", kEngineNames[engine], " read differs from what ",
                                kEngineNames[1 - engine], " read (", key, ")"));
}

double Micros(eb::Clock::time_point a, eb::Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

absl::Status RunOps(Store& store, const std::vector<Op>& ops,
                    std::array<std::vector<double>, kOpTypes>* lat, Answer* a) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const auto t0 = eb::Clock::now();
    absl::Status s;
    switch (op.type) {
      case OpType::kRead: s = store.Read(op.key, a); break;
      case OpType::kUpdate: s = store.Update(op.key, op.field, op.values[0]); break;
      case OpType::kInsert: s = store.Insert(op.key, op.values); break;
      case OpType::kScan: s = store.Scan(op.key, op.scan_length, a); break;
      case OpType::kRmw: s = store.ReadModifyWrite(op.key, op.field, op.values[0], a); break;
    }
    const auto t1 = eb::Clock::now();
    if (!s.ok()) {
      return eb::With(s, absl::StrCat("operation ", i, " (", kOpNames[static_cast<int>(op.type)],
                                      " of ", op.key, ")"));
    }
    (*lat)[static_cast<size_t>(op.type)].push_back(Micros(t0, t1));
  }
  return absl::OkStatus();
}

// Nearest rank on sorted samples.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

void BM_Phase(benchmark::State& state, int phase, int engine, int run) {
  Store& store = StoreOf(engine);
  History& h = g_history[engine];
  const std::string what = RowName(phase, engine, run);
  std::vector<Op> ops;
  std::string history_before;
  if (phase == kLoad) {
    h = History{};
    if (eb::Failed(state, store.Create(), what + " create")) return;
  } else {
    if (eb::Failed(state, EnsureLoaded(engine, run), what + " load")) return;
    history_before = h.applied;
    ops = MakeOps(kWorkloads[phase - 1], phase, h.rows);
  }
  for (int e : {kEmber, kSqlite}) {
    if (eb::Failed(state, StoreOf(e).Quiesce(), what + " quiesce")) return;
  }
  std::array<std::vector<double>, kOpTypes> lat;
  for (auto& v : lat) v.reserve(ops.size());
  Answer answer;
  const int64_t items = phase == kLoad ? Records() : static_cast<int64_t>(ops.size());
  for (auto _ : state) {
    store.StartCounters();
    const double cpu0 = store.Cpu();
    const auto t0 = eb::Clock::now();
    absl::Status s = phase == kLoad ? store.Load(Records(), FLAGS_load_batch.i64())
                                    : RunOps(store, ops, &lat, &answer);
    const auto t1 = eb::Clock::now();
    if (s.ok()) s = eb::With(store.Settle(), "settling");
    const auto t2 = eb::Clock::now();
    const double cpu = store.Cpu() - cpu0;
    store.SetCounters(state);
    // The untimed checks (file comment).
    if (s.ok()) {
      if (phase == kLoad) {
        h = {run, "", Records()};
      } else {
        s = SameAsOther(
            absl::StrCat("run:", run, "/", PhaseName(phase), " after '", history_before, "'"),
            answer.digest(), engine);
        h.applied += PhaseName(phase);
        h.rows += static_cast<int64_t>(lat[static_cast<size_t>(OpType::kInsert)].size());
      }
    }
    if (s.ok() && phase == g_phases.back()) {
      Answer all;
      s = store.ScanAll(&all);
      if (s.ok() && all.rows() != h.rows) {
        s = eb::Wrong(absl::StrCat("the table holds ", all.rows(), " rows, not ", h.rows));
      }
      if (s.ok()) {
        s = SameAsOther(absl::StrCat("run:", run, "/table after '", h.applied, "'"), all.digest(),
                        engine);
      }
    }
    if (eb::Failed(state, s, what)) {
      (void)store.Drop();  // unknown state: loaded again for the next row
      h = History{};
      return;
    }
    state.SetIterationTime(eb::Seconds(t0, t2));
    state.counters["cpu_s"] = cpu;
    state.counters["settle_ms"] = eb::Seconds(t1, t2) * 1e3;
    state.counters["ops"] = static_cast<double>(items);
    g_cmp[phase].Set(engine == kEmber, run, {eb::Seconds(t0, t2), cpu});
    g_items[phase] = items;
  }
  state.SetItemsProcessed(items);
  for (int t = 0; t < kOpTypes; ++t) {
    std::vector<double>& v = lat[static_cast<size_t>(t)];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    const double p50 = Percentile(v, 50), p99 = Percentile(v, 99);
    const std::string n = kOpNames[t];
    state.counters[n + "_ops"] = static_cast<double>(v.size());
    state.counters[n + "_p50_us"] = p50;
    state.counters[n + "_p99_us"] = p99;
    state.counters[n + "_max_us"] = v.back();
    g_p50[{phase, engine, t}].push_back(p50);
    g_p99[{phase, engine, t}].push_back(p99);
  }
}

// ---------------------------------------------------------------- summary

double MedianOf(const std::map<std::tuple<int, int, int>, std::vector<double>>& m, int phase,
                int engine, int t) {
  auto it = m.find({phase, engine, t});
  return it == m.end() ? -1 : eb::Median(it->second);
}

// EmberDB's ops/s over SQLite's, per run paired: median, smallest, largest.
struct OpsRatio {
  double median = 0, lo = 0, hi = 0;
};
OpsRatio OpsRatioOf(const eb::Comparison& c) {
  std::vector<double> r;
  for (size_t i = 0; i < std::min(c.ember.size(), c.other.size()); ++i) {
    if (c.ember_ok[i] && c.other_ok[i] && c.ember[i].seconds > 0) {
      r.push_back(c.other[i].seconds / c.ember[i].seconds);
    }
  }
  if (r.empty()) return {};
  const auto [lo, hi] = std::minmax_element(r.begin(), r.end());
  return {eb::Median(r), *lo, *hi};
}

std::string WorkOf(int phase) {
  if (phase == kLoad) {
    return absl::StrCat(Records(), " rows, ", FLAGS_load_batch.i64(), "/txn");
  }
  return absl::StrCat(FLAGS_operations.i64(), " ops: ", kWorkloads[phase - 1].mix);
}

void PrintSummary() {
  std::FILE* out = eb::SummaryStream();
  bool any = false;
  for (const eb::Comparison& c : g_cmp) any |= eb::Pair(c).runs > 0;
  if (any) {
    std::fprintf(out,
                 "\nycsb: EmberDB vs SQLite, YCSB core workloads (records=%lld, "
                 "field_length=%lld, zipfian 0.99 scrambled; one transaction per operation; "
                 "forced_writes=%s -> SQLite journal_mode=WAL synchronous=%s; %d run%s, "
                 "alternating which engine goes first)\n",
                 static_cast<long long>(Records()), static_cast<long long>(FieldLength()),
                 eb::FLAGS_forced_writes.str().c_str(),
                 eb::FLAGS_forced_writes.b() ? "FULL" : "OFF", eb::Runs(),
                 eb::Runs() == 1 ? "" : "s");
    std::fprintf(out, "%-5s %-33s %12s %12s %6s %11s %10s %10s %9s\n", "phase", "work",
                 "EmberDB op/s", "SQLite op/s", "ratio", "(lo-hi)", "EmberDB cpu", "SQLite cpu",
                 "upd p99");
    eb::Tally tally;
    for (int phase : g_phases) {
      const eb::Paired p = eb::Pair(g_cmp[phase]);
      if (p.runs == 0) continue;
      const OpsRatio r = OpsRatioOf(g_cmp[phase]);
      const auto n = static_cast<double>(g_items[phase]);
      const int upd = static_cast<int>(OpType::kUpdate);
      std::fprintf(
          out, "%-5s %-33s %12.0f %12.0f %6.2f %11s %10.3f %10.3f %9s\n", PhaseName(phase).c_str(),
          WorkOf(phase).c_str(), p.ember_s > 0 ? n / p.ember_s : 0,
          p.other_s > 0 ? n / p.other_s : 0, r.median,
          p.runs > 1 ? absl::StrFormat("%.2f-%.2f", r.lo, r.hi).c_str() : "", p.ember_cpu,
          p.other_cpu,
          eb::Ratio(MedianOf(g_p99, phase, kEmber, upd), MedianOf(g_p99, phase, kSqlite, upd))
              .c_str());
      tally.Add(PhaseName(phase), p);
    }
    std::fprintf(out,
                 "op/s: operations (load: rows) over the median seconds of the phase, its "
                 "settle included; ratio: median of the per-run ratios of op/s EmberDB / SQLite "
                 "(above 1: EmberDB faster), lo-hi their range; cpu: median CPU seconds "
                 "(EmberDB's process, SQLite's thread); upd p99: EmberDB / SQLite p99 update "
                 "latency (below 1: EmberDB faster). The count below goes by time ratios "
                 "EmberDB / SQLite, the inverse of op/s ratios (below 1: EmberDB faster).\n");
    tally.Print(out, "phases");
    std::fprintf(out,
                 "\nlatency per operation, microseconds (medians over runs of each run's "
                 "p50 and p99):\n");
    std::fprintf(out, "%-5s %-7s %12s %12s %12s %12s %9s %9s\n", "phase", "op", "EmberDB p50",
                 "EmberDB p99", "SQLite p50", "SQLite p99", "p50 ratio", "p99 ratio");
    for (int phase : g_phases) {
      for (int t = 0; t < kOpTypes; ++t) {
        const double e50 = MedianOf(g_p50, phase, kEmber, t);
        const double s50 = MedianOf(g_p50, phase, kSqlite, t);
        const double e99 = MedianOf(g_p99, phase, kEmber, t);
        const double s99 = MedianOf(g_p99, phase, kSqlite, t);
        if (e50 < 0 && s50 < 0) continue;
        std::fprintf(out, "%-5s %-7s %12s %12s %12s %12s %9s %9s\n", PhaseName(phase).c_str(),
                     kOpNames[t], eb::Cell(e50, 1).c_str(), eb::Cell(e99, 1).c_str(),
                     eb::Cell(s50, 1).c_str(), eb::Cell(s99, 1).c_str(),
                     eb::Ratio(e50, s50).c_str(), eb::Ratio(e99, s99).c_str());
      }
    }
  }
  if (eb::AnyFailed()) {
    std::fprintf(out,
                 "Some rows FAILED (see 'bench: FAILED' on stderr): they are not in the "
                 "summary.\n");
  }
  std::fflush(out);
}

// --workloads -> g_phases (the load, then the workloads asked for, in the order they run).
bool ParseWorkloads() {
  std::string asked = FLAGS_workloads.str();
  g_phases = {kLoad};
  for (int p = 1; p < kPhases; ++p) {
    const char letter = kWorkloads[p - 1].letter;
    if (asked.find(letter) != std::string::npos) g_phases.push_back(p);
  }
  for (char c : asked) {
    if (c == ',' || c == ' ') continue;
    bool known = false;
    for (const Workload& w : kWorkloads) known |= w.letter == c;
    if (!known) {
      std::fprintf(stderr,
                   "ycsb: unknown workload '%c' in --workloads=%s (a, b, c, e, f; D, with its "
                   "'latest' distribution, is not implemented)\n",
                   c, asked.c_str());
      return false;
    }
  }
  return true;
}

bool CheckFlags() {
  if (!ParseWorkloads()) return false;
  if (FLAGS_records.i64() < 1 || FLAGS_operations.i64() < 0 || FLAGS_load_batch.i64() < 1 ||
      FLAGS_max_scan_length.i64() < 1) {
    std::fprintf(stderr,
                 "ycsb: --records, --load_batch and --max_scan_length must be at least "
                 "1, --operations at least 0\n");
    return false;
  }
  if (FLAGS_field_length.i64() < 8 || FLAGS_field_length.i64() > 100000) {
    std::fprintf(stderr, "ycsb: --field_length must be in 8..100000\n");
    return false;
  }
  if (!eb::SqliteWal()) {
    std::fprintf(stderr,
                 "ycsb: SQLite always runs with journal_mode=wal here, not --sqlite_journal=%s\n",
                 eb::FLAGS_sqlite_journal.str().c_str());
    return false;
  }
  return true;
}

void Register() {
  for (int run = 0; run < eb::Runs(); ++run) {
    for (int phase : g_phases) {
      std::vector<int> engines = {kEmber, kSqlite};
      if (!eb::EmberFirst(run, phase)) std::reverse(engines.begin(), engines.end());
      for (int e : engines) {
        eb::AddRow(RowName(phase, e, run),
                   [phase, e, run](benchmark::State& st) { BM_Phase(st, phase, e, run); });
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  eb::FLAGS_runs.SetDefault(3);
  if (!eb::CheckNoRepetitions(argc, argv) || !eb::Init(&argc, argv)) return 1;
  if (!CheckFlags()) return 1;
  for (const eb::Flag* f :
       {&eb::FLAGS_runs, &FLAGS_records, &FLAGS_operations, &FLAGS_field_length,
        &FLAGS_max_scan_length, &FLAGS_workloads, &FLAGS_load_batch, &FLAGS_seed}) {
    benchmark::AddCustomContext(f->name(), f->str());
  }
  benchmark::AddCustomContext("request_distribution", "zipfian 0.99 (YCSB's scrambled zipfian)");
  eb::AddSqliteContext();
  Register();
  benchmark::RunSpecifiedBenchmarks();
  bool ok = !eb::AnyFailed();
  for (int e : {kEmber, kSqlite}) {
    if (absl::Status s = StoreOf(e).Drop(); !s.ok()) {
      std::fprintf(stderr, "bench: FAILED: closing the %s database: %s\n", kEngineNames[e],
                   s.ToString().c_str());
      ok = false;
    }
  }
  PrintSummary();
  eb::Finish();
  return ok ? 0 : 1;
}
