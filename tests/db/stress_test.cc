// A thread stress test for ThreadSanitizer (and every other preset): 16 threads at once mixing
// every kind of call on one database - writers of a shared table (inserts, updates, deletes,
// BLOBs written, appended and read, savepoints released and rolled back, RunStatement, commits
// and rollbacks), DDL threads creating, filling, indexing, deactivating and dropping tables of
// their own, and maintenance threads scanning, collecting garbage, sweeping and validating.
// Each writer owns its rows, so its committed rows are known exactly: at the end (and after a
// reopen) the table, read through the table and both indexes, must equal the writers' models,
// and Validate must be clean. Worker threads never use Catch2 (not thread-safe); they log to an
// ErrorLog the main thread checks.
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ember/ember.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::ErrorLog;
using testing::OpenOrFail;
using testing::TempDb;

constexpr int kThreads = 16;
constexpr int kWriters = 8;  // threads 0..7
constexpr int kDdl = 4;      // threads 8..11
constexpr int kTxnsPerWriter = 60;
constexpr int kDdlRounds = 6;
constexpr int kMaintenanceRounds = 12;

struct Committed {
  std::string val;
  std::string blob;  // empty: NULL
};
using Model = std::map<int64_t, Committed>;

std::string ReadBlob(Transaction* tx, BlobId id, absl::Status* err) {
  absl::StatusOr<std::unique_ptr<BlobReader>> r = tx->OpenBlob(id);
  if (!r.ok()) {
    *err = r.status();
    return {};
  }
  std::string out(static_cast<size_t>((*r)->size()), '\0');
  size_t done = 0;
  while (done < out.size()) {
    absl::StatusOr<size_t> n = (*r)->Read(out.data() + done, out.size() - done);
    if (!n.ok()) {
      *err = n.status();
      return {};
    }
    if (*n == 0) break;
    done += *n;
  }
  out.resize(done);
  return out;
}

