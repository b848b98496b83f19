// Crashes in the middle of DDL mixed with every kind of write: a SIGKILL of a forked child at a
// random moment, and a power loss at a random write with the unsynced writes kept, lost or torn
// each on its own (ReorderFile). The workload creates and drops tables and indexes, deactivates
// and rebuilds indexes (bulk builds on populated tables), inserts, updates and deletes rows with
// BLOBs of every level, rolls back to savepoints, rolls whole transactions back, and runs sweeps
// and garbage collection between them.
//
// Every step is drawn from a seeded generator over the model of the database (NextStep), so the
// parent recomputes the child's steps from the seed: the child logs each step's number durably
// once the step has returned OK, and the database after the crash must equal the model after
// the logged steps, or after one more (the step in flight). Checked after each crash: Validate
// clean (leaked pages freed), the same tables and indexes (and whether each index is active),
// each table's rows with their BLOBs, and every active index holding exactly the table's rows.
//
// Environment (besides crash_util.h's): EMBER_DDL_CRASH_KILLS (SIGKILL rounds, default 20),
// EMBER_DDL_CRASH_POWER_RUNS (power-loss rounds, default 20).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "tests/support/child_process.h"
#include "tests/support/crash_util.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::ChildLink;
using testing::OkOrDie;
using testing::ValueOr;
using testing::ValueOrDie;

constexpr size_t kMaxTables = 4;
constexpr size_t kMaxRows = 240;  // per table: keeps the child's id scans and the checks short

// ---------------------------------------------------------------- the model

struct RowVal {
  int64_t v = 0;
  uint32_t slen = 0;
  uint32_t blen = 0;  // 0: the BLOB column is NULL
  bool operator==(const RowVal&) const = default;
};

struct TableModel {
  std::map<std::string, bool> indexes;  // name -> active
  std::map<int64_t, RowVal> rows;
  bool operator==(const TableModel&) const = default;
};

struct Model {
  std::map<std::string, TableModel> tables;
  int64_t next_id = 1;
  bool operator==(const Model& o) const { return tables == o.tables; }
};

std::string TableName(size_t i) { return "d" + std::to_string(i); }
std::string IdIndex(const std::string& t) { return t + "_id"; }  // unique, on id
std::string ValIndex(const std::string& t) { return t + "_v"; }  // on v

std::string StringOf(int64_t id, const RowVal& r) {
  return std::string(r.slen, static_cast<char>('a' + (id + r.v) % 26));
}
std::string BlobOf(int64_t id, const RowVal& r) {
  std::string out(r.blen, '\0');
  for (uint32_t i = 0; i < r.blen; ++i) {
    out[i] = static_cast<char>(
        (static_cast<uint64_t>(id) * 131 + static_cast<uint64_t>(r.v) * 7 + i / 64) % 251);
  }
  return out;
}

// ---------------------------------------------------------------- the steps

enum class Kind {
  kCreateTable,
  kCreateIndex,
  kDropIndex,
  kSetIndexActive,
  kWrite,          // a transaction of row changes, committed
  kWriteRollback,  // the same, rolled back (dead versions and BLOBs for the collectors)
  kDropTable,
  kSweep,
  kCollect,
};

struct RowOp {
  enum { kInsert, kUpdate, kDelete } what = kInsert;
  int64_t id = 0;
  RowVal val;
};

struct Step {
  Kind kind = Kind::kSweep;
  std::string table, index;
  bool unique = false, active = false;
  std::vector<RowOp> ops;     // kept
  std::vector<RowOp> undone;  // after Savepoint("s"), rolled back to it
};

std::string Describe(const Step& s) {
  static const char* const kNames[] = {"create table",     "create index", "drop index",
                                       "set index active", "write",        "write + rollback",
                                       "drop table",       "sweep",        "collect"};
  return absl::StrCat(kNames[static_cast<int>(s.kind)], " ", s.table, " ", s.index, " (",
                      s.ops.size(), " ops, ", s.undone.size(), " undone)");
}

RowVal RandomVal(std::mt19937_64& rng, int64_t v) {
  static const uint32_t kBlobLens[] = {0, 0, 0, 40, 900, 6000, 30000};  // NULL .. several pages
  RowVal r;
  r.v = v;
  r.slen = static_cast<uint32_t>(rng() % 200);
  r.blen = kBlobLens[rng() % std::size(kBlobLens)];
  return r;
}

