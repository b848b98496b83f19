// libFuzzer target: the public API driven by the input, checked against a model. The bytes are a
// program of up to kMaxOps calls on a small database: tables and indexes (unique, composite) made
// and dropped, inserts, updates and deletes from two snapshot transactions at once (wait = false,
// so every conflict is an immediate error the model can name), reads by record, scan, lookup and
// index range, named savepoints, BLOBs of every size class (inline, one page, several pages, a
// compressed column; written whole, in pieces, appended, concatenated, copied from another row),
// commit, rollback, close and reopen, collection and sweep. The model holds the committed rows,
// each transaction's snapshot and its own changes; every call's outcome, the error code included,
// must be the one the model predicts (transaction.h and database.h document them), every read
// must return exactly the model's rows, and Validate must be clean at every reopen and at the end.
// The Catch2 model test (tests/db/model_test.cc) runs long random walks; this target lets the
// fuzzer look for the short, odd sequences a random walk rarely takes.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "ember/ember.h"
#include "tests/fuzz/fuzz_util.h"

using namespace ember;

namespace {

constexpr int kTables = 3;
constexpr int kMaxOps = 200;
constexpr uint64_t kNewRecord = UINT64_MAX;  // record numbers start at 0

Options FuzzOptions() {
  Options o = fuzz::SmallDbOptions(32);
  o.gc_policy = GcPolicy::kCooperative;  // one thread: a finding replays exactly
  return o;
}

// ---------------------------------------------------------------- values and rows

// A row as the model holds it: t(id int64 NOT NULL, k int64, s string, b BLOB), the BLOB by
// its bytes.
struct MRow {
  int64_t id = 0;
  std::optional<int64_t> k;
  std::optional<std::string> s;
  std::optional<std::string> b;
  friend bool operator==(const MRow&, const MRow&) = default;
};
using MTable = std::map<uint64_t, MRow>;                  // record number -> row
using Pending = std::map<uint64_t, std::optional<MRow>>;  // nullopt: deleted

std::string Show(const MRow& r) {
  std::string out = "(" + std::to_string(r.id) + ", ";
  out += r.k ? std::to_string(*r.k) : "NULL";
  out += ", ";
  out += r.s ? "'" + r.s->substr(0, 12) + "'/" + std::to_string(r.s->size()) : "NULL";
  out += ", ";
  out += r.b ? "blob/" + std::to_string(r.b->size()) : "NULL";
  return out + ")";
}

const std::vector<std::optional<std::string>>& Strings() {
  static const std::vector<std::optional<std::string>> v = {
      std::nullopt,
      "",
      "a",
      "ab",
      "b",
      std::string("a\0b", 3),  // a zero byte: escaped in keys
      "zz",
      std::string(40, 'q'),
      std::string(300, 'r'),
      std::string(780, 't'),   // a key alone fits; with k in front it does not
      std::string(790, 's'),   // too long for a key at 4 KiB pages
      std::string(1500, 'u'),  // stored out of line
  };
  return v;
}

std::optional<int64_t> IntOf(uint8_t b) {
  switch (b % 11) {
    case 8: return std::nullopt;
    case 9: return INT64_MIN;
    case 10: return INT64_MAX;
    default: return int64_t{b % 11};
  }
}

std::string BlobBytes(uint8_t seed, size_t n) {
  std::string out(n, '\0');
  if (seed & 1) {  // incompressible: zstd keeps such frames raw
    uint32_t x = 0x9E3779B9u * (seed + 1u);
    for (size_t i = 0; i < n; ++i) {
      x = x * 1103515245u + 12345u;
      out[i] = static_cast<char>(x >> 24);
    }
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>('a' + (seed / 2 + i / 7) % 26);
  }
  return out;
}

// Inline, a few bytes, around one page, several pages, and past one 64 KiB zstd frame.
constexpr size_t kBlobSizes[] = {0, 1, 100, 3000, 4064, 4065, 9000, 40000, 70000};

// ---------------------------------------------------------------- index keys

// Index kinds: 0 (k), 1 (s), 2 (k, s).
std::vector<int> KeyColumns(int kind) {
  if (kind == 0) return {1};
  if (kind == 1) return {2};
  return {1, 2};
}

using KVal = std::variant<std::monostate, int64_t, std::string>;
using Key = std::vector<KVal>;

KVal ColumnValue(const MRow& r, int col) {
  if (col == 1) return r.k ? KVal(*r.k) : KVal();
  return r.s ? KVal(*r.s) : KVal();
}

Key KeyOf(const MRow& r, int kind) {
  Key k;
  for (int c : KeyColumns(kind)) k.push_back(ColumnValue(r, c));
  return k;
}

bool HasNull(const Key& k) {
  return std::any_of(k.begin(), k.end(), [](const KVal& v) { return v.index() == 0; });
}

// Encoded size (database.h, max_key_size): NULL 1, int64 9, string 3 + length + zero bytes.
size_t KeySize(const Key& k) {
  size_t n = 0;
  for (const KVal& v : k) {
    if (v.index() == 0) n += 1;
    else if (v.index() == 1) n += 9;
    else {
      const std::string& s = std::get<std::string>(v);
      n += 3 + s.size() + static_cast<size_t>(std::count(s.begin(), s.end(), '\0'));
    }
  }
  return n;
}

// Index order: NULL first, then by value; strings byte by byte; column by column.
int CompareVal(const KVal& a, const KVal& b) {
  if (a.index() != b.index()) return a.index() == 0 ? -1 : b.index() == 0 ? 1 : 0;
  if (a.index() == 1) {
    const int64_t x = std::get<int64_t>(a), y = std::get<int64_t>(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.index() == 2) {
    const int c = std::get<std::string>(a).compare(std::get<std::string>(b));
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  return 0;
}
// Compares the first min(|a|, |b|) columns (a bound may be a prefix).
int ComparePrefix(const Key& a, const Key& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (int c = CompareVal(a[i], b[i]); c != 0) return c;
  }
  return 0;
}

Value ToValue(const KVal& v) {
  if (v.index() == 1) return Value(std::get<int64_t>(v));
  if (v.index() == 2) return Value(std::get<std::string>(v));
  return Value();
}

// ---------------------------------------------------------------- operations

// What one step of a program does; the step's first byte picks it (kOpOfByte), the bytes after
// it are its arguments.
enum class Op : uint8_t {
  kCreateTable,
  kCreateIndex,  // [UNIQUE], on a table that may hold rows
  kDropIndex,
  kDropTable,
  kInsert,
  kUpdate,
  kDelete,
  kGet,
  kScan,
  kIndexRange,
  kLookup,
  kSavepoint,
  kReleaseSavepoint,
  kRollbackToSavepoint,
  kBlob,
  kCommit,
  kRollback,
  kReopen,
  kMaintenance,  // the collector, a sweep, Validate
  kBadRow,       // a row the schema refuses
  kCopiedKey,    // an insert or update to another row's key
};

// The op of each value of a step's first byte, taken modulo kOpCount: inserts have three values
// and updates two, so that programs write more than they read. The seed corpus
// (tests/fuzz/corpus/api) and every input the fuzzer keeps are written in these values: a
// change to the table, its length included, changes what they mean.
constexpr Op kOpOfByte[] = {
    Op::kCreateTable,          // 0
    Op::kCreateIndex,          // 1
    Op::kDropIndex,            // 2
    Op::kDropTable,            // 3
    Op::kInsert,               // 4
    Op::kInsert,               // 5
    Op::kInsert,               // 6
    Op::kUpdate,               // 7
    Op::kUpdate,               // 8
    Op::kDelete,               // 9
    Op::kGet,                  // 10
    Op::kScan,                 // 11
    Op::kIndexRange,           // 12
    Op::kLookup,               // 13
    Op::kSavepoint,            // 14
    Op::kReleaseSavepoint,     // 15
    Op::kRollbackToSavepoint,  // 16
    Op::kBlob,                 // 17
    Op::kCommit,               // 18
    Op::kRollback,             // 19
    Op::kReopen,               // 20
    Op::kMaintenance,          // 21
    Op::kBadRow,               // 22
    Op::kCopiedKey,            // 23
};
constexpr uint8_t kOpCount = std::size(kOpOfByte);
static_assert(kOpCount == 24, "the corpus is written for these 24 values");

// The first byte value that means `op` (what the seeds write).
constexpr uint8_t ByteOf(Op op) {
  for (uint8_t b = 0; b < kOpCount; ++b) {
    if (kOpOfByte[b] == op) return b;
  }
  return kOpCount;  // not reached: every op has a value
}

// ---------------------------------------------------------------- the model

struct IndexDef {
  int kind = 0;
  bool unique = false;
  std::string name;
};

struct TableDef {
  bool exists = false;
  std::vector<IndexDef> indexes;  // in creation order
};

struct SavepointState {
  std::string name;  // "" once a newer savepoint took the name
  std::array<Pending, kTables> pending;
};

struct Tx {
  std::unique_ptr<Transaction> tx;
  uint64_t begin_seq = 0;
  std::array<MTable, kTables> snap;
  std::array<Pending, kTables> pending;
  std::vector<SavepointState> savepoints;
  // Some version it wrote (kept or not) has a key over max_key_size for index kind k: once
  // committed, that version may outlive the row's later values until a sweep removes it.
  std::array<std::array<bool, 3>, kTables> long_keys{};
};

std::string TableName(int t) { return "t" + std::to_string(t); }
std::string IndexName(int t, int kind) { return TableName(t) + "_" + std::to_string(kind); }

const char* CodeName(absl::StatusCode c) {
  switch (c) {
    case absl::StatusCode::kOk: return "OK";
    case absl::StatusCode::kNotFound: return "NotFound";
    case absl::StatusCode::kAborted: return "Aborted";
    case absl::StatusCode::kAlreadyExists: return "AlreadyExists";
    case absl::StatusCode::kInvalidArgument: return "InvalidArgument";
    case absl::StatusCode::kFailedPrecondition: return "FailedPrecondition";
    default: return "another code";
  }
}

class Runner {
 public:
  explicit Runner(std::string path) : path_(std::move(path)) {}
  ~Runner() {
    for (Tx& t : txs_) t.tx.reset();
    if (db_) (void)db_->Close();
  }

  void Run(fuzz::Input& in) {
    Options o = FuzzOptions();
    o.create_if_missing = true;
    db_ = fuzz::Must(Database::Open(path_, o), "create");
    max_key_ = db_->max_key_size();
    for (int n = 0; n < kMaxOps && !in.empty(); ++n) {
      op_ = n;
      Step(in);
    }
    for (int i = 0; i < 2; ++i) {
      if (txs_[i].tx) Commit(i);
    }
    Reopen();
  }

 private:
  // ------------------------------------------------------------ helpers

  [[noreturn]] void Fail(const std::string& what) {
    fuzz::Fail("op " + std::to_string(op_) + ": " + what);
  }
  void Expect(const absl::Status& s, const std::set<absl::StatusCode>& allowed,
              const std::string& what) {
    if (allowed.count(s.code())) return;
    std::string want;
    for (absl::StatusCode c : allowed)
      want += std::string(want.empty() ? "" : " or ") + CodeName(c);
    Fail(what + ": expected " + want + ", got " + s.ToString());
  }
  void MustOk(const absl::Status& s, const std::string& what) {
    if (!s.ok()) Fail(what + ": " + s.ToString());
  }

  bool AnyActive() const { return txs_[0].tx || txs_[1].tx; }

  Tx& Ensure(int i) {
    Tx& t = txs_[i];
    if (!t.tx) {
      TransactionOptions to;
      to.wait = false;  // a conflict is an immediate Aborted: nothing in one thread waits
      absl::StatusOr<std::unique_ptr<Transaction>> tx = db_->Begin(to);
      MustOk(tx.status(), "Begin");
      t.tx = std::move(*tx);
      t.begin_seq = seq_;
      t.snap = committed_;
      for (Pending& p : t.pending) p.clear();
      t.savepoints.clear();
      t.long_keys = {};
    }
    return t;
  }

  MTable View(const Tx& t, int table) const {
    MTable v = t.snap[table];
    for (const auto& [rec, row] : t.pending[table]) {
      if (row) v[rec] = *row;
      else v.erase(rec);
    }
    return v;
  }

  std::string ReadBlob(Transaction* tx, BlobId id, const std::string& what) {
    absl::StatusOr<std::unique_ptr<BlobReader>> r = tx->OpenBlob(id);
    MustOk(r.status(), what + ": OpenBlob");
    std::string out;
    char buf[16384];
    for (;;) {
      absl::StatusOr<size_t> n = (*r)->Read(buf, sizeof buf);
      MustOk(n.status(), what + ": BLOB Read");
      if (*n == 0) break;
      out.append(buf, *n);
      if (out.size() > (1u << 20)) Fail(what + ": BLOB longer than any written");
    }
    if (out.size() != (*r)->size()) Fail(what + ": BLOB size() differs from the bytes read");
    return out;
  }

  MRow FromEngine(Transaction* tx, const Row& row, const std::string& what) {
    if (row.size() != 4) Fail(what + ": row of " + std::to_string(row.size()) + " values");
    MRow m;
    if (!std::holds_alternative<int64_t>(row[0])) Fail(what + ": id is not an int64");
    m.id = std::get<int64_t>(row[0]);
    if (const int64_t* k = std::get_if<int64_t>(&row[1])) m.k = *k;
    else if (!IsNull(row[1])) Fail(what + ": k is neither int64 nor NULL");
    if (const std::string* s = std::get_if<std::string>(&row[2])) m.s = *s;
    else if (!IsNull(row[2])) Fail(what + ": s is neither string nor NULL");
    if (const BlobId* b = std::get_if<BlobId>(&row[3])) m.b = ReadBlob(tx, *b, what);
    else if (!IsNull(row[3])) Fail(what + ": b is neither BLOB nor NULL");
    return m;
  }

  Row ToRow(const MRow& r) const {
    return Row{r.id, r.k ? Value(*r.k) : Value(), r.s ? Value(*r.s) : Value(), Value()};
  }

  // ------------------------------------------------------------ checks

  void CheckRows(Transaction* tx, int t, const MTable& want, const std::string& who) {
    const std::string what = who + " scan of " + TableName(t);
    absl::StatusOr<std::unique_ptr<Cursor>> c = tx->Scan(tables_[t]);
    MustOk(c.status(), what);
    auto it = want.begin();
    for (; (*c)->Valid(); MustOk((*c)->Next(), what + ": Next")) {
      const uint64_t rec = (*c)->id().value;
      if (it == want.end()) Fail(what + ": extra record " + std::to_string(rec));
      if (rec != it->first) {
        Fail(what + ": record " + std::to_string(rec) + " where the model has " +
             std::to_string(it->first));
      }
      const MRow got = FromEngine(tx, (*c)->row(), what);
      if (!(got == it->second)) {
        Fail(what + ": record " + std::to_string(rec) + " is " + Show(got) + ", model " +
             Show(it->second));
      }
      ++it;
    }
    if (it != want.end()) Fail(what + ": record " + std::to_string(it->first) + " missing");
  }

  // An index scan must give the model's rows in key order; records of equal keys in any order.
  void CheckIndexScan(Transaction* tx, const IndexDef& ix, const MTable& view, const Key& lo,
                      const Key& hi, bool desc, const std::string& who) {
    const std::string what = who + " index scan of " + ix.name;
    std::vector<std::pair<Key, uint64_t>> want;
    for (const auto& [rec, row] : view) {
      Key k = KeyOf(row, ix.kind);
      if (ComparePrefix(k, lo) < 0 || ComparePrefix(k, hi) > 0) continue;
      want.emplace_back(std::move(k), rec);
    }
    std::stable_sort(want.begin(), want.end(), [](const auto& a, const auto& b) {
      return ComparePrefix(a.first, b.first) < 0;
    });
    if (desc) std::reverse(want.begin(), want.end());
    Row lo_row, hi_row;
    for (const KVal& v : lo) lo_row.push_back(ToValue(v));
    for (const KVal& v : hi) hi_row.push_back(ToValue(v));
    absl::StatusOr<std::unique_ptr<Cursor>> c =
        tx->IndexScan(indexes_.at(ix.name), lo_row, hi_row, desc);
    MustOk(c.status(), what);
    std::vector<std::pair<Key, uint64_t>> got;
    for (; (*c)->Valid(); MustOk((*c)->Next(), what + ": Next")) {
      const uint64_t rec = (*c)->id().value;
      auto vit = view.find(rec);
      if (vit == view.end()) Fail(what + ": record " + std::to_string(rec) + " not visible");
      const MRow row = FromEngine(tx, (*c)->row(), what);
      if (!(row == vit->second)) {
        Fail(what + ": record " + std::to_string(rec) + " is " + Show(row) + ", model " +
             Show(vit->second));
      }
      got.emplace_back(KeyOf(row, ix.kind), rec);
      if (got.size() > want.size()) break;
    }
    if (got.size() != want.size()) {
      Fail(what + ": " + std::to_string(got.size()) + " entries, model " +
           std::to_string(want.size()));
    }
    // Same keys in the same order; within a run of equal keys, the same records.
    for (size_t i = 0; i < got.size();) {
      size_t j = i;
      while (j < got.size() && ComparePrefix(want[j].first, want[i].first) == 0) ++j;
      std::vector<uint64_t> a, b;
      for (size_t x = i; x < j; ++x) {
        if (ComparePrefix(got[x].first, want[i].first) != 0) {
          Fail(what + ": key out of order at entry " + std::to_string(x) + " (record " +
               std::to_string(got[x].second) + ")");
        }
        a.push_back(got[x].second);
        b.push_back(want[x].second);
      }
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a != b) Fail(what + ": other records under a key at entry " + std::to_string(i));
      i = j;
    }
  }

  void CheckView(Transaction* tx, const std::array<MTable, kTables>& views,
                 const std::string& who) {
    for (int t = 0; t < kTables; ++t) {
      if (!defs_[t].exists) continue;
      CheckRows(tx, t, views[t], who);
      for (const IndexDef& ix : defs_[t].indexes)
        CheckIndexScan(tx, ix, views[t], {}, {}, false, who);
    }
  }

  void CheckTx(int i, const std::string& why) {
    std::array<MTable, kTables> v;
    for (int t = 0; t < kTables; ++t) v[t] = View(txs_[i], t);
    CheckView(txs_[i].tx.get(), v, "tx" + std::to_string(i) + " " + why);
  }

  // A new transaction sees exactly the committed rows.
  void CheckCommitted(const std::string& why) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = db_->Begin();
    MustOk(tx.status(), "Begin (check)");
    CheckView(tx->get(), committed_, "committed " + why);
    MustOk((*tx)->Rollback(), "Rollback (check)");
  }