// One writer transaction on the thread's own rows; returns the model it commits (or the
// unchanged one on a rollback). Errors go to `log`.
void WriterTxn(Database* db, const Table& t, int w, std::mt19937_64& rng, int64_t* next_id,
               std::map<int64_t, RecordId>* ids, Model* model, int* commits, ErrorLog* log) {
  auto tx_or = db->Begin();
  if (!tx_or.ok()) return log->Add("writer Begin: " + tx_or.status().ToString());
  Transaction* tx = tx_or->get();
  Model view = *model;
  std::map<int64_t, RecordId> view_ids = *ids;
  auto fail = [&](const std::string& what, const absl::Status& s) {
    log->Add(absl::StrCat("writer ", w, ": ", what, ": ", s.ToString()));
  };
  auto row = [&](int64_t id, const std::string& val, std::optional<BlobId> blob) {
    Row r{id, int64_t{w}, val, std::monostate{}};
    if (blob) r[3] = *blob;
    return r;
  };
  // One change on this writer's rows, applied to `v` / `vids` when it succeeds.
  auto op = [&](Model* v, std::map<int64_t, RecordId>* vids) -> absl::Status {
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0 || v->empty()) {  // insert, with a BLOB every third time
      const int64_t id = (*next_id)++;
      const std::string val = absl::StrCat("w", w, "-", id, "-", rng() % 1000);
      std::optional<BlobId> blob;
      std::string bytes;
      if (id % 3 == 0) {
        absl::StatusOr<std::unique_ptr<BlobWriter>> bw = tx->CreateBlob(t, "blob");
        if (!bw.ok()) return bw.status();
        bytes.assign(1 + rng() % 20000, static_cast<char>('a' + id % 26));
        if (absl::Status s = (*bw)->Write(bytes); !s.ok()) return s;
        blob = (*bw)->id();
      }
      absl::StatusOr<RecordId> rid = tx->Insert(t, row(id, val, blob));
      if (!rid.ok()) return rid.status();
      (*v)[id] = {val, bytes};
      (*vids)[id] = *rid;
      return absl::OkStatus();
    }
    auto it = v->begin();
    std::advance(it, static_cast<long>(rng() % v->size()));
    const int64_t id = it->first;
    if (kind == 3) {
      if (absl::Status s = tx->Delete(t, vids->at(id)); !s.ok()) return s;
      v->erase(id);
      vids->erase(id);
      return absl::OkStatus();
    }
    // Update: a new value; half the time a BLOB appended to or replaced.
    Committed c = it->second;
    c.val = absl::StrCat("w", w, "-", id, "-u", rng() % 1000);
    std::optional<BlobId> blob;
    if (rng() % 2) {
      absl::StatusOr<std::unique_ptr<BlobWriter>> bw = tx->CreateBlob(t, "blob");
      if (!bw.ok()) return bw.status();
      c.blob += std::string(1 + rng() % 5000, static_cast<char>('A' + id % 26));
      if (absl::Status s = (*bw)->Write(c.blob); !s.ok()) return s;
      blob = (*bw)->id();
    } else if (!c.blob.empty()) {
      absl::StatusOr<std::optional<Row>> cur = tx->Get(t, vids->at(id));
      if (!cur.ok()) return cur.status();
      if (!*cur) return absl::InternalError(absl::StrCat("own row ", id, " not visible"));
      blob = std::get<BlobId>((**cur)[3]);
    }
    if (absl::Status s = tx->Update(t, vids->at(id), row(id, c.val, blob)); !s.ok()) return s;
    it->second = c;
    return absl::OkStatus();
  };
  const int nops = 1 + static_cast<int>(rng() % 6);
  for (int i = 0; i < nops; ++i) {
    const int how = static_cast<int>(rng() % 5);
    if (how == 0) {
      // Under a savepoint, rolled back or released.
      Model sv = view;
      std::map<int64_t, RecordId> sids = view_ids;
      if (absl::Status s = tx->Savepoint("sp"); !s.ok()) return fail("Savepoint", s);
      for (int k = 0; k < 3; ++k) {
        if (absl::Status s = op(&sv, &sids); !s.ok()) return fail("op under savepoint", s);
      }
      if (rng() % 2) {
        if (absl::Status s = tx->RollbackToSavepoint("sp"); !s.ok()) {
          return fail("RollbackToSavepoint", s);
        }
        if (absl::Status s = tx->ReleaseSavepoint("sp"); !s.ok()) return fail("Release", s);
      } else {
        if (absl::Status s = tx->ReleaseSavepoint("sp"); !s.ok()) return fail("Release", s);
        view = std::move(sv);
        view_ids = std::move(sids);
      }
    } else if (how == 1) {
      // Several changes as one statement.
      Model sv = view;
      std::map<int64_t, RecordId> sids = view_ids;
      absl::Status s = tx->RunStatement([&] {
        for (int k = 0; k < 2; ++k) {
          if (absl::Status e = op(&sv, &sids); !e.ok()) return e;
        }
        return absl::OkStatus();
      });
      if (!s.ok()) return fail("RunStatement", s);
      view = std::move(sv);
      view_ids = std::move(sids);
    } else {
      if (absl::Status s = op(&view, &view_ids); !s.ok()) return fail("op", s);
    }
  }
  if (rng() % 100 < 20) {
    if (absl::Status s = tx->Rollback(); !s.ok()) fail("Rollback", s);
    return;
  }
  if (absl::Status s = tx->Commit(); !s.ok()) return fail("Commit", s);
  ++*commits;
  *model = std::move(view);
  *ids = std::move(view_ids);
}