// Row changes on `t`, applied to `rows` as they are drawn (an id updated or deleted is one the
// transaction still sees). `next_id` gives new ids.
std::vector<RowOp> DrawOps(std::mt19937_64& rng, std::map<int64_t, RowVal>* rows, int64_t* next_id,
                           int n, int64_t tag) {
  std::vector<RowOp> ops;
  for (int i = 0; i < n; ++i) {
    const unsigned roll = static_cast<unsigned>(rng() % 100);
    const bool full = rows->size() >= kMaxRows;
    RowOp op;
    if (rows->empty() || (!full && roll < 45)) {
      op.what = RowOp::kInsert;
      op.id = (*next_id)++;
      op.val = RandomVal(rng, tag);
      (*rows)[op.id] = op.val;
    } else {
      auto it = rows->begin();
      std::advance(it, static_cast<long>(rng() % rows->size()));
      op.id = it->first;
      if (roll < 80 && !full) {
        op.what = RowOp::kUpdate;
        op.val = RandomVal(rng, tag);
        it->second = op.val;
      } else {
        op.what = RowOp::kDelete;
        rows->erase(it);
      }
    }
    ops.push_back(op);
  }
  return ops;
}

// Draws step number `n` for a database holding `m`, and gives the model after it. A pure function
// of the generator's state and the model: the parent replays the child's steps with it.
Step NextStep(std::mt19937_64& rng, const Model& m, uint64_t n, Model* after) {
  *after = m;
  Step s;
  std::vector<std::string> names;
  for (const auto& [name, t] : m.tables) names.push_back(name);
  const unsigned roll = static_cast<unsigned>(rng() % 100);
  const std::string pick = names.empty() ? "" : names[rng() % names.size()];
  if (names.empty() || (roll < 8 && names.size() < kMaxTables)) {
    s.kind = Kind::kCreateTable;
    for (size_t i = 0; i < kMaxTables; ++i) {
      if (!m.tables.contains(TableName(i))) {
        s.table = TableName(i);
        break;
      }
    }
    after->tables[s.table] = TableModel{};
    return s;
  }
  s.table = pick;
  TableModel& t = after->tables[pick];
  if (roll < 22) {
    const bool has_id = t.indexes.contains(IdIndex(pick));
    const bool has_v = t.indexes.contains(ValIndex(pick));
    if (has_id && has_v) {
      s.kind = Kind::kDropIndex;
      s.index = rng() % 2 ? IdIndex(pick) : ValIndex(pick);
      t.indexes.erase(s.index);
    } else {
      s.kind = Kind::kCreateIndex;
      s.unique = !has_id && (has_v || rng() % 2);
      s.index = s.unique ? IdIndex(pick) : ValIndex(pick);
      t.indexes[s.index] = true;
    }
    return s;
  }
  if (roll < 30 && !t.indexes.empty()) {
    s.kind = Kind::kSetIndexActive;
    auto it = t.indexes.begin();
    std::advance(it, static_cast<long>(rng() % t.indexes.size()));
    s.index = it->first;
    s.active = !it->second;
    it->second = s.active;
    return s;
  }
  if (roll < 33 && names.size() >= 3) {
    s.kind = Kind::kDropTable;
    after->tables.erase(pick);
    return s;
  }
  if (roll < 40) {
    s.kind = Kind::kSweep;
    return s;
  }
  if (roll < 46) {
    s.kind = Kind::kCollect;
    return s;
  }
  const int64_t tag = static_cast<int64_t>(n);
  const int nops = 1 + static_cast<int>(rng() % 24);
  if (roll < 56) {
    s.kind = Kind::kWriteRollback;
    std::map<int64_t, RowVal> scratch = t.rows;
    int64_t ids = after->next_id;
    s.ops = DrawOps(rng, &scratch, &ids, nops, tag);
    return s;  // nothing changes, and no id is used up
  }
  s.kind = Kind::kWrite;
  s.ops = DrawOps(rng, &t.rows, &after->next_id, nops, tag);
  if (rng() % 3 == 0) {  // more changes after a savepoint, undone by rolling back to it
    std::map<int64_t, RowVal> scratch = t.rows;
    int64_t ids = after->next_id;
    s.undone = DrawOps(rng, &scratch, &ids, 1 + static_cast<int>(rng() % 6), tag);
  }
  return s;
}

// ---------------------------------------------------------------- running a step