  void Validate(const std::string& why) {
    absl::StatusOr<ValidationReport> r = db_->Validate();
    MustOk(r.status(), "Validate " + why);
    if (!r->ok()) Fail("Validate " + why + ": " + r->errors.front());
  }

  // ------------------------------------------------------------ outcome prediction

  // Whether another transaction than `self` has changes pending on the record.
  int OtherWriter(int self, int t, uint64_t rec) const {
    const int o = 1 - self;
    if (txs_[o].tx && txs_[o].pending[t].count(rec)) return o;
    return -1;
  }

  // The write conflict check of Update and Delete (transaction.h: Aborted "update conflict").
  bool Conflicts(int self, int t, uint64_t rec) const {
    if (OtherWriter(self, t, rec) >= 0) return true;
    if (txs_[self].pending[t].count(rec)) return false;
    auto it = commit_seq_[t].find(rec);
    return it != commit_seq_[t].end() && it->second > txs_[self].begin_seq;
  }

  // What the key checks of a write of `row` to record `rec` (kNewRecord: a new one) of table t by
  // transaction `self` may fail with: the caller adds OK when the set is empty. An index whose
  // key the update keeps is not checked (transaction_impl.cc AddKeys).
  std::set<absl::StatusCode> KeyErrors(int self, int t, uint64_t rec, const MRow* old,
                                       const MRow& row) const {
    std::set<absl::StatusCode> errs;
    bool too_long = false;
    for (const IndexDef& ix : defs_[t].indexes) {
      const Key k = KeyOf(row, ix.kind);
      if (old && ComparePrefix(KeyOf(*old, ix.kind), k) == 0) continue;
      if (KeySize(k) > max_key_) too_long = true;
    }
    if (too_long) return {absl::StatusCode::kInvalidArgument};
    for (const IndexDef& ix : defs_[t].indexes) {
      const Key k = KeyOf(row, ix.kind);
      if (!ix.unique || HasNull(k)) continue;
      if (old && ComparePrefix(KeyOf(*old, ix.kind), k) == 0) continue;
      auto has = [&](const std::optional<MRow>& r) {
        return r && ComparePrefix(KeyOf(*r, ix.kind), k) == 0;
      };
      std::set<uint64_t> recs;
      for (const auto& [r, v] : committed_[t]) recs.insert(r);
      for (const Tx& x : txs_) {
        if (!x.tx) continue;
        for (const auto& [r, v] : x.pending[t]) recs.insert(r);
      }
      for (uint64_t r : recs) {
        if (r == rec) continue;
        std::optional<MRow> c;
        if (auto it = committed_[t].find(r); it != committed_[t].end()) c = it->second;
        if (int o = OtherWriter(self, t, r); o >= 0) {
          // An uncommitted version of another transaction: its key, or the committed key under
          // it, is held until it ends.
          if (has(txs_[o].pending[t].at(r)) || has(c)) errs.insert(absl::StatusCode::kAborted);
        } else if (auto p = txs_[self].pending[t].find(r); p != txs_[self].pending[t].end()) {
          if (has(p->second)) errs.insert(absl::StatusCode::kAlreadyExists);
        } else if (has(c)) {
          errs.insert(absl::StatusCode::kAlreadyExists);
        }
      }
    }
    return errs;
  }