// A DDL thread's round: its own table created, filled, indexed, the index deactivated and
// rebuilt, then index and table dropped. DDL of different threads and writers go on together.
void DdlRound(Database* db, int d, int round, ErrorLog* log) {
  const std::string name = absl::StrCat("ddl", d, "_", round);
  auto fail = [&](const std::string& what, const absl::Status& s) {
    log->Add(absl::StrCat("ddl ", d, " round ", round, ": ", what, ": ", s.ToString()));
  };
  absl::StatusOr<Table> t =
      db->CreateTable({name, {{"k", ColumnType::kInt64, false}, {"s", ColumnType::kString}}});
  if (!t.ok()) return fail("CreateTable", t.status());
  {
    auto tx = db->Begin();
    if (!tx.ok()) return fail("Begin", tx.status());
    for (int64_t k = 0; k < 50; ++k) {
      if (auto r = (*tx)->Insert(*t, {k, absl::StrCat("v", k)}); !r.ok()) {
        return fail("Insert", r.status());
      }
    }
    if (absl::Status s = (*tx)->Commit(); !s.ok()) return fail("Commit", s);
  }
  const std::string ix = name + "_k";
  if (auto i = db->CreateIndex({ix, name, {"k"}, true}); !i.ok()) {
    return fail("CreateIndex", i.status());
  }
  if (absl::Status s = db->SetIndexActive(ix, false); !s.ok()) return fail("inactive", s);
  if (absl::Status s = db->SetIndexActive(ix, true); !s.ok()) return fail("active", s);
  {
    auto i = db->GetIndex(ix);
    auto tx = db->Begin();
    if (!i.ok() || !tx.ok()) return fail("GetIndex/Begin", i.ok() ? tx.status() : i.status());
    auto found = (*tx)->Lookup(*i, {int64_t{25}});
    if (!found.ok() || !*found) {
      return fail("Lookup after the rebuild",
                  found.ok() ? absl::NotFoundError("25") : found.status());
    }
    if (absl::Status s = (*tx)->Commit(); !s.ok()) return fail("Commit", s);
  }
  if (absl::Status s = db->DropIndex(ix); !s.ok()) return fail("DropIndex", s);
  if (absl::Status s = db->DropTable(name); !s.ok()) return fail("DropTable", s);
}

// Reads back the writers' rows through the table and both indexes and compares with the
// models; returns the differences.
std::vector<std::string> Compare(Database* db, const std::vector<Model>& models) {
  std::vector<std::string> out;
  auto t = db->GetTable("shared");
  auto by_id = db->GetIndex("shared_id");
  auto by_owner = db->GetIndex("shared_owner");
  if (!t.ok() || !by_id.ok() || !by_owner.ok()) return {"handles"};
  auto tx = db->Begin();
  if (!tx.ok()) return {tx.status().ToString()};
  std::vector<Model> seen(models.size());
  absl::Status err;
  auto c = (*tx)->Scan(*t);
  if (!c.ok()) return {c.status().ToString()};
  for (; (*c)->Valid() && err.ok(); err.Update((*c)->Next())) {
    const Row& r = (*c)->row();
    const int64_t owner = std::get<int64_t>(r[1]);
    std::string blob;
    if (const BlobId* b = std::get_if<BlobId>(&r[3])) blob = ReadBlob(tx->get(), *b, &err);
    seen.at(static_cast<size_t>(owner))[std::get<int64_t>(r[0])] = {std::get<std::string>(r[2]),
                                                                    blob};
  }
  if (!err.ok()) out.push_back("table scan: " + err.ToString());
  for (size_t w = 0; w < models.size(); ++w) {
    if (seen[w].size() != models[w].size()) {
      out.push_back(
          absl::StrCat("writer ", w, ": ", seen[w].size(), " rows, model ", models[w].size()));
    }
    for (const auto& [id, c] : models[w]) {
      auto it = seen[w].find(id);
      if (it == seen[w].end()) {
        out.push_back(absl::StrCat("writer ", w, " row ", id, " missing"));
      } else if (it->second.val != c.val || it->second.blob != c.blob) {
        out.push_back(absl::StrCat("writer ", w, " row ", id, ": '", it->second.val, "' with ",
                                   it->second.blob.size(), " BLOB bytes, model '", c.val, "' with ",
                                   c.blob.size()));
      }
    }
    // The owner index holds exactly the writer's rows; the id index finds each one.
    auto s = (*tx)->IndexScan(*by_owner, {int64_t(w)}, {int64_t(w)});
    absl::Status serr = s.status();
    size_t n = 0;
    for (; serr.ok() && (*s)->Valid(); serr = (*s)->Next()) ++n;
    if (!serr.ok()) out.push_back(absl::StrCat("writer ", w, " owner index: ", serr.ToString()));
    if (n != models[w].size()) {
      out.push_back(
          absl::StrCat("writer ", w, ": owner index has ", n, ", model ", models[w].size()));
    }
    for (const auto& [id, c] : models[w]) {
      auto f = (*tx)->Lookup(*by_id, {id});
      if (!f.ok() || !*f)
        out.push_back(absl::StrCat("writer ", w, " row ", id, " not in the id index"));
    }
  }
  (void)(*tx)->Commit();
  return out;
}