TableSchema SchemaOf(const std::string& name) {
  return {name,
          {{"id", ColumnType::kInt64, false},
           {"v", ColumnType::kInt64},
           {"s", ColumnType::kString},
           {"b", ColumnType::kBlob}}};
}

absl::Status ApplyOps(Transaction* tx, const Table& t, const std::vector<RowOp>& ops,
                      std::map<int64_t, RecordId>* rids) {
  for (const RowOp& op : ops) {
    Row row;
    if (op.what != RowOp::kDelete) {
      Value blob = std::monostate{};
      if (op.val.blen > 0) {
        absl::StatusOr<std::unique_ptr<BlobWriter>> w = tx->CreateBlob(t, "b");
        if (!w.ok()) return w.status();
        if (absl::Status s = (*w)->Write(BlobOf(op.id, op.val)); !s.ok()) return s;
        blob = (*w)->id();
      }
      row = Row{op.id, op.val.v, StringOf(op.id, op.val), blob};
    }
    absl::Status s;
    if (op.what == RowOp::kInsert) {
      absl::StatusOr<RecordId> rid = tx->Insert(t, row);
      if (!rid.ok()) return rid.status();
      (*rids)[op.id] = *rid;
    } else if (op.what == RowOp::kUpdate) {
      s = tx->Update(t, rids->at(op.id), row);
    } else {
      s = tx->Delete(t, rids->at(op.id));
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status RunWrite(Database* db, const Step& s) {
  absl::StatusOr<Table> t = db->GetTable(s.table);
  if (!t.ok()) return t.status();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = db->Begin();
  if (!tx.ok()) return tx.status();
  absl::StatusOr<std::vector<std::pair<RecordId, Row>>> rows = testing::ScanAll(tx->get(), *t);
  if (!rows.ok()) return rows.status();
  std::map<int64_t, RecordId> rids;
  for (const auto& [rid, row] : *rows) rids[std::get<int64_t>(row[0])] = rid;
  if (absl::Status st = ApplyOps(tx->get(), *t, s.ops, &rids); !st.ok()) return st;
  if (!s.undone.empty()) {
    if (absl::Status st = (*tx)->Savepoint("s"); !st.ok()) return st;
    if (absl::Status st = ApplyOps(tx->get(), *t, s.undone, &rids); !st.ok()) return st;
    if (absl::Status st = (*tx)->RollbackToSavepoint("s"); !st.ok()) return st;
  }
  return s.kind == Kind::kWrite ? (*tx)->Commit() : (*tx)->Rollback();
}

absl::Status RunStep(Database* db, const Step& s) {
  switch (s.kind) {
    case Kind::kCreateTable: return db->CreateTable(SchemaOf(s.table)).status();
    case Kind::kCreateIndex:
      return db->CreateIndex({s.index, s.table, {s.unique ? "id" : "v"}, s.unique}).status();
    case Kind::kDropIndex: return db->DropIndex(s.index);
    case Kind::kSetIndexActive: return db->SetIndexActive(s.index, s.active);
    case Kind::kDropTable: return db->DropTable(s.table);
    case Kind::kSweep: return db->Sweep().status();
    case Kind::kCollect: return db->CollectGarbage();
    case Kind::kWrite:
    case Kind::kWriteRollback: return RunWrite(db, s);
  }
  return absl::InternalError("unknown step");
}

// ---------------------------------------------------------------- reading the database back

// The database as a model (next_id aside), or what is wrong with it that a model cannot say.
absl::StatusOr<Model> ReadModel(Database* db) {
  Model got;
  absl::StatusOr<std::unique_ptr<Transaction>> tx = db->Begin();
  if (!tx.ok()) return tx.status();
  for (const std::string& name : db->TableNames()) {
    absl::StatusOr<Table> t = db->GetTable(name);
    if (!t.ok()) return t.status();
    TableModel& tm = got.tables[name];
    absl::StatusOr<std::vector<std::pair<RecordId, Row>>> rows = testing::ScanAll(tx->get(), *t);
    if (!rows.ok()) return rows.status();
    for (const auto& [rid, row] : *rows) {
      const int64_t id = std::get<int64_t>(row[0]);
      RowVal r;
      r.v = std::get<int64_t>(row[1]);
      const std::string& str = std::get<std::string>(row[2]);
      r.slen = static_cast<uint32_t>(str.size());
      if (str != StringOf(id, r)) return absl::DataLossError(absl::StrCat(name, " id ", id, ": s"));
      if (const BlobId* b = std::get_if<BlobId>(&row[3])) {
        absl::StatusOr<std::unique_ptr<BlobReader>> br = (*tx)->OpenBlob(*b);
        if (!br.ok()) return br.status();
        std::string bytes((*br)->size(), '\0');
        size_t have = 0;
        while (have < bytes.size()) {
          absl::StatusOr<size_t> n = (*br)->Read(bytes.data() + have, bytes.size() - have);
          if (!n.ok()) return n.status();
          if (*n == 0) break;
          have += *n;
        }
        r.blen = static_cast<uint32_t>(bytes.size());
        if (have != bytes.size() || bytes != BlobOf(id, r) || r.blen == 0) {
          return absl::DataLossError(absl::StrCat(name, " id ", id, ": BLOB contents"));
        }
      }
      if (!tm.rows.emplace(id, r).second) {
        return absl::DataLossError(absl::StrCat(name, ": id ", id, " twice"));
      }
    }
    for (const std::string& ix_name : {IdIndex(name), ValIndex(name)}) {
      absl::StatusOr<Index> ix = db->GetIndex(ix_name);
      if (absl::IsNotFound(ix.status())) continue;
      if (!ix.ok()) return ix.status();
      absl::StatusOr<std::unique_ptr<Cursor>> c = (*tx)->IndexScan(*ix, {}, {});
      if (absl::IsFailedPrecondition(c.status())) {
        tm.indexes[ix_name] = false;
        continue;
      }
      if (!c.ok()) return c.status();
      tm.indexes[ix_name] = true;
      absl::StatusOr<std::vector<std::pair<RecordId, Row>>> entries = testing::Drain(c->get());
      if (!entries.ok()) return entries.status();
      std::set<int64_t> ids;
      for (const auto& [rid, row] : *entries) ids.insert(std::get<int64_t>(row[0]));
      if (ids.size() != entries->size() || ids.size() != tm.rows.size() ||
          !std::equal(ids.begin(), ids.end(), tm.rows.begin(),
                      [](int64_t a, const auto& kv) { return a == kv.first; })) {
        return absl::DataLossError(absl::StrCat("index ", ix_name, ": ", entries->size(),
                                                " entries for ", tm.rows.size(), " rows"));
      }
    }
  }
  if (absl::Status s = (*tx)->Commit(); !s.ok()) return s;
  return got;
}

std::string Summary(const Model& m) {
  std::string out;
  for (const auto& [name, t] : m.tables) {
    absl::StrAppend(&out, name, "(", t.rows.size(), " rows");
    for (const auto& [ix, active] : t.indexes)
      absl::StrAppend(&out, " ", ix, active ? "" : "[off]");
    absl::StrAppend(&out, ") ");
  }
  return out;
}

// Reopens, validates (freeing leaked pages) and requires the contents to be `before` or, when a
// step was in flight, `after`. Returns the model the database holds and adds the leaked pages
// freed to `*unreachable`.
Model CheckReopened(const std::string& path, const Options& opts, const Model& before,
                    const std::optional<Model>& after, uint64_t* unreachable, bool* took_after) {
  std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen after the crash");
  *unreachable += testing::RequireValidAfterCrash(db.get(), path);
  const Model got = ValueOr(ReadModel(db.get()), "read back");
  INFO("want " << Summary(before) << "\n or " << (after ? Summary(*after) : "-") << "\n got "
               << Summary(got));
  *took_after = after && got == *after && !(got == before);
  REQUIRE((got == before || (after && got == *after)));
  CRASH_REQUIRE_OK(db->Close());
  return *took_after ? *after : before;
}

Options DdlCrashOptions(uint32_t page_size) {
  Options o;
  o.page_size = page_size;
  o.cache_pages = 64;  // small: steps evict and re-read
  o.forced_writes = true;
  o.sweep_interval = 0;
  return o;
}

// Replays `steps` steps of the generator seeded `seed` from `m`; `in_flight` gets the model after
// one more, and `kinds` (if given) counts the kinds of the replayed steps.
Model Replay(uint64_t seed, Model m, uint64_t first_step, uint64_t steps,
             std::optional<Model>* in_flight, std::map<Kind, uint64_t>* kinds = nullptr) {
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i <= steps; ++i) {
    Model next;
    const Kind kind = NextStep(rng, m, first_step + i, &next).kind;
    if (i == steps) {
      *in_flight = std::move(next);
      break;
    }
    if (kinds) ++(*kinds)[kind];
    m = std::move(next);
  }
  return m;
}

// The page size of a test's database: drawn from its seed, or EMBER_CRASH_PAGE_SIZE.
uint32_t DrawPageSize(std::mt19937_64& rng) {
  const uint32_t drawn = testing::kCrashPageSizes[rng() % std::size(testing::kCrashPageSizes)];
  return static_cast<uint32_t>(testing::EnvU64("EMBER_CRASH_PAGE_SIZE", drawn));
}

// ---------------------------------------------------------------- SIGKILL

TEST_CASE("ddl crash: SIGKILL at random moments of DDL mixed with writes and collectors",
          "[crash][fork][ddl]") {
  const uint64_t seed = testing::AnnounceSeed("DDL SIGKILL", 0xDD1C8A5Bull);
  const uint64_t kills = testing::EnvU64("EMBER_DDL_CRASH_KILLS", 20);
  std::mt19937_64 rng(seed);
  const uint32_t page_size = DrawPageSize(rng);
  testing::ScratchDir dir("ember-ddl-kill");
  REQUIRE(dir.ok());
  const std::string path = dir.File("ddl.edb");
  const std::string log = dir.File("steps.log");
  {
    Options create = DdlCrashOptions(page_size);
    create.create_if_missing = true;
    CRASH_REQUIRE_OK(ValueOr(Database::Open(path, create), "create")->Close());
  }
  Model model;
  uint64_t step_no = 0, steps_done = 0, in_flight_kept = 0, unreachable = 0;
  std::map<Kind, uint64_t> kinds_done;
  for (uint64_t round = 0; round < kills; ++round) {
    Options opts = DdlCrashOptions(page_size);
    opts.use_io_uring = rng() % 2 == 0;
    const uint64_t child_seed = rng();
    const int delay_ms = 5 + static_cast<int>(rng() % 150);
    CAPTURE(round, child_seed, delay_ms, page_size, opts.use_io_uring);
    std::filesystem::remove(log);
    testing::ForkAndKill(
        [&](const ChildLink& link) {
          const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
          if (fd < 0) testing::ChildDie("side log");
          auto db = ValueOrDie(Database::Open(path, opts), "open");
          const char ready = 'R';
          ssize_t ignored = ::write(link.ready_fd, &ready, 1);
          (void)ignored;
          ::close(link.ready_fd);
          std::mt19937_64 steps(child_seed);
          Model m = model;
          for (uint64_t i = 0; i < 100000 && ::getppid() == link.parent; ++i) {
            Model next;
            const Step s = NextStep(steps, m, step_no + i, &next);
            OkOrDie(RunStep(db.get(), s), Describe(s));
            testing::AppendDurablyOrDie(fd, std::to_string(i) + "\n");
            m = std::move(next);
          }
          ::_exit(0);
        },
        delay_ms);
    uint64_t done = 0;
    {
      std::ifstream in(log);
      for (uint64_t i; in >> i; ++done) REQUIRE(i == done);  // the log is the steps in order
    }
    std::optional<Model> in_flight;
    const Model before = Replay(child_seed, model, step_no, done, &in_flight, &kinds_done);
    bool took_after = false;
    model = CheckReopened(path, DdlCrashOptions(page_size), before, in_flight, &unreachable,
                          &took_after);
    steps_done += done + (took_after ? 1 : 0);
    in_flight_kept += took_after ? 1 : 0;
    step_no += done + 1;  // the in-flight step's number is used up either way
    if (testing::Verbosity() >= 2) {
      testing::Report("DDL SIGKILL: round ", round, ": ", done, " steps, in flight ",
                      took_after ? "kept" : "lost or none", "; ", Summary(model));
    }
  }
  CHECK(steps_done > 0);
  if (testing::Verbosity() >= 1) {
    testing::Report("[crash] DDL SIGKILL: seed ", seed, ", ", kills, " kills, ", steps_done,
                    " steps (", kinds_done[Kind::kCreateTable], " tables created, ",
                    kinds_done[Kind::kDropTable], " dropped, ",
                    kinds_done[Kind::kCreateIndex] + kinds_done[Kind::kSetIndexActive],
                    " index builds or deactivations, ", kinds_done[Kind::kWrite],
                    " writes committed, ", kinds_done[Kind::kSweep], " sweeps), ", in_flight_kept,
                    " steps in flight kept, ", unreachable, " unreachable pages freed");
  }
}

// ---------------------------------------------------------------- power loss

TEST_CASE(
    "ddl crash: power loss at a random write of DDL mixed with writes and collectors "
    "(unsynced writes reordered and torn)",
    "[crash][ddl]") {
  const uint64_t seed = testing::AnnounceSeed("DDL power loss", 0xDD1C9A5Bull);
  const uint64_t runs = testing::EnvU64("EMBER_DDL_CRASH_POWER_RUNS", 20);
  std::mt19937_64 rng(seed);
  const uint32_t page_size = DrawPageSize(rng);
  testing::ScratchDir dir("ember-ddl-power");
  REQUIRE(dir.ok());
  // A template with some tables, indexes and rows, so the rounds start from a populated file.
  const std::string tmpl = dir.File("template.edb");
  Model start;
  uint64_t step_no = 0;
  {
    Options create = DdlCrashOptions(page_size);
    create.create_if_missing = true;
    std::unique_ptr<Database> db = ValueOr(Database::Open(tmpl, create), "create");
    std::mt19937_64 steps(rng());
    for (; step_no < 40; ++step_no) {
      Model next;
      const Step s = NextStep(steps, start, step_no, &next);
      INFO(Describe(s));
      CRASH_REQUIRE_OK(RunStep(db.get(), s));
      start = std::move(next);
    }
    CRASH_REQUIRE_OK(db->Close());
  }
  constexpr uint64_t kSteps = 30;
  uint64_t cut = 0, unreachable = 0, in_flight_kept = 0, max_writes = 800;
  for (uint64_t round = 0; round < runs; ++round) {
    const std::string path = dir.File("round.edb");
    std::filesystem::remove(path);
    std::filesystem::copy_file(tmpl, path);
    Options opts = DdlCrashOptions(page_size);
    opts.use_io_uring = rng() % 2 == 0;
    const uint64_t child_seed = rng();
    const uint64_t at = 1 + rng() % max_writes;
    CAPTURE(round, child_seed, at, page_size, opts.use_io_uring);
    testing::PowerLossDb p =
        testing::OpenPowerLossDb(path, opts, testing::LossModel::kReorder, /*create=*/false);
    p.reorder->CutPowerAtWrite(at);
    std::mt19937_64 steps(child_seed);
    Model m = start;
    uint64_t done = 0;
    for (; done < kSteps; ++done) {
      Model next;
      const Step s = NextStep(steps, m, step_no + done, &next);
      if (!RunStep(p.db.get(), s).ok()) break;
      m = std::move(next);
    }
    const bool powered_off = p.reorder->powered_off();
    cut += powered_off ? 1 : 0;
    const io::WritePathCounts counts = p.file()->write_path_counts();
    if (!powered_off) {  // the workload ended first: aim the later cuts within its writes
      max_writes = std::max<uint64_t>(1, counts.io_uring + counts.pwrite);
    }
    p.db->TEST_SimulateCrash();
    std::mt19937_64 loss(child_seed ^ 0x9E37);
    const uint64_t reverted = p.LosePower(loss);
    p.db.reset();
    std::optional<Model> in_flight;
    const Model before = Replay(child_seed, start, step_no, done, &in_flight);
    if (done == kSteps) in_flight.reset();
    bool took_after = false;
    (void)CheckReopened(path, DdlCrashOptions(page_size), before, in_flight, &unreachable,
                        &took_after);
    in_flight_kept += took_after ? 1 : 0;
    if (testing::Verbosity() >= 2) {
      testing::Report("DDL power loss: round ", round, ", write ", at, ": ", done, " steps, ",
                      reverted, " page versions reverted, in flight ",
                      took_after ? "kept" : "lost or none");
    }
  }
  INFO(cut << " of " << runs << " rounds lost power before the workload ended");
  CHECK(cut * 2 > runs);
  if (testing::Verbosity() >= 1) {
    testing::Report("[crash] DDL power loss: seed ", seed, ", ", runs, " runs, ", cut,
                    " cut in the middle, ", in_flight_kept, " steps in flight kept, ", unreachable,
                    " unreachable pages freed");
  }
}

}  // namespace
}  // namespace ember