  // ------------------------------------------------------------ operations

  // Picks a record of `view` (or, now and then, one that is gone for everyone).
  std::optional<uint64_t> Pick(int self, int t, const MTable& view, uint8_t b, bool allow_gone) {
    if (allow_gone && b % 8 == 7) {
      std::vector<uint64_t> gone;
      for (uint64_t r : known_[t]) {
        if (view.count(r) || committed_[t].count(r) || txs_[self].snap[t].count(r)) continue;
        if (std::any_of(txs_.begin(), txs_.end(),
                        [&](const Tx& x) { return x.tx && x.pending[t].count(r); })) {
          continue;
        }
        gone.push_back(r);
      }
      if (!gone.empty()) return gone[(b / 8) % gone.size()];
    }
    if (view.empty()) return std::nullopt;
    auto it = view.begin();
    std::advance(it, b % view.size());
    return it->first;
  }

  MRow RowFrom(fuzz::Input& in) {
    MRow r;
    r.id = static_cast<int8_t>(in.Byte()) * 1000;
    r.k = IntOf(in.Byte());
    r.s = Strings()[in.Byte() % Strings().size()];
    return r;
  }

  void NoteLongKeys(Tx& x, int t, const MRow& row) const {
    for (int k = 0; k < 3; ++k) x.long_keys[t][k] |= KeySize(KeyOf(row, k)) > max_key_;
  }

