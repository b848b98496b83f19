// The table of crash_test.cc and what goes with it: a model of its committed contents, a random
// transaction generator, its operations' text in the side log of the SIGKILL test (side_log.h),
// and a reader that takes a database's visible state and cross-checks the indexes against a scan.
//
// crash_test.cc is its only user, so it stays next to it, header-only, outside the tests/support
// library.
//
// The table: rows(id INT64 NOT NULL, value BYTES NOT NULL, txn_tag INT64 NOT NULL) with a unique
// index on id and a non-unique index on txn_tag. `txn_tag` is the tag of the transaction that
// last wrote the row (tags are unique per transaction). The value is a function of
// (id, vtag, len): its first 8 bytes hold vtag, so a value read back can be checked on its own.
// An update either rewrites the value (vtag = the writer's tag) or only changes txn_tag (vtag
// kept: the old version becomes a small delta against the new one).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "tests/support/side_log.h"

namespace ember::testing {

inline TableSchema RowsSchema() {
  return TableSchema{
      "rows",
      {Column{"id", ColumnType::kInt64, false}, Column{"value", ColumnType::kBytes, false},
       Column{"txn_tag", ColumnType::kInt64, false}}};
}
inline IndexSchema IdIndexSchema() { return IndexSchema{"rows_by_id", "rows", {"id"}, true}; }
inline IndexSchema TagIndexSchema() {
  return IndexSchema{"rows_by_tag", "rows", {"txn_tag"}, false};
}

struct Handles {
  Table table;
  Index by_id;
  Index by_tag;
};

inline absl::StatusOr<Handles> CreateSchema(Database* db) {
  Handles h;
  absl::StatusOr<Table> t = db->CreateTable(RowsSchema());
  if (!t.ok()) return t.status();
  h.table = *t;
  absl::StatusOr<Index> a = db->CreateIndex(IdIndexSchema());
  if (!a.ok()) return a.status();
  h.by_id = *a;
  absl::StatusOr<Index> b = db->CreateIndex(TagIndexSchema());
  if (!b.ok()) return b.status();
  h.by_tag = *b;
  return h;
}

inline absl::StatusOr<Handles> GetHandles(Database* db) {
  Handles h;
  absl::StatusOr<Table> t = db->GetTable("rows");
  if (!t.ok()) return t.status();
  h.table = *t;
  absl::StatusOr<Index> a = db->GetIndex("rows_by_id");
  if (!a.ok()) return a.status();
  h.by_id = *a;
  absl::StatusOr<Index> b = db->GetIndex("rows_by_tag");
  if (!b.ok()) return b.status();
  h.by_tag = *b;
  return h;
}

// ---------------------------------------------------------------- the model

struct RowState {
  uint64_t rec = 0;  // RecordId value
  int64_t tag = 0;   // txn_tag column
  int64_t vtag = 0;  // what the value was generated from
  uint32_t len = 0;  // value length
  friend bool operator==(const RowState&, const RowState&) = default;
};
using Model = std::map<int64_t, RowState>;  // id -> row

constexpr uint32_t kMinValueLen = 8;

inline std::string MakeValue(int64_t id, int64_t vtag, uint32_t len) {
  std::string v(std::max(len, kMinValueLen), '\0');
  std::memcpy(v.data(), &vtag, 8);
  uint64_t x = static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull ^
               static_cast<uint64_t>(vtag) * 0xC2B2AE3D27D4EB4Full;
  const bool compressible = (x >> 7) & 1;
  for (size_t i = 8; i < v.size(); ++i) {
    if (compressible) {
      v[i] = static_cast<char>('a' + (i / 16 + x) % 7);
    } else {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      v[i] = static_cast<char>(x & 0xFF);
    }
  }
  return v;
}

inline Row MakeRow(int64_t id, const RowState& r) {
  return Row{id, MakeValue(id, r.vtag, r.len), r.tag};
}

// One operation of a transaction, as logged: 'I' insert, 'U' update, 'D' delete.
struct Op {
  char kind = 'I';
  int64_t id = 0;
  uint64_t rec = 0;
  int64_t vtag = 0;
  uint32_t len = 0;

