// What the series of bench/mass_update share (see common.h).
#include "bench/mass_update/common.h"

#include <cstdio>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace mass_update {

using ember::Row;

int64_t LoadedVal(int64_t id) { return id * 7 % 1000003; }

void DropDb(TestDb* d) {
  d->tx.reset();
  if (d->db) (void)d->db->Close();
  d->db.reset();
  if (!d->path.empty()) eb::RemoveDbFiles(d->path);
  d->path.clear();
  d->ids.clear();
  d->step = -1;
}

absl::Status LoadTable(int64_t page_size, int64_t rows, bool index, bool no_savepoint,
                       int64_t keep_ids, TestDb* d) {
  DropDb(d);
  d->path = eb::NewDbPath("mass_update");
  ember::Options o = eb::DefaultOptions();
  o.create_if_missing = true;
  o.page_size = static_cast<uint32_t>(page_size);
  o.gc_policy = ember::GcPolicy::kCooperative;  // the gc row measures the reader's collection
  absl::StatusOr<std::unique_ptr<ember::Database>> db = ember::Database::Open(d->path, o);
  if (!db.ok()) return db.status();
  d->db = std::move(*db);
  ember::TableSchema ts{
      "TST", {{"ID", ember::ColumnType::kInt64, false}, {"VAL", ember::ColumnType::kInt64, false}}};
  absl::StatusOr<ember::Table> t = d->db->CreateTable(ts);
  if (!t.ok()) return t.status();
  d->table = *t;
  if (auto ix = d->db->CreateIndex({"TST_PK", "TST", {"ID"}, true}); !ix.ok()) return ix.status();
  if (index) {
    if (auto ix = d->db->CreateIndex({"TST_VAL", "TST", {"VAL"}, false}); !ix.ok()) {
      return ix.status();
    }
  }
  absl::StatusOr<std::unique_ptr<ember::Transaction>> tx = d->db->Begin();
  if (!tx.ok()) return tx.status();
  for (int64_t i = 1; i <= rows; ++i) {
    absl::StatusOr<ember::RecordId> r = (*tx)->Insert(d->table, Row{i, LoadedVal(i)});
    if (!r.ok()) return r.status();
    if (i <= keep_ids) d->ids.push_back(*r);
  }
  if (absl::Status st = (*tx)->Commit(); !st.ok()) return st;
  ember::TransactionOptions to;
  to.no_savepoint = no_savepoint;
  tx = d->db->Begin(to);
  if (!tx.ok()) return tx.status();
  d->tx = std::move(*tx);
  d->step = 0;
  return absl::OkStatus();
}

absl::Status CheckRows(ember::Database* db, const ember::Table& t, int64_t rows,
                       const std::function<int64_t(int64_t id)>& expected) {
  absl::StatusOr<std::unique_ptr<ember::Transaction>> tx = db->Begin();
  if (!tx.ok()) return tx.status();
  absl::StatusOr<std::unique_ptr<ember::Cursor>> c = (*tx)->Scan(t);
  if (!c.ok()) return c.status();
  int64_t n = 0, id_sum = 0;
  for (; (*c)->Valid(); ++n) {
    const int64_t id = std::get<int64_t>((*c)->row()[0]);
    const int64_t val = std::get<int64_t>((*c)->row()[1]);
    if (val != expected(id)) {
      return absl::InternalError(
          absl::StrCat("row ", id, " has VAL ", val, ", expected ", expected(id)));
    }
    id_sum += id;
    if (absl::Status s = (*c)->Next(); !s.ok()) return s;
  }
  if (absl::Status s = (*tx)->Commit(); !s.ok()) return s;
  if (n != rows || id_sum != rows * (rows + 1) / 2) {
    return absl::InternalError(
        absl::StrCat("read ", n, " rows (ids summing to ", id_sum, "), expected ids 1..", rows));
  }
  return absl::OkStatus();
}

absl::Status CheckIndexes(ember::Database* db, int64_t rows, bool index, bool undone) {
  absl::StatusOr<ember::ValidationReport> r = db->Validate();
  if (!r.ok()) return r.status();
  if (!r->ok()) return absl::InternalError(absl::StrCat("Validate: ", r->errors.front()));
  const uint64_t want = static_cast<uint64_t>(rows) * (index ? 2 : 1);
  if (undone && r->index_entries != want) {
    return absl::InternalError(absl::StrCat("after the undo, Validate counted ", r->index_entries,
                                            " index entries, expected ", want));
  }
  return absl::OkStatus();
}

}  // namespace mass_update