TEST_CASE("stress: 16 threads mix writes and BLOBs and savepoints and DDL and collection",
          "[stress][concurrency]") {
  TempDb tmp;
  Options o = testing::CreateOptions(4096, 256);
  o.forced_writes = false;
  o.parallel_workers = 2;
  o.max_parallel_workers = 2;
  o.temp_cache_limit = 1 << 20;  // BLOBs spill to temp files too
  auto db = OpenOrFail(tmp.path(), o);
  Table t = VALUE_OR_FAIL(db->CreateTable({"shared",
                                           {{"id", ColumnType::kInt64, false},
                                            {"owner", ColumnType::kInt64, false},
                                            {"val", ColumnType::kString},
                                            {"blob", ColumnType::kBlob}}}));
  VALUE_OR_FAIL(db->CreateIndex({"shared_id", "shared", {"id"}, true}));
  VALUE_OR_FAIL(db->CreateIndex({"shared_owner", "shared", {"owner"}, false}));

  ErrorLog log;
  std::vector<Model> models(kWriters);
  std::atomic<int> writers_left{kWriters};
  std::atomic<int> committed{0}, ddl_rounds{0}, maintenance_calls{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(0x57e55 + static_cast<uint64_t>(i));
      if (i < kWriters) {
        int64_t next_id = int64_t{i} * 1'000'000 + 1;
        std::map<int64_t, RecordId> ids;
        int commits = 0;
        for (int n = 0; n < kTxnsPerWriter; ++n) {
          WriterTxn(db.get(), t, i, rng, &next_id, &ids, &models[static_cast<size_t>(i)], &commits,
                    &log);
        }
        committed.fetch_add(commits);
        writers_left.fetch_sub(1);
      } else if (i < kWriters + kDdl) {
        for (int r = 0; r < kDdlRounds; ++r) {
          DdlRound(db.get(), i, r, &log);
          ddl_rounds.fetch_add(1);
        }
      } else {
        // Maintenance: scans, collection, sweeps, validation, while the writers run.
        for (int r = 0; r < kMaintenanceRounds && writers_left.load() > 0; ++r) {
          absl::Status s;
          switch ((i + r) % 4) {
            case 0: {
              auto tx = db->Begin();
              if (!tx.ok()) {
                s = tx.status();
                break;
              }
              auto c = (*tx)->Scan(t);
              for (int n = 0; c.ok() && (*c)->Valid() && n < 5000; ++n) (void)(*c)->Next();
              if (!c.ok()) s = c.status();
              (void)(*tx)->Commit();
              break;
            }
            case 1: s = db->CollectGarbage(); break;
            case 2: s = db->Sweep().status(); break;
            case 3: {
              // Beside writers the walk may see pages in flux (Validate does not stop them):
              // only the call must work here; the quiescent walks at the end must be clean.
              auto rep = db->Validate();
              if (!rep.ok()) s = rep.status();
              break;
            }
          }
          if (!s.ok()) log.Add(absl::StrCat("maintenance ", i, " round ", r, ": ", s.ToString()));
          maintenance_calls.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  testing::RequireNoErrors(log);
  // The work was done: most writer transactions committed (a fifth roll back), every DDL
  // round ran, and the maintenance threads ran beside the writers.
  size_t rows = 0;
  for (const Model& m : models) rows += m.size();
  CHECK(committed.load() > kWriters * kTxnsPerWriter / 2);
  CHECK(ddl_rounds.load() == kDdl * kDdlRounds);
  CHECK(maintenance_calls.load() > 0);
  CHECK(rows > 0);

  auto check = [&](Database* d) {
    std::vector<std::string> diff = Compare(d, models);
    INFO(absl::StrJoin(diff, "\n"));
    CHECK(diff.empty());
    ValidationReport rep = VALUE_OR_FAIL(d->Validate());
    INFO(absl::StrJoin(rep.errors, "\n"));
    CHECK(rep.ok());
  };
  check(db.get());
  REQUIRE_OK(db->Close());
  db.reset();
  Options reopen = o;
  reopen.create_if_missing = false;
  auto again = OpenOrFail(tmp.path(), reopen);
  check(again.get());
  REQUIRE_OK(again->Close());
}

}  // namespace
}  // namespace ember