  // In the side log: "I id rec vtag len", "U id rec vtag len" or "D id rec".
  void Encode(std::string* out) const {
    if (kind == 'D') absl::StrAppend(out, " D ", id, " ", rec);
    else absl::StrAppend(out, " ", std::string(1, kind), " ", id, " ", rec, " ", vtag, " ", len);
  }
  void Decode(std::istream& in) {
    std::string k;
    in >> k >> id >> rec;
    kind = k.empty() ? '?' : k[0];
    if (kind != 'D') in >> vtag >> len;
  }
};

using Effect = TxnEffect<Op>;

inline void ApplyEffect(const Effect& e, Model* m) {
  for (const Op& op : e.ops) {
    switch (op.kind) {
      case 'I': (*m)[op.id] = RowState{op.rec, e.tag, op.vtag, op.len}; break;
      case 'U': {
        RowState& r = (*m)[op.id];
        r.tag = e.tag;
        r.vtag = op.vtag;
        r.len = op.len;
        break;
      }
      case 'D': m->erase(op.id); break;
    }
  }
}

inline std::string DescribeRow(const RowState& r) {
  return absl::StrCat("{rec ", r.rec, " tag ", r.tag, " vtag ", r.vtag, " len ", r.len, "}");
}

// ---------------------------------------------------------------- random transactions

struct WorkloadShape {
  int max_ops = 8;           // operations per transaction: 1..max_ops
  size_t target_rows = 600;  // above this, deletes are favoured over inserts
};

inline uint32_t RandomLen(std::mt19937_64& rng) {
  const uint32_t r = rng() % 100;
  if (r < 80) return kMinValueLen + rng() % 120;
  if (r < 96) return 128 + rng() % 800;
  return 1500 + rng() % 4000;  // past a quarter page: fragmented records
}

// Runs the operations of one random transaction (not its Commit). `view` holds the committed
// state on entry and the transaction's own view on return; `eff` gets what was done. Any error
// of the engine is returned as is (the caller decides whether it was expected).
inline absl::Status RunRandomOps(Transaction* txn, const Handles& h, std::mt19937_64& rng,
                                 const WorkloadShape& shape, int64_t tag, int64_t* next_id,
                                 Model* view, Effect* eff) {
  eff->tag = tag;
  eff->ops.clear();
  const int nops = 1 + static_cast<int>(rng() % shape.max_ops);
  for (int i = 0; i < nops; ++i) {
    const uint32_t r = rng() % 100;
    const bool big = view->size() > shape.target_rows;
    const uint32_t insert_p = view->empty() ? 100 : (big ? 25 : 45);
    const uint32_t delete_p = big ? 35 : 15;
    if (r < insert_p) {
      Op op{'I', (*next_id)++, 0, tag, RandomLen(rng)};
      RowState st{0, tag, op.vtag, op.len};
      absl::StatusOr<RecordId> rec = txn->Insert(h.table, MakeRow(op.id, st));
      if (!rec.ok()) return rec.status();
      op.rec = rec->value;
      st.rec = op.rec;
      (*view)[op.id] = st;
      eff->ops.push_back(op);
    } else {
      auto it = std::next(view->begin(), static_cast<long>(rng() % view->size()));
      const int64_t id = it->first;
      RowState& st = it->second;
      if (r < insert_p + delete_p) {
        if (absl::Status s = txn->Delete(h.table, RecordId{st.rec}); !s.ok()) return s;
        eff->ops.push_back(Op{'D', id, st.rec, 0, 0});
        view->erase(it);
      } else {
        RowState nst = st;
        nst.tag = tag;
        if (rng() % 3 != 0) {  // new value; else only the tag changes (delta back version)
          nst.vtag = tag;
          nst.len = RandomLen(rng);
        }
        if (absl::Status s = txn->Update(h.table, RecordId{st.rec}, MakeRow(id, nst)); !s.ok()) {
          return s;
        }
        eff->ops.push_back(Op{'U', id, st.rec, nst.vtag, nst.len});
        st = nst;
      }
    }
  }
  return absl::OkStatus();
}

// A transaction that updates a few existing rows again and again, each update its own
// statement, in a new order every pass (an application's loop over its working set): values grow
// and shrink (heads fragment and are overwritten in place), and with the undo log some blocks of
// updates run under a savepoint that is rolled back. Same contract as RunRandomOps; the view and
// the effect keep only what was not rolled back.
inline absl::Status RunRepeatedUpdates(Transaction* txn, const Handles& h, std::mt19937_64& rng,
                                       int64_t tag, bool savepoints, Model* view, Effect* eff) {
  eff->tag = tag;
  eff->ops.clear();
  if (view->empty()) return absl::OkStatus();
  std::vector<int64_t> ids;
  const size_t want = 2 + rng() % 30;
  for (size_t i = 0; i < want && i < view->size(); ++i) {
    ids.push_back(std::next(view->begin(), static_cast<long>(rng() % view->size()))->first);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const int passes = 2 + static_cast<int>(rng() % 5);
  Model saved_view;
  size_t saved_ops = 0;
  int n = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int64_t id : ids) {
      if (savepoints && n % 10 == 0) {
        if (absl::Status s = txn->Savepoint("block"); !s.ok()) return s;
        saved_view = *view;
        saved_ops = eff->ops.size();
      }
      RowState& st = (*view)[id];
      RowState nst = st;
      nst.tag = tag;
      if (rng() % 4 != 0) {  // new value; else only the tag changes
        nst.vtag = tag * 1000 + n;
        nst.len = RandomLen(rng);
      }
      if (absl::Status s = txn->Update(h.table, RecordId{st.rec}, MakeRow(id, nst)); !s.ok()) {
        return s;
      }
      eff->ops.push_back(Op{'U', id, st.rec, nst.vtag, nst.len});
      st = nst;
      if (savepoints && n % 10 == 9) {
        if (rng() % 3 == 0) {
          if (absl::Status s = txn->RollbackToSavepoint("block"); !s.ok()) return s;
          *view = saved_view;
          eff->ops.resize(saved_ops);
        }
        if (absl::Status s = txn->ReleaseSavepoint("block"); !s.ok()) return s;
      }
      ++n;
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- reading a database back

// (column `col` of each row, record) of a full descending scan of `ix`.
inline absl::StatusOr<std::vector<std::pair<int64_t, uint64_t>>> ScanDescending(Transaction* t,
                                                                                const Index& ix,
                                                                                size_t col) {
  std::vector<std::pair<int64_t, uint64_t>> out;
  absl::StatusOr<std::unique_ptr<Cursor>> c = t->IndexScan(ix, {}, {}, /*descending=*/true);
  if (!c.ok()) return c.status();
  for (; (*c)->Valid();) {
    out.emplace_back(std::get<int64_t>((*c)->row()[col]), (*c)->id().value);
    if (absl::Status s = (*c)->Next(); !s.ok()) return s;
  }
  return out;
}

// Reads every row `t` (a read-only transaction) sees into `out` and checks, appending a
// description of each problem to `problems`:
// - each row is well formed and its value is the one its (id, vtag, len) generates;
// - ids are unique;
// - a full scan of each index returns exactly the scanned records, in key order, with the same
//   rows, and a descending scan the same in reverse; a point lookup by id finds each row;
//   lookups of `absent_ids` find nothing.
// Returns an error only if the engine failed a call.
inline absl::Status ReadState(Transaction& t, const Handles& h,
                              const std::vector<int64_t>& absent_ids, Model* out,
                              std::vector<std::string>* problems) {
  out->clear();
  auto problem = [&](std::string s) {
    if (problems->size() < 40) problems->push_back(std::move(s));
  };

  std::map<int64_t, Row> rows;  // id -> row as scanned
  {
    absl::StatusOr<std::unique_ptr<Cursor>> c = t.Scan(h.table);
    if (!c.ok()) return c.status();
    for (; (*c)->Valid();) {
      const Row& row = (*c)->row();
      const uint64_t rec = (*c)->id().value;
      if (row.size() != 3 || !std::holds_alternative<int64_t>(row[0]) ||
          !std::holds_alternative<std::string>(row[1]) ||
          !std::holds_alternative<int64_t>(row[2])) {
        problem(absl::StrCat("record ", rec, ": malformed row"));
      } else {
        const int64_t id = std::get<int64_t>(row[0]);
        const std::string& value = std::get<std::string>(row[1]);
        RowState st;
        st.rec = rec;
        st.tag = std::get<int64_t>(row[2]);
        st.len = static_cast<uint32_t>(value.size());
        if (value.size() >= 8) std::memcpy(&st.vtag, value.data(), 8);
        if (value != MakeValue(id, st.vtag, st.len)) {
          problem(
              absl::StrCat("id ", id, " (record ", rec, "): value bytes are not what was written"));
        }
        if (!out->emplace(id, st).second) {
          problem(absl::StrCat("id ", id, " visible twice (records ", (*out)[id].rec, " and ", rec,
                               ")"));
        }
        rows[id] = row;
      }
      if (absl::Status s = (*c)->Next(); !s.ok()) return s;
    }
  }

  // Index on id: full scan in key order, then a point lookup per row.
  {
    std::vector<std::pair<int64_t, uint64_t>> want, got;
    for (const auto& [id, st] : *out) want.emplace_back(id, st.rec);
    absl::StatusOr<std::unique_ptr<Cursor>> c = t.IndexScan(h.by_id, {}, {});
    if (!c.ok()) return c.status();
    for (; (*c)->Valid();) {
      const Row& row = (*c)->row();
      const int64_t id = std::get<int64_t>(row[0]);
      got.emplace_back(id, (*c)->id().value);
      auto it = rows.find(id);
      if (it == rows.end() || it->second != row) {
        problem(absl::StrCat("index rows_by_id: id ", id, " (record ", (*c)->id().value,
                             ") does not match the table scan"));
      }
      if (absl::Status s = (*c)->Next(); !s.ok()) return s;
    }
    if (got != want) {
      problem(absl::StrCat("index rows_by_id scan returned ", got.size(), " entries, table scan ",
                           want.size(), " rows (or a different order/records)"));
    }
    absl::StatusOr<std::vector<std::pair<int64_t, uint64_t>>> desc = ScanDescending(&t, h.by_id, 0);
    if (!desc.ok()) return desc.status();
    std::reverse(desc->begin(), desc->end());
    if (*desc != want) {
      problem(absl::StrCat("index rows_by_id descending scan returned ", desc->size(),
                           " entries, table scan ", want.size(), " rows (or different ones)"));
    }
    for (const auto& [id, st] : *out) {
      absl::StatusOr<std::optional<std::pair<RecordId, Row>>> l = t.Lookup(h.by_id, Row{id});
      if (!l.ok()) return l.status();
      if (!l->has_value()) {
        problem(absl::StrCat("index rows_by_id: lookup of id ", id, " found nothing"));
      } else if ((*l)->first.value != st.rec || (*l)->second != rows[id]) {
        problem(absl::StrCat("index rows_by_id: lookup of id ", id, " found record ",
                             (*l)->first.value, ", scan has ", st.rec));
      }
    }
    for (int64_t id : absent_ids) {
      if (out->contains(id)) continue;
      absl::StatusOr<std::optional<std::pair<RecordId, Row>>> l = t.Lookup(h.by_id, Row{id});
      if (!l.ok()) return l.status();
      if (l->has_value()) {
        problem(absl::StrCat("index rows_by_id: lookup of id ", id, " found record ",
                             (*l)->first.value, " that the table scan does not show"));
      }
    }
  }

  // Index on txn_tag: full scan in (tag, record) order.
  {
    std::vector<std::pair<int64_t, uint64_t>> want, got;
    for (const auto& [id, st] : *out) want.emplace_back(st.tag, st.rec);
    std::sort(want.begin(), want.end());
    absl::StatusOr<std::unique_ptr<Cursor>> c = t.IndexScan(h.by_tag, {}, {});
    if (!c.ok()) return c.status();
    for (; (*c)->Valid();) {
      const Row& row = (*c)->row();
      got.emplace_back(std::get<int64_t>(row[2]), (*c)->id().value);
      auto it = rows.find(std::get<int64_t>(row[0]));
      if (it == rows.end() || it->second != row) {
        problem(absl::StrCat("index rows_by_tag: record ", (*c)->id().value,
                             " does not match the table scan"));
      }
      if (absl::Status s = (*c)->Next(); !s.ok()) return s;
    }
    if (got != want) {
      problem(absl::StrCat("index rows_by_tag scan returned ", got.size(), " entries, table scan ",
                           want.size(), " rows (or a different order/records)"));
    }
    absl::StatusOr<std::vector<std::pair<int64_t, uint64_t>>> desc =
        ScanDescending(&t, h.by_tag, 2);
    if (!desc.ok()) return desc.status();
    std::reverse(desc->begin(), desc->end());
    if (*desc != want) {
      problem(absl::StrCat("index rows_by_tag descending scan returned ", desc->size(),
                           " entries, table scan ", want.size(), " rows (or different ones)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ember::testing