  // A new record number is one no snapshot or transaction can still meet.
  void NoteInserted(int i, int t, uint64_t rec, const MRow& row) {
    bool used = committed_[t].count(rec) > 0;
    for (const Tx& x : txs_) {
      if (x.tx) used |= x.snap[t].count(rec) > 0 || x.pending[t].count(rec) > 0;
    }
    if (used) Fail("Insert gave record " + std::to_string(rec) + ", which is still in use");
    txs_[i].pending[t][rec] = row;
    NoteLongKeys(txs_[i], t, row);
    known_[t].insert(rec);
  }

  void Insert(int i, int t, const MRow& row, BlobId b, const std::string& what) {
    Tx& x = Ensure(i);
    std::set<absl::StatusCode> errs = KeyErrors(i, t, kNewRecord, nullptr, row);
    Row r = ToRow(row);
    if (row.b) r[3] = b;
    absl::StatusOr<RecordId> id = x.tx->Insert(tables_[t], r);
    if (errs.empty()) errs.insert(absl::StatusCode::kOk);
    Expect(id.status(), errs, what + " " + Show(row));
    if (id.ok()) NoteInserted(i, t, id->value, row);
  }

  // The engine's value of the BLOB column of a record this transaction sees.
  BlobId EngineBlob(int i, int t, uint64_t rec) {
    absl::StatusOr<std::optional<Row>> r = txs_[i].tx->Get(tables_[t], RecordId{rec});
    MustOk(r.status(), "Get (BLOB id)");
    if (!*r || (*r)->size() != 4)
      Fail("Get (BLOB id): record " + std::to_string(rec) + " not there");
    if (const BlobId* b = std::get_if<BlobId>(&(**r)[3])) return *b;
    return BlobId{};
  }

  void Update(int i, int t, uint64_t rec, const MRow& row, BlobId b, const std::string& what) {
    Tx& x = Ensure(i);
    const MTable view = View(x, t);
    auto old = view.find(rec);
    std::set<absl::StatusCode> errs;
    if (old == view.end()) {
      errs = {absl::StatusCode::kNotFound};
    } else if (Conflicts(i, t, rec)) {
      errs = {absl::StatusCode::kAborted};
    } else {
      errs = KeyErrors(i, t, rec, &old->second, row);
    }
    Row r = ToRow(row);
    if (row.b) r[3] = b;
    const absl::Status s = x.tx->Update(tables_[t], RecordId{rec}, r);
    if (errs.empty()) errs.insert(absl::StatusCode::kOk);
    Expect(s, errs, what + " of record " + std::to_string(rec) + " to " + Show(row));
    if (s.ok()) {
      x.pending[t][rec] = row;
      NoteLongKeys(x, t, row);
    }
  }

  void Step(fuzz::Input& in) {
    const Op op = kOpOfByte[in.Byte() % kOpCount];
    switch (op) {
      case Op::kCreateTable: {  // the slot's name may be taken
        const int t = in.Byte() % kTables;
        if (AnyActive()) break;
        std::vector<Column> cols = {{"id", ColumnType::kInt64, false},
                                    {"k", ColumnType::kInt64},
                                    {"s", ColumnType::kString},
                                    {"b", ColumnType::kBlob, true, t == 1 ? 3 : 0}};
        absl::StatusOr<Table> tb = db_->CreateTable({TableName(t), cols});
        Expect(tb.status(),
               {defs_[t].exists ? absl::StatusCode::kAlreadyExists : absl::StatusCode::kOk},
               "CreateTable " + TableName(t));
        if (tb.ok()) {
          tables_[t] = *tb;
          defs_[t] = TableDef{true, {}};
          committed_[t].clear();
          long_keys_[t] = {};
          commit_seq_[t].clear();
          known_[t].clear();
        }
        break;
      }
      case Op::kCreateIndex: {
        const int t = in.Byte() % kTables;
        const int kind = in.Byte() % 3;
        const bool unique = in.Byte() & 1;
        if (AnyActive()) break;
        const std::string name = IndexName(t, kind);
        IndexSchema sc{name, TableName(t), {}, unique};
        for (int c : KeyColumns(kind)) sc.columns.push_back(c == 1 ? "k" : "s");
        absl::StatusOr<Index> ix = db_->CreateIndex(sc);
        if (!defs_[t].exists) {
          Expect(ix.status(), {absl::StatusCode::kNotFound}, "CreateIndex on a missing table");
          break;
        }
        const bool taken = indexes_.count(name) > 0;
        bool dup = false, too_long = false;
        std::vector<Key> keys;
        for (const auto& [rec, row] : committed_[t]) {
          Key k = KeyOf(row, kind);
          too_long |= KeySize(k) > max_key_;
          if (unique && !HasNull(k)) keys.push_back(std::move(k));
        }
        std::sort(keys.begin(), keys.end(),
                  [](const Key& a, const Key& b) { return ComparePrefix(a, b) < 0; });
        for (size_t j = 1; j < keys.size(); ++j) dup |= ComparePrefix(keys[j - 1], keys[j]) == 0;
        const std::string what = "CreateIndex " + name + (unique ? " unique" : "");
        if (taken) {
          Expect(ix.status(), {absl::StatusCode::kAlreadyExists}, what + " (name taken)");
        } else if (too_long) {
          // A key too long for the tree: refused, with nothing left behind (a unique duplicate
          // may be met first).
          if (ix.ok()) Fail(what + ": built over a key longer than max_key_size");
        } else if (dup) {
          std::set<absl::StatusCode> ok = {absl::StatusCode::kAlreadyExists};
          if (long_keys_[t][kind]) ok.insert(absl::StatusCode::kInvalidArgument);
          Expect(ix.status(), ok, what + " over duplicates");
        } else if (long_keys_[t][kind]) {
          // An older version's key is too long: refused unless collected already.
          Expect(ix.status(), {absl::StatusCode::kOk, absl::StatusCode::kInvalidArgument},
                 what + " over an older version with a key too long");
        } else {
          Expect(ix.status(), {absl::StatusCode::kOk}, what);
        }
        if (ix.ok()) {
          indexes_[name] = *ix;
          defs_[t].indexes.push_back({kind, unique, name});
        }
        CheckCommitted("after " + what);
        break;
      }
      case Op::kDropIndex: {
        const int t = in.Byte() % kTables;
        const int kind = in.Byte() % 3;
        if (AnyActive()) break;
        const std::string name = IndexName(t, kind);
        const absl::Status s = db_->DropIndex(name);
        Expect(s, {indexes_.count(name) ? absl::StatusCode::kOk : absl::StatusCode::kNotFound},
               "DropIndex " + name);
        if (s.ok()) {
          indexes_.erase(name);
          auto& v = defs_[t].indexes;
          v.erase(
              std::remove_if(v.begin(), v.end(), [&](const IndexDef& d) { return d.name == name; }),
              v.end());
        }
        break;
      }
      case Op::kDropTable: {
        const int t = in.Byte() % kTables;
        if (AnyActive()) break;
        const absl::Status s = db_->DropTable(TableName(t));
        Expect(s, {defs_[t].exists ? absl::StatusCode::kOk : absl::StatusCode::kNotFound},
               "DropTable " + TableName(t));
        if (s.ok()) {
          for (const IndexDef& ix : defs_[t].indexes) indexes_.erase(ix.name);
          defs_[t] = TableDef{};
          committed_[t].clear();
          long_keys_[t] = {};
          commit_seq_[t].clear();
          known_[t].clear();
          tables_[t] = Table();
          CheckCommitted("after DropTable");
        }
        break;
      }
      case Op::kInsert: {
        const uint8_t a = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        const MRow row = RowFrom(in);
        if (!defs_[t].exists) break;
        Insert(i, t, row, BlobId{}, "Insert into " + TableName(t));
        break;
      }
      case Op::kUpdate: {  // keeping the record's BLOB
        const uint8_t a = in.Byte(), b = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        MRow row = RowFrom(in);
        if (!defs_[t].exists) break;
        Ensure(i);
        const MTable view = View(txs_[i], t);
        const std::optional<uint64_t> rec = Pick(i, t, view, b, true);
        if (!rec) break;
        BlobId blob{};
        if (auto it = view.find(*rec); it != view.end()) {
          row.b = it->second.b;
          if (row.b) blob = EngineBlob(i, t, *rec);
        }
        Update(i, t, *rec, row, blob, "Update in " + TableName(t));
        break;
      }
      case Op::kDelete: {
        const uint8_t a = in.Byte(), b = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        if (!defs_[t].exists) break;
        Tx& x = Ensure(i);
        const MTable view = View(x, t);
        const std::optional<uint64_t> rec = Pick(i, t, view, b, true);
        if (!rec) break;
        absl::StatusCode want = absl::StatusCode::kOk;
        if (!view.count(*rec)) want = absl::StatusCode::kNotFound;
        else if (Conflicts(i, t, *rec)) want = absl::StatusCode::kAborted;
        const absl::Status s = x.tx->Delete(tables_[t], RecordId{*rec});
        Expect(s, {want}, "Delete of record " + std::to_string(*rec) + " in " + TableName(t));
        if (s.ok()) x.pending[t][*rec] = std::nullopt;
        break;
      }
      case Op::kGet: {  // of a record seen or gone
        const uint8_t a = in.Byte(), b = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        if (!defs_[t].exists || known_[t].empty()) break;
        Tx& x = Ensure(i);
        auto it = known_[t].begin();
        std::advance(it, b % known_[t].size());
        const MTable view = View(x, t);
        absl::StatusOr<std::optional<Row>> r = x.tx->Get(tables_[t], RecordId{*it});
        const std::string what = "Get of record " + std::to_string(*it) + " in " + TableName(t);
        MustOk(r.status(), what);
        auto v = view.find(*it);
        if (r->has_value() != (v != view.end())) {
          Fail(what +
               (r->has_value() ? ": found, the model has none" : ": none, the model has one"));
        }
        if (*r) {
          const MRow got = FromEngine(x.tx.get(), **r, what);
          if (!(got == v->second)) Fail(what + ": " + Show(got) + ", model " + Show(v->second));
        }
        break;
      }
      case Op::kScan: {
        const uint8_t a = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        if (!defs_[t].exists) break;
        Tx& x = Ensure(i);
        CheckRows(x.tx.get(), t, View(x, t), "tx" + std::to_string(i));
        break;
      }
      case Op::kIndexRange: {  // bounds of any prefix length, either direction
        const uint8_t a = in.Byte(), b = in.Byte(), c = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        auto bound = [&](int kind, int len) {
          Key k;
          std::vector<int> cols = KeyColumns(kind);
          for (int j = 0; j < len && j < static_cast<int>(cols.size()); ++j) {
            const uint8_t v = in.Byte();
            if (cols[j] == 1) {
              std::optional<int64_t> x = IntOf(v);
              k.push_back(x ? KVal(*x) : KVal());
            } else {
              std::optional<std::string> x = Strings()[v % Strings().size()];
              k.push_back(x ? KVal(*x) : KVal());
            }
          }
          return k;
        };
        if (!defs_[t].exists || defs_[t].indexes.empty()) break;
        const IndexDef ix = defs_[t].indexes[b % defs_[t].indexes.size()];
        const Key lo = bound(ix.kind, c % 3);
        const Key hi = bound(ix.kind, (c / 3) % 3);
        Tx& x = Ensure(i);
        CheckIndexScan(x.tx.get(), ix, View(x, t), lo, hi, (c / 9) & 1, "tx" + std::to_string(i));
        break;
      }
      case Op::kLookup: {  // of a full key
        const uint8_t a = in.Byte(), b = in.Byte(), v1 = in.Byte(), v2 = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        if (!defs_[t].exists || defs_[t].indexes.empty()) break;
        const IndexDef ix = defs_[t].indexes[b % defs_[t].indexes.size()];
        MRow probe;
        probe.k = IntOf(v1);
        probe.s = Strings()[v2 % Strings().size()];
        const Key key = KeyOf(probe, ix.kind);
        Row key_row;
        for (const KVal& v : key) key_row.push_back(ToValue(v));
        Tx& x = Ensure(i);
        const MTable view = View(x, t);
        bool any = false;
        for (const auto& [rec, row] : view) any |= ComparePrefix(KeyOf(row, ix.kind), key) == 0;
        absl::StatusOr<std::optional<std::pair<RecordId, Row>>> r =
            x.tx->Lookup(indexes_.at(ix.name), key_row);
        const std::string what = "Lookup in " + ix.name;
        MustOk(r.status(), what);
        if (r->has_value() != any)
          Fail(what + (any ? ": none, the model has one" : ": found one the model has not"));
        if (*r) {
          auto v = view.find((*r)->first.value);
          if (v == view.end()) Fail(what + ": a record not visible");
          const MRow got = FromEngine(x.tx.get(), (*r)->second, what);
          if (!(got == v->second) || ComparePrefix(KeyOf(got, ix.kind), key) != 0) {
            Fail(what + ": " + Show(got) + ", model " + Show(v->second));
          }
        }
        break;
      }
      case Op::kSavepoint:
      case Op::kReleaseSavepoint:
      case Op::kRollbackToSavepoint: {
        const uint8_t a = in.Byte();
        const int i = a & 1;
        const std::string name = "sp" + std::to_string((a >> 1) % 3);
        Tx& x = Ensure(i);
        if (op == Op::kSavepoint) {
          MustOk(x.tx->Savepoint(name), "Savepoint " + name);
          for (SavepointState& sp : x.savepoints) {
            if (sp.name == name) sp.name.clear();
          }
          x.savepoints.push_back({name, x.pending});
          break;
        }
        int at = -1;
        for (int j = static_cast<int>(x.savepoints.size()) - 1; j >= 0 && at < 0; --j) {
          if (x.savepoints[j].name == name) at = j;
        }
        const bool release = op == Op::kReleaseSavepoint;
        const absl::Status s =
            release ? x.tx->ReleaseSavepoint(name) : x.tx->RollbackToSavepoint(name);
        const std::string what =
            std::string(release ? "ReleaseSavepoint " : "RollbackToSavepoint ") + name;
        Expect(s, {at < 0 ? absl::StatusCode::kNotFound : absl::StatusCode::kOk}, what);
        if (at < 0) break;
        if (release) {
          x.savepoints.resize(at);
        } else {
          x.pending = x.savepoints[at].pending;
          x.savepoints.resize(at + 1);
          CheckTx(i, "after " + what);
        }
        break;
      }
      case Op::kBlob: {  // made one of several ways, into a new row or an existing one
        const uint8_t a = in.Byte(), sz = in.Byte(), how = in.Byte(), seed = in.Byte(),
                      b = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        if (!defs_[t].exists) break;
        BlobOp(i, t, kBlobSizes[sz % std::size(kBlobSizes)], how, seed, b);
        break;
      }
      case Op::kCommit:
      case Op::kRollback: {
        const int i = in.Byte() & 1;
        if (!txs_[i].tx) break;
        if (op == Op::kCommit) Commit(i);
        else Rollback(i);
        break;
      }
      case Op::kReopen: Reopen(); break;
      case Op::kMaintenance: {  // none of them changes what anyone sees
        const uint8_t a = in.Byte() % 3;
        if (a == 0) MustOk(db_->CollectGarbage(), "CollectGarbage");
        if (a == 1) {
          MustOk(db_->Sweep().status(), "Sweep");
          // With no snapshot left, the sweep removed every version but the newest.
          if (!AnyActive()) {
            for (int t = 0; t < kTables; ++t) {
              long_keys_[t] = {};
              for (const auto& [rec, row] : committed_[t]) {
                for (int k = 0; k < 3; ++k) {
                  long_keys_[t][k] |= KeySize(KeyOf(row, k)) > max_key_;
                }
              }
            }
          }
        }
        if (a == 2) Validate("(op)");
        for (int i = 0; i < 2; ++i) {
          if (txs_[i].tx) CheckTx(i, "after maintenance");
        }
        break;
      }
      case Op::kBadRow: {  // InvalidArgument, nothing changed
        const uint8_t a = in.Byte(), kind = in.Byte() % 5;
        const int i = a & 1, t = (a >> 1) % kTables;
        if (!defs_[t].exists) break;
        Tx& x = Ensure(i);
        Row r{int64_t{1}, Value(), Value(), Value()};
        if (kind == 0) r[0] = Value();
        if (kind == 1) r[1] = std::string("x");
        if (kind == 2) r.pop_back();
        if (kind == 3) r[2] = int64_t{5};
        if (kind == 4) r[3] = std::string("blob");
        absl::StatusOr<RecordId> id = x.tx->Insert(tables_[t], r);
        Expect(id.status(), {absl::StatusCode::kInvalidArgument}, "Insert of a bad row");
        if (known_[t].size() && (a & 0x80)) {
          const uint64_t rec = *known_[t].begin();
          const absl::Status s = x.tx->Update(tables_[t], RecordId{rec}, r);
          // The row is checked before the record is looked at.
          Expect(s, {absl::StatusCode::kInvalidArgument}, "Update to a bad row");
        }
        break;
      }
      case Op::kCopiedKey: {  // unique violations and conflicts
        const uint8_t a = in.Byte(), b = in.Byte(), c = in.Byte();
        const int i = a & 1, t = (a >> 1) % kTables;
        if (!defs_[t].exists) break;
        std::vector<MRow> rows;
        for (const auto& [r, v] : committed_[t]) rows.push_back(v);
        for (const Tx& x : txs_) {
          for (const auto& [r, v] : x.pending[t]) {
            if (v) rows.push_back(*v);
          }
        }
        if (rows.empty()) break;
        MRow row = rows[b % rows.size()];
        row.b.reset();
        row.id = c;
        if (c & 1) {  // or move an existing record onto it
          Tx& x = Ensure(i);
          const MTable view = View(x, t);
          if (const std::optional<uint64_t> rec = Pick(i, t, view, c / 2, false)) {
            auto it = view.find(*rec);
            row.b = it->second.b;
            Update(i, t, *rec, row, row.b ? EngineBlob(i, t, *rec) : BlobId{},
                   "Update (copied key)");
            break;
          }
        }
        Insert(i, t, row, BlobId{}, "Insert (copied key)");
        break;
      }
    }
  }

  void BlobOp(int i, int t, size_t size, uint8_t how, uint8_t seed, uint8_t target) {
    Tx& x = Ensure(i);
    Transaction* tx = x.tx.get();
    std::string bytes = BlobBytes(seed, size);
    BlobId id{};
    const std::string what =
        "BLOB of " + std::to_string(size) + " bytes, way " + std::to_string(how % 5);
    switch (how % 5) {
      case 0:
      case 1: {  // a writer: one segment, or many
        absl::StatusOr<std::unique_ptr<BlobWriter>> w = tx->CreateBlob(tables_[t], "b");
        MustOk(w.status(), what + ": CreateBlob");
        const size_t piece = how % 5 == 0 ? std::max<size_t>(size, 1)
                                          : std::max<size_t>(size / 64 + 1, 1 + seed * 37u % 5000);
        for (size_t off = 0; off < size; off += piece) {
          MustOk((*w)->Write(std::string_view(bytes).substr(off, piece)), what + ": Write");
        }
        id = (*w)->id();
        break;
      }
      case 2: {  // Append from the empty BLOB
        const size_t piece = std::max<size_t>(size / 64 + 1, 1 + seed * 91u % 5000);
        for (size_t off = 0; off < size; off += piece) {
          MustOk(tx->Append(&id, std::string_view(bytes).substr(off, piece)), what + ": Append");
        }
        break;
      }
      case 3:
      case 4: {  // from a stored BLOB of a row this transaction sees (any table): concatenated
                 // with new bytes, or the stored id itself (copied)
        std::vector<std::pair<int, uint64_t>> with;
        for (int u = 0; u < kTables; ++u) {
          if (!defs_[u].exists) continue;
          for (const auto& [rec, row] : View(x, u)) {
            if (row.b) with.emplace_back(u, rec);
          }
        }
        if (with.empty()) return;
        const auto [u, rec] = with[seed % with.size()];
        const BlobId src = EngineBlob(i, u, rec);
        const std::string old = *View(x, u).at(rec).b;
        if (how % 5 == 3) {
          absl::StatusOr<BlobId> c = tx->Concat(src, bytes);
          MustOk(c.status(), what + ": Concat");
          id = *c;
          bytes = old + bytes;
        } else {
          id = src;
          bytes = old;
        }
        break;
      }
    }
    if (ReadBlob(tx, id, what + " (temporary)") != bytes) Fail(what + ": reads back other bytes");
    const MTable view = View(x, t);
    if (target & 1 && !view.empty()) {
      const uint64_t rec = *Pick(i, t, view, target / 2, false);
      MRow row = view.at(rec);
      row.b = bytes;
      Update(i, t, rec, row, id, "Update with " + what);
    } else {
      MRow row;
      row.id = target;
      row.k = IntOf(target / 2);
      row.s = Strings()[seed % Strings().size()];
      row.b = bytes;
      Insert(i, t, row, id, "Insert with " + what);
    }
  }

  void Commit(int i) {
    Tx& x = txs_[i];
    MustOk(x.tx->Commit(), "Commit");
    ++seq_;
    for (int t = 0; t < kTables; ++t) {
      for (const auto& [rec, row] : x.pending[t]) {
        if (row) committed_[t][rec] = *row;
        else committed_[t].erase(rec);
        commit_seq_[t][rec] = seq_;
      }
      for (int k = 0; k < 3; ++k) long_keys_[t][k] |= x.long_keys[t][k];
    }
    x.tx.reset();
    for (Pending& p : x.pending) p.clear();
    CheckCommitted("after commit");
    if (txs_[1 - i].tx) CheckTx(1 - i, "after the other's commit");
  }

  void Rollback(int i) {
    Tx& x = txs_[i];
    MustOk(x.tx->Rollback(), "Rollback");
    x.tx.reset();
    for (Pending& p : x.pending) p.clear();
    CheckCommitted("after rollback");
  }

  void Reopen() {
    MustOk(db_->Close(), "Close");  // ends the open transactions as rolled back
    for (Tx& x : txs_) {
      x.tx.reset();
      for (Pending& p : x.pending) p.clear();
    }
    db_.reset();
    db_ = fuzz::Must(Database::Open(path_, FuzzOptions()), "reopen");
    for (int t = 0; t < kTables; ++t) {
      absl::StatusOr<Table> tb = db_->GetTable(TableName(t));
      Expect(tb.status(), {defs_[t].exists ? absl::StatusCode::kOk : absl::StatusCode::kNotFound},
             "GetTable " + TableName(t) + " after reopen");
      if (tb.ok()) tables_[t] = *tb;
      for (const IndexDef& ix : defs_[t].indexes) {
        absl::StatusOr<Index> h = db_->GetIndex(ix.name);
        MustOk(h.status(), "GetIndex " + ix.name + " after reopen");
        if (h->schema().unique != ix.unique) Fail(ix.name + ": unique flag lost at reopen");
        indexes_[ix.name] = *h;
      }
    }
    CheckCommitted("after reopen");
    Validate("after reopen");
  }

  std::string path_;
  std::unique_ptr<Database> db_;
  uint32_t max_key_ = 0;
  int op_ = 0;
  std::array<Tx, 2> txs_;
  std::array<TableDef, kTables> defs_;
  std::array<Table, kTables> tables_;
  std::map<std::string, Index> indexes_;
  std::array<MTable, kTables> committed_;
  // Per table and index kind: a committed version with a key over max_key_size may still be
  // stored (an older value of a row, or a deleted row), so an index build may refuse it.
  std::array<std::array<bool, 3>, kTables> long_keys_{};
  std::array<std::map<uint64_t, uint64_t>, kTables> commit_seq_;  // last commit per record
  std::array<std::set<uint64_t>, kTables> known_;                 // every record number seen
  uint64_t seq_ = 0;                                              // commits so far
};

// ---------------------------------------------------------------- seeds

struct Prog {
  std::string bytes;
  // One step: the op's byte, then its argument bytes.
  Prog& Call(Op op, std::initializer_list<int> args = {}) {
    bytes += static_cast<char>(ByteOf(op));
    for (int x : args) bytes += static_cast<char>(x);
    return *this;
  }
  // a byte: transaction i, table t
  static int A(int i, int t) { return i | (t << 1); }
};

std::vector<std::string> Seeds() {
  std::vector<std::string> out;
  {  // tables, indexes, rows, reads, commit, reopen
    Prog p;
    p.Call(Op::kCreateTable, {0}).Call(Op::kCreateTable, {1}).Call(Op::kCreateIndex, {0, 0, 0});
    p.Call(Op::kCreateIndex, {0, 1, 1});
    for (int r = 0; r < 8; ++r) p.Call(Op::kInsert, {Prog::A(0, 0), r, r, r + 1});
    p.Call(Op::kInsert, {Prog::A(0, 1), 9, 8, 0});
    p.Call(Op::kGet, {Prog::A(0, 0), 3}).Call(Op::kScan, {Prog::A(0, 0)});
    p.Call(Op::kIndexRange, {Prog::A(0, 0), 0, 1 + 3 * 1, 2, 5});
    p.Call(Op::kLookup, {Prog::A(0, 0), 1, 4, 5});
    p.Call(Op::kCommit, {0}).Call(Op::kReopen).Call(Op::kScan, {Prog::A(1, 0)});
    p.Call(Op::kUpdate, {Prog::A(1, 0), 2, 50, 6, 7});
    p.Call(Op::kDelete, {Prog::A(1, 0), 4}).Call(Op::kRollback, {1});
    p.Call(Op::kUpdate, {Prog::A(0, 0), 1, 60, 3, 3}).Call(Op::kCommit, {0});
    out.push_back(p.bytes);
  }
  {  // unique index: duplicates refused, freed keys taken again; CreateIndex over duplicates
    Prog p;
    p.Call(Op::kCreateTable, {0}).Call(Op::kCreateIndex, {0, 0, 1});
    p.Call(Op::kCreateIndex, {0, 2, 1});
    p.Call(Op::kInsert, {Prog::A(0, 0), 1, 3, 2}).Call(Op::kInsert, {Prog::A(0, 0), 2, 3, 2});
    p.Call(Op::kCopiedKey, {Prog::A(0, 0), 0, 4});
    p.Call(Op::kDelete, {Prog::A(0, 0), 0}).Call(Op::kInsert, {Prog::A(0, 0), 3, 3, 2});
    p.Call(Op::kCommit, {0});
    p.Call(Op::kInsert, {Prog::A(0, 0), 4, 5, 1}).Call(Op::kInsert, {Prog::A(0, 0), 5, 5, 9});
    p.Call(Op::kCommit, {0});
    p.Call(Op::kCreateIndex, {0, 1, 1}).Call(Op::kInsert, {Prog::A(0, 0), 6, 6, 10});
    p.Call(Op::kCommit, {0}).Call(Op::kDropIndex, {0, 0}).Call(Op::kDropTable, {0});
    out.push_back(p.bytes);
  }
  {  // two writers: update conflicts, a key held by an uncommitted insert, snapshots
    Prog p;
    p.Call(Op::kCreateTable, {0}).Call(Op::kCreateIndex, {0, 0, 1});
    for (int r = 0; r < 4; ++r) p.Call(Op::kInsert, {Prog::A(0, 0), r, r, 2});
    p.Call(Op::kCommit, {0});
    p.Call(Op::kUpdate, {Prog::A(0, 0), 1, 9, 1, 3}).Call(Op::kScan, {Prog::A(1, 0)});
    p.Call(Op::kUpdate, {Prog::A(1, 0), 1, 9, 2, 3});
    p.Call(Op::kInsert, {Prog::A(1, 0), 7, 1, 2}).Call(Op::kCopiedKey, {Prog::A(1, 0), 0, 2});
    p.Call(Op::kCommit, {0}).Call(Op::kDelete, {Prog::A(1, 0), 1});
    p.Call(Op::kGet, {Prog::A(1, 0), 1}).Call(Op::kRollback, {1});
    p.Call(Op::kInsert, {Prog::A(0, 0), 8, 6, 3}).Call(Op::kInsert, {Prog::A(1, 0), 9, 6, 3});
    p.Call(Op::kCommit, {1}).Call(Op::kCommit, {0});
    out.push_back(p.bytes);
  }
  {  // savepoints: nested, reused names, released, rolled back to
    Prog p;
    p.Call(Op::kCreateTable, {0}).Call(Op::kCreateIndex, {0, 1, 0});
    p.Call(Op::kInsert, {Prog::A(0, 0), 1, 1, 1}).Call(Op::kSavepoint, {0});
    p.Call(Op::kInsert, {Prog::A(0, 0), 2, 2, 2}).Call(Op::kSavepoint, {2});
    p.Call(Op::kUpdate, {Prog::A(0, 0), 0, 3, 3, 3}).Call(Op::kSavepoint, {0});
    p.Call(Op::kDelete, {Prog::A(0, 0), 1}).Call(Op::kRollbackToSavepoint, {0});
    p.Call(Op::kReleaseSavepoint, {2}).Call(Op::kRollbackToSavepoint, {0});
    p.Call(Op::kRollbackToSavepoint, {4}).Call(Op::kSavepoint, {4});
    p.Call(Op::kInsert, {Prog::A(0, 0), 5, 5, 5}).Call(Op::kReleaseSavepoint, {4});
    p.Call(Op::kScan, {Prog::A(0, 0)}).Call(Op::kCommit, {0});
    out.push_back(p.bytes);
  }
  {  // BLOBs of each size, each way, in a plain and a compressed column; reopen
    Prog p;
    p.Call(Op::kCreateTable, {0}).Call(Op::kCreateTable, {1});
    for (int s = 0; s < 9; ++s) p.Call(Op::kBlob, {Prog::A(0, s % 2), s, s % 3, 2 * s, 2 * s});
    p.Call(Op::kBlob, {Prog::A(0, 0), 7, 3, 1, 1}).Call(Op::kBlob, {Prog::A(0, 1), 8, 4, 2, 0});
    p.Call(Op::kBlob, {Prog::A(0, 1), 6, 1, 3, 3});
    p.Call(Op::kCommit, {0}).Call(Op::kReopen).Call(Op::kUpdate, {Prog::A(0, 1), 0, 1, 1, 1});
    p.Call(Op::kDelete, {Prog::A(0, 0), 1});
    p.Call(Op::kMaintenance, {0}).Call(Op::kCommit, {0}).Call(Op::kMaintenance, {1});
    p.Call(Op::kMaintenance, {2}).Call(Op::kReopen);
    out.push_back(p.bytes);
  }
  {  // bad rows, long keys, reopen with a transaction open, gone records
    Prog p;
    p.Call(Op::kCreateTable, {2}).Call(Op::kCreateIndex, {2, 2, 0});
    p.Call(Op::kCreateIndex, {2, 1, 0});
    p.Call(Op::kBadRow, {Prog::A(0, 2), 0}).Call(Op::kBadRow, {Prog::A(0, 2), 3});
    p.Call(Op::kInsert, {Prog::A(0, 2), 1, 1, 9});
    p.Call(Op::kInsert, {Prog::A(0, 2), 1, 1, 10}).Call(Op::kInsert, {Prog::A(0, 2), 1, 8, 9});
    p.Call(Op::kInsert, {Prog::A(0, 2), 2, 2, 11});
    p.Call(Op::kDelete, {Prog::A(0, 2), 0}).Call(Op::kCommit, {0});
    p.Call(Op::kInsert, {Prog::A(1, 2), 3, 3, 3}).Call(Op::kReopen);
    p.Call(Op::kUpdate, {Prog::A(0, 2), 7, 1, 1, 1}).Call(Op::kGet, {Prog::A(0, 2), 0});
    p.Call(Op::kBadRow, {Prog::A(0, 2) | 0x80, 1});
    out.push_back(p.bytes);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::MaybeWriteSeeds(Seeds());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::ScratchDir() + "/api.edb";
  std::error_code ec;
  std::filesystem::remove(path, ec);
  {
    fuzz::Input in(data, size);
    Runner r(path);
    r.Run(in);
  }
  std::filesystem::remove(path, ec);
  return 0;
}
