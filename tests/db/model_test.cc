// A model-based randomized test: a seeded RNG drives thousands of random operations (insert,
// update, delete, get, scan, index lookup and range, commit, rollback, reopen) against one table
// and an in-memory model of what each transaction must see, checking every read.
//
// Table m(id int64 NOT NULL, k int64 (indexed, non-unique, sometimes NULL), s string of 0..3000
// bytes (so some records fragment), d double nullable), page size 4096, a 64-page cache (so pages
// are evicted and re-read). Besides the writer there is a snapshot reader, begun at random points
// and checked against a copy of the committed state it began with, and a read-committed reader
// that must always see the latest committed state.
//
// Table x(id int64 NOT NULL, u int64 nullable with a unique index, b BLOB nullable) adds what
// the model of m lacks: inserts and updates that must fail with a unique violation exactly when
// another live row of the writer's view holds the key (NULL never conflicts), and succeed once
// the key is freed (deleted or changed); BLOBs made by a writer, Append or Concat, replaced and
// deleted, compared by content. The writer also makes, releases and rolls back to named
// savepoints (the model keeps a copy of both tables per savepoint, and an unknown name must be
// NotFound), and runs multi-call statements (RunStatement) that fail as a whole, on a unique
// violation or on purpose, or swallow a failed call; garbage collection runs at random between
// operations. Table x is checked against the model after every commit and rollback; both tables
// after every reopen, where Validate() must be clean.
//
//   EMBER_MODEL_OPS=n    number of operations (default 5000)
//   EMBER_MODEL_SEED=s   replay a given seed (printed on failure)
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::RowText;
using testing::SameRow;
using Model = std::map<uint64_t, Row>;  // record number -> row

// A row of table x as the model holds it: the BLOB by its contents.
struct XRow {
  int64_t id = 0;
  Value u;                       // NULL or int64
  std::optional<std::string> b;  // NULL or the BLOB's bytes
  friend bool operator==(const XRow&, const XRow&) = default;
};
using XModel = std::map<uint64_t, XRow>;  // record number -> row

std::string XRowText(const XRow& r) {
  return "(" + std::to_string(r.id) + ", " + testing::ValueText(r.u) + ", " +
         (r.b ? "blob of " + std::to_string(r.b->size()) + " bytes" : std::string("NULL")) + ")";
}

// Both tables' contents: what a transaction sees, and what a savepoint keeps.
struct State {
  Model m;
  XModel x;
};

uint64_t EnvOr(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  return std::strtoull(v, nullptr, 10);
}

// Index key order of column k: NULL first, then by value.
struct KeyOrder {
  bool operator()(const std::pair<Value, uint64_t>& a, const std::pair<Value, uint64_t>& b) const {
    const bool an = IsNull(a.first), bn = IsNull(b.first);
    if (an != bn) return an;
    if (!an) {
      const int64_t x = std::get<int64_t>(a.first), y = std::get<int64_t>(b.first);
      if (x != y) return x < y;
    }
    return a.second < b.second;
  }
};

class ModelRunner {
 public:
  ModelRunner(uint64_t seed, const std::string& path) : rng_(seed), path_(path) {}

  ~ModelRunner() {
    reader_.reset();
    rc_.reset();
    writer_.reset();
    if (db_) (void)db_->Close();
  }

  void Create() {
    Options o = testing::CreateOptions(4096, 64);
    db_ = testing::OpenOrFail(path_, o);
    table_ = VALUE_OR_FAIL(db_->CreateTable({"m",
                                             {{"id", ColumnType::kInt64, false},
                                              {"k", ColumnType::kInt64},
                                              {"s", ColumnType::kString},
                                              {"d", ColumnType::kDouble}}}));
    by_k_ = VALUE_OR_FAIL(db_->CreateIndex({"m_k", "m", {"k"}, false}));
    xtable_ = VALUE_OR_FAIL(db_->CreateTable({"x",
                                              {{"id", ColumnType::kInt64, false},
                                               {"u", ColumnType::kInt64},
                                               {"b", ColumnType::kBlob}}}));
    by_u_ = VALUE_OR_FAIL(db_->CreateIndex({"x_u", "x", {"u"}, true}));
  }

  // One random operation.
  void Step() {
    const int r = static_cast<int>(rng_() % 1000);
    if (r < 170) Insert();
    else if (r < 340) Update();
    else if (r < 420) Delete();
    else if (r < 540) GetOp();
    else if (r < 570) ScanOp();
    else if (r < 660) LookupOp();
    else if (r < 760) RangeOp();
    else if (r < 820) Commit();
    else if (r < 840) Rollback();
    else if (r < 845) Reopen();
    else if (r < 900) ReaderOp();
    else if (r < 940) ReadCommittedOp();
    else if (r < 960) UpdateMissing();
    else Update();
    // Table x, savepoints, statements and garbage collection, on top of the operations above.
    // (An x write checks its own outcome, a unique violation included; its status is for
    // statement bodies.)
    const int x = static_cast<int>(rng_() % 1000);
    if (x < 100) (void)XInsert();
    else if (x < 170) (void)XUpdate();
    else if (x < 210) (void)XDelete();
    else if (x < 240) XReuseKey();
    else if (x < 340) SavepointOp();
    else if (x < 380) StatementOp();
    else if (x < 395) GcOp();
    else if (x < 410 && writer_) CheckX(writer_.get(), xworking_, "writer");
  }

  void Finish() {
    if (writer_) Commit();
    reader_.reset();
    rc_.reset();
    CheckAll();
    Reopen();
  }

  std::string History() const {
    std::ostringstream os;
    for (const std::string& h : history_) os << "\n  " << h;
    return os.str();
  }
  size_t reopens() const { return reopens_; }
  size_t commits() const { return commits_; }
  size_t max_rows() const { return max_rows_; }
  // How often the new parts of the model were met: unique violations, savepoint rollbacks,
  // failed statements, BLOBs written, garbage collections.
  struct Met {
    size_t violations = 0, savepoint_rollbacks = 0, failed_statements = 0, blobs = 0, gcs = 0;
  };
  const Met& met() const { return met_; }

 private:
  void Note(std::string s) {
    history_.push_back(std::move(s));
    if (history_.size() > 25) history_.pop_front();
  }

  Transaction* Writer() {
    if (!writer_) {
      TransactionOptions o;
      o.isolation = rng_() % 2 ? Isolation::kSnapshot : Isolation::kReadCommitted;
      writer_ = VALUE_OR_FAIL(db_->Begin(o));
      working_ = committed_;
      xworking_ = xcommitted_;
      savepoints_.clear();
      Note("begin writer " + std::to_string(writer_->id()));
    }
    return writer_.get();
  }
  // The writer's view: its own model if active, else the committed state (through a fresh
  // transaction).
  Model& WriterModel() {
    Writer();
    return working_;
  }

  std::string RandomString() {
    size_t len;
    switch (rng_() % 4) {
      case 0: len = rng_() % 16; break;
      case 1: len = rng_() % 400; break;
      default: len = rng_() % 3001; break;
    }
    std::string s(len, '\0');
    const bool random_bytes = rng_() % 2;  // incompressible or text-like
    for (char& c : s) {
      c = random_bytes ? static_cast<char>(rng_()) : static_cast<char>('a' + rng_() % 6);
    }
    return s;
  }

  Row RandomRow() {
    Value k =
        rng_() % 10 == 0 ? Value(std::monostate{}) : Value(static_cast<int64_t>(rng_() % 60) - 10);
    Value d = rng_() % 4 == 0
                  ? Value(std::monostate{})
                  : Value(static_cast<double>(static_cast<int64_t>(rng_() % 20001) - 10000) / 8.0);
    return {static_cast<int64_t>(next_id_++), k, RandomString(), d};
  }

  // A record number to act on: usually a live one of `m`, sometimes any ever seen.
  std::optional<uint64_t> PickRecord(const Model& m, bool live_only) {
    if (!live_only && !seen_.empty() && rng_() % 5 == 0) {
      auto it = seen_.begin();
      std::advance(it, static_cast<long>(rng_() % seen_.size()));
      return *it;
    }
    if (m.empty()) return std::nullopt;
    auto it = m.begin();
    std::advance(it, static_cast<long>(rng_() % m.size()));
    return it->first;
  }

  Value RandomKey() {
    return rng_() % 10 == 0 ? Value(std::monostate{})
                            : Value(static_cast<int64_t>(rng_() % 64) - 12);
  }

  // ----------------------------------------------------------------- writes

  void Insert() {
    Transaction* w = Writer();
    Row row = RandomRow();
    Note("insert " + RowText(row));
    RecordId id = VALUE_OR_FAIL(w->Insert(table_, row));
    INFO("insert returned record " << id.value);
    REQUIRE(working_.count(id.value) == 0);
    working_[id.value] = row;
    seen_.insert(id.value);
    max_rows_ = std::max(max_rows_, working_.size());
  }

  void Update() {
    Transaction* w = Writer();
    std::optional<uint64_t> rec = PickRecord(working_, /*live_only=*/true);
    if (!rec) return Insert();
    Row row = working_[*rec];
    switch (rng_() % 4) {
      case 0: row[1] = RandomKey(); break;     // key only
      case 1: row[2] = RandomString(); break;  // body only
      case 2:
        row[3] = rng_() % 2 ? Value(std::monostate{})
                            : Value(1.0 / static_cast<double>(1 + rng_() % 100));
        break;
      default: {
        Row fresh = RandomRow();
        fresh[0] = row[0];
        row = fresh;
      }
    }
    Note("update " + std::to_string(*rec) + " -> " + RowText(row));
    REQUIRE_OK(w->Update(table_, RecordId{*rec}, row));
    working_[*rec] = row;
  }

  void UpdateMissing() {
    // A record number that the writer does not see: update and delete are NotFound.
    Transaction* w = Writer();
    std::optional<uint64_t> rec = PickRecord(working_, /*live_only=*/false);
    uint64_t target = rec.value_or(0);
    if (working_.count(target))
      target = (working_.empty() ? 0 : working_.rbegin()->first) + 1 + rng_() % 3;
    if (working_.count(target)) return;
    Note("update/delete missing " + std::to_string(target));
    REQUIRE(absl::IsNotFound(w->Update(table_, RecordId{target}, RandomRow())));
    REQUIRE(absl::IsNotFound(w->Delete(table_, RecordId{target})));
  }

  void Delete() {
    Transaction* w = Writer();
    std::optional<uint64_t> rec = PickRecord(working_, /*live_only=*/true);
    if (!rec) return;
    Note("delete " + std::to_string(*rec));
    REQUIRE_OK(w->Delete(table_, RecordId{*rec}));
    working_.erase(*rec);
  }

  void Commit() {
    if (!writer_) return;
    Note("commit " + std::to_string(writer_->id()));
    REQUIRE_OK(writer_->Commit());
    writer_.reset();
    committed_ = working_;
    xcommitted_ = xworking_;
    savepoints_.clear();
    ++commits_;
    CheckCommittedX("after commit");
  }

  void Rollback() {
    if (!writer_) return;
    Note("rollback " + std::to_string(writer_->id()));
    REQUIRE_OK(writer_->Rollback());
    writer_.reset();
    working_ = committed_;
    xworking_ = xcommitted_;
    savepoints_.clear();
    CheckCommittedX("after rollback");
  }

  void Reopen() {
    switch (rng_() % 3) {
      case 0: Commit(); break;
      case 1: Rollback(); break;
      default: break;  // left active: Close must not make its changes visible
    }
    Note(std::string("reopen") + (writer_ ? " (writer active)" : ""));
    REQUIRE_OK(db_->Close());
    writer_.reset();
    reader_.reset();
    rc_.reset();
    working_ = committed_;
    xworking_ = xcommitted_;
    savepoints_.clear();
    db_.reset();
    Options o = testing::CreateOptions(4096, 64);
    o.create_if_missing = false;
    db_ = testing::OpenOrFail(path_, o);
    table_ = VALUE_OR_FAIL(db_->GetTable("m"));
    by_k_ = VALUE_OR_FAIL(db_->GetIndex("m_k"));
    xtable_ = VALUE_OR_FAIL(db_->GetTable("x"));
    by_u_ = VALUE_OR_FAIL(db_->GetIndex("x_u"));
    ++reopens_;
    ValidateOptions vo;
    vo.free_unreachable = rng_() % 2;
    ValidationReport rep = VALUE_OR_FAIL(db_->Validate(vo));
    INFO("validate after reopen: " << rep.errors.size() << " errors; first: "
                                   << (rep.errors.empty() ? std::string() : rep.errors[0]));
    REQUIRE(rep.ok());
    CheckAll();
  }

  // ----------------------------------------------------------------- reads

  void CheckGet(Transaction* t, const Model& m, uint64_t rec, const char* who) {
    std::optional<Row> got = VALUE_OR_FAIL(t->Get(table_, RecordId{rec}));
    auto it = m.find(rec);
    INFO(who << " get " << rec << ": got " << (got ? RowText(*got) : "nothing") << ", expected "
             << (it != m.end() ? RowText(it->second) : "nothing"));
    REQUIRE(got.has_value() == (it != m.end()));
    if (got) REQUIRE(SameRow(*got, it->second));
  }

  void CheckScan(Transaction* t, const Model& m, const char* who) {
    auto rows = VALUE_OR_FAIL(testing::ScanAll(t, table_));
    INFO(who << " scan: " << rows.size() << " rows, expected " << m.size());
    auto it = m.begin();
    for (const auto& [id, row] : rows) {
      REQUIRE(it != m.end());
      INFO("scan row " << id.value << " " << RowText(row) << ", expected " << it->first << " "
                       << RowText(it->second));
      REQUIRE(id.value == it->first);
      REQUIRE(SameRow(row, it->second));
      ++it;
    }
    REQUIRE(it == m.end());
  }

  void CheckLookup(Transaction* t, const Model& m, const Value& k, const char* who) {
    auto got = VALUE_OR_FAIL(t->Lookup(by_k_, {k}));
    // The first entry in key order: the smallest record number with that key.
    std::optional<uint64_t> expect;
    for (const auto& [rec, row] : m) {
      if (SameValueKey(row[1], k)) {
        expect = rec;
        break;
      }
    }
    INFO(who << " lookup k=" << testing::ValueText(k) << ": got "
             << (got ? std::to_string(got->first.value) : "nothing") << ", expected "
             << (expect ? std::to_string(*expect) : "nothing"));
    REQUIRE(got.has_value() == expect.has_value());
    if (got) {
      REQUIRE(got->first.value == *expect);
      REQUIRE(SameRow(got->second, m.at(*expect)));
    }
  }

  static bool SameValueKey(const Value& a, const Value& b) {
    return IsNull(a) ? IsNull(b) : (!IsNull(b) && std::get<int64_t>(a) == std::get<int64_t>(b));
  }

  void CheckRange(Transaction* t, const Model& m, const char* who) {
    // Bounds: none, NULL or a number, each side.
    auto bound = [&]() -> Row {
      switch (rng_() % 4) {
        case 0: return {};
        case 1: return {Value(std::monostate{})};
        default: return {Value(static_cast<int64_t>(rng_() % 70) - 15)};
      }
    };
    Row lo = bound(), hi = bound();
    const bool desc = rng_() % 2;
    using Entry = std::pair<Value, uint64_t>;
    KeyOrder less;
    std::vector<Entry> expect;
    for (const auto& [rec, row] : m) {
      const Entry e{row[1], rec};
      if (!lo.empty() && less(e, Entry{lo[0], 0})) continue;
      if (!hi.empty() && less(Entry{hi[0], UINT64_MAX}, e)) continue;
      expect.push_back(e);
    }
    std::sort(expect.begin(), expect.end(), less);
    if (desc) std::reverse(expect.begin(), expect.end());
    auto got = VALUE_OR_FAIL(testing::IndexRange(t, by_k_, lo, hi, desc));
    std::ostringstream gs, es;
    for (const auto& [id, row] : got) gs << id.value << " ";
    for (const auto& [k, rec] : expect) es << rec << " ";
    INFO(who << " range [" << (lo.empty() ? "-" : testing::ValueText(lo[0])) << ", "
             << (hi.empty() ? "-" : testing::ValueText(hi[0])) << "]" << (desc ? " desc" : "")
             << ": got " << gs.str() << "expected " << es.str());
    REQUIRE(got.size() == expect.size());
    for (size_t i = 0; i < got.size(); ++i) {
      REQUIRE(got[i].first.value == expect[i].second);
      REQUIRE(SameRow(got[i].second, m.at(expect[i].second)));
    }
  }

  void GetOp() {
    Transaction* w = Writer();
    std::optional<uint64_t> rec = PickRecord(working_, /*live_only=*/false);
    if (!rec) return;
    CheckGet(w, working_, *rec, "writer");
  }
  void ScanOp() { CheckScan(Writer(), working_, "writer"); }
  void LookupOp() { CheckLookup(Writer(), working_, RandomKey(), "writer"); }
  void RangeOp() { CheckRange(Writer(), working_, "writer"); }

  void ReaderOp() {
    if (!reader_ || rng_() % 8 == 0) {
      if (reader_) REQUIRE_OK(reader_->Commit());
      reader_ = VALUE_OR_FAIL(db_->Begin());
      reader_model_ = committed_;
      xreader_model_ = xcommitted_;
      Note("begin snapshot reader " + std::to_string(reader_->id()));
      return;
    }
    Note("snapshot reader check");
    switch (rng_() % 5) {
      case 0: {
        std::optional<uint64_t> rec = PickRecord(reader_model_, false);
        if (rec) CheckGet(reader_.get(), reader_model_, *rec, "snapshot reader");
        break;
      }
      case 4: CheckX(reader_.get(), xreader_model_, "snapshot reader"); break;
      case 1: CheckScan(reader_.get(), reader_model_, "snapshot reader"); break;
      case 2: CheckLookup(reader_.get(), reader_model_, RandomKey(), "snapshot reader"); break;
      default: CheckRange(reader_.get(), reader_model_, "snapshot reader"); break;
    }
  }

  void ReadCommittedOp() {
    if (!rc_) {
      TransactionOptions o;
      o.isolation = Isolation::kReadCommitted;
      o.read_only = true;
      rc_ = VALUE_OR_FAIL(db_->Begin(o));
    }
    Note("read committed check");
    switch (rng_() % 5) {
      case 0: {
        std::optional<uint64_t> rec = PickRecord(committed_, false);
        if (rec) CheckGet(rc_.get(), committed_, *rec, "read committed");
        break;
      }
      case 4: CheckX(rc_.get(), xcommitted_, "read committed"); break;
      case 1: CheckScan(rc_.get(), committed_, "read committed"); break;
      case 2: CheckLookup(rc_.get(), committed_, RandomKey(), "read committed"); break;
      default: CheckRange(rc_.get(), committed_, "read committed"); break;
    }
  }

  void CheckAll() {
    auto t = VALUE_OR_FAIL(db_->Begin());
    CheckScan(t.get(), committed_, "check-all");
    for (const auto& [rec, row] : committed_) CheckGet(t.get(), committed_, rec, "check-all");
    for (uint64_t rec : seen_) CheckGet(t.get(), committed_, rec, "check-all");
    CheckLookup(t.get(), committed_, Value(std::monostate{}), "check-all");
    for (int i = 0; i < 4; ++i) CheckRange(t.get(), committed_, "check-all");
    CheckX(t.get(), xcommitted_, "check-all");
    REQUIRE_OK(t->Commit());
  }

  // ----------------------------------------------------------------- table x

  Value RandomUnique() {
    return rng_() % 8 == 0 ? Value(std::monostate{}) : Value(static_cast<int64_t>(rng_() % 48));
  }

  // Whether a live row of `x` other than `except` holds key `u` (NULL never does).
  static bool KeyTaken(const XModel& x, const Value& u, uint64_t except) {
    if (IsNull(u)) return false;
    for (const auto& [rec, row] : x) {
      if (rec != except && !IsNull(row.u) && std::get<int64_t>(row.u) == std::get<int64_t>(u)) {
        return true;
      }
    }
    return false;
  }

  std::string RandomBlobBytes() {
    size_t len;
    switch (rng_() % 5) {
      case 0: len = 0; break;
      case 1: len = 1 + rng_() % 200; break;
      case 2: len = 900 + rng_() % 200; break;  // around a quarter page: inline or not
      default: len = rng_() % 14000; break;     // up to several 4096-byte pages
    }
    std::string b(len, '\0');
    for (char& c : b) c = static_cast<char>('A' + rng_() % 23);
    return b;
  }

  // A temporary BLOB of `w` holding `bytes`, made one of three ways.
  BlobId MakeBlob(Transaction* w, const std::string& bytes) {
    switch (rng_() % 3) {
      case 0: {  // a writer, in random segments
        auto bw = VALUE_OR_FAIL(w->CreateBlob());
        for (size_t off = 0; off < bytes.size();) {
          const size_t n = std::min(bytes.size() - off, size_t{1} + rng_() % 5000);
          REQUIRE_OK(bw->Write(std::string_view(bytes).substr(off, n)));
          off += n;
        }
        return bw->id();
      }
      case 1: {  // Append in pieces
        BlobId id{};
        for (size_t off = 0; off < bytes.size();) {
          const size_t n = std::min(bytes.size() - off, size_t{1} + rng_() % 7000);
          REQUIRE_OK(w->Append(&id, std::string_view(bytes).substr(off, n)));
          off += n;
        }
        return id;
      }
      default: {  // Concat of a BLOB holding the first part and the rest
        const size_t half = bytes.empty() ? 0 : rng_() % bytes.size();
        BlobId head{};
        if (half > 0) REQUIRE_OK(w->Append(&head, std::string_view(bytes).substr(0, half)));
        return VALUE_OR_FAIL(w->Concat(head, std::string_view(bytes).substr(half)));
      }
    }
  }

  // The row of x `row` as the model holds it (BLOB bytes read through `t`).
  XRow ToModel(Transaction* t, const Row& row) {
    REQUIRE(row.size() == 3);
    XRow out{std::get<int64_t>(row[0]), row[1], std::nullopt};
    if (!IsNull(row[2])) {
      const BlobId id = std::get<BlobId>(row[2]);
      std::string bytes;
      auto reader = VALUE_OR_FAIL(t->OpenBlob(id));
      char buf[1500];
      for (size_t n; (n = VALUE_OR_FAIL(reader->Read(buf, sizeof buf))) > 0;) bytes.append(buf, n);
      REQUIRE(bytes.size() == reader->size());
      out.b = std::move(bytes);
    }
    return out;
  }

  // The row to write for model row `r`: its BLOB made anew unless `keep` holds the stored one.
  Row ToRow(Transaction* w, const XRow& r, const std::optional<BlobId>& keep = std::nullopt) {
    Value b = std::monostate{};
    if (keep) b = *keep;
    else if (r.b) b = MakeBlob(w, *r.b);
    return Row{r.id, r.u, b};
  }

  // Runs an insert of x (or an update of `rec`) whose expected outcome is a unique violation
  // exactly when the key is taken in the writer's view; applies it to the model when it
  // succeeds. Returns the call's status, so a statement body can pass a violation on.
  absl::Status XWrite(std::optional<uint64_t> rec, const XRow& row,
                      const std::optional<BlobId>& keep = std::nullopt) {
    Transaction* w = Writer();
    const bool dup = KeyTaken(xworking_, row.u, rec.value_or(UINT64_MAX));
    Note(std::string(rec ? "x update " + std::to_string(*rec) : "x insert") + " " + XRowText(row) +
         (dup ? " (duplicate key)" : ""));
    const Row r = ToRow(w, row, keep);
    absl::Status s;
    uint64_t id = rec.value_or(0);
    if (rec) {
      s = w->Update(xtable_, RecordId{*rec}, r);
    } else {
      absl::StatusOr<RecordId> ins = w->Insert(xtable_, r);
      s = ins.status();
      if (ins.ok()) id = ins->value;
    }
    INFO("x write " << XRowText(row) << ": " << s.ToString());
    met_.blobs += row.b && !keep ? 1 : 0;
    if (dup) {
      ++met_.violations;
      REQUIRE(testing::IsError(s, absl::StatusCode::kAlreadyExists, "unique index"));
    } else {
      REQUIRE(s.ok());
      REQUIRE((rec.has_value() || xworking_.count(id) == 0));
      xworking_[id] = row;
    }
    return s;
  }

  absl::Status XInsert() {
    Writer();
    XRow row{static_cast<int64_t>(next_id_++), RandomUnique(), std::nullopt};
    if (rng_() % 4 != 0) row.b = RandomBlobBytes();
    return XWrite(std::nullopt, row);
  }

  absl::Status XUpdate() {
    Writer();
    std::optional<uint64_t> rec = PickX();
    if (!rec) return XInsert();
    XRow row = xworking_.at(*rec);
    std::optional<BlobId> keep;
    switch (rng_() % 4) {
      case 0: {  // the key only, the stored BLOB passed on as it is
        row.u = RandomUnique();
        auto cur = VALUE_OR_FAIL(writer_->Get(xtable_, RecordId{*rec}));
        REQUIRE(cur.has_value());
        if (!IsNull((*cur)[2])) keep = std::get<BlobId>((*cur)[2]);
        break;
      }
      case 1: row.b = RandomBlobBytes(); break;  // replace the BLOB
      case 2: row.b.reset(); break;              // drop it
      default: row.u = RandomUnique(); row.b = RandomBlobBytes();
    }
    return XWrite(rec, row, keep);
  }

  absl::Status XDelete() {
    Transaction* w = Writer();
    std::optional<uint64_t> rec = PickX();
    if (!rec) return absl::OkStatus();
    Note("x delete " + std::to_string(*rec));
    REQUIRE_OK(w->Delete(xtable_, RecordId{*rec}));
    xworking_.erase(*rec);
    return absl::OkStatus();
  }

  // A key that is taken cannot be inserted again; once its row is deleted it can, in the same
  // transaction.
  void XReuseKey() {
    Writer();
    std::optional<uint64_t> rec;
    for (const auto& [r, row] : xworking_) {
      if (!IsNull(row.u) && (!rec || rng_() % 3 == 0)) rec = r;
    }
    if (!rec) return;
    const Value u = xworking_.at(*rec).u;
    XRow fresh{static_cast<int64_t>(next_id_++), u, std::nullopt};
    REQUIRE_FALSE(XWrite(std::nullopt, fresh).ok());  // the key is taken
    REQUIRE_OK(writer_->Delete(xtable_, RecordId{*rec}));
    xworking_.erase(*rec);
    Note("x key " + testing::ValueText(u) + " freed by deleting " + std::to_string(*rec));
    REQUIRE_OK(XWrite(std::nullopt, fresh));
  }

  std::optional<uint64_t> PickX() {
    if (xworking_.empty()) return std::nullopt;
    auto it = xworking_.begin();
    std::advance(it, static_cast<long>(rng_() % xworking_.size()));
    return it->first;
  }

  // ----------------------------------------------------------------- savepoints and statements

  void SavepointOp() {
    Transaction* w = Writer();
    const int r = static_cast<int>(rng_() % 10);
    std::string name(1, static_cast<char>('a' + rng_() % 4));
    if (r >= 4 && !savepoints_.empty() && rng_() % 4 != 0) {
      // Mostly a known one; "" (a savepoint that lost its name) is no name: NotFound.
      name = savepoints_[rng_() % savepoints_.size()].first;
    }
    auto named = std::find_if(savepoints_.rbegin(), savepoints_.rend(), [&](const auto& sp) {
      return !sp.first.empty() && sp.first == name;
    });
    if (r < 4) {
      Note("savepoint " + name);
      REQUIRE_OK(w->Savepoint(name));
      if (named != savepoints_.rend()) named->first.clear();  // the older one loses its name
      savepoints_.push_back({name, State{working_, xworking_}});
      return;
    }
    const bool rollback = r < 7;
    Note(std::string(rollback ? "rollback to savepoint " : "release savepoint ") + name);
    const absl::Status s = rollback ? w->RollbackToSavepoint(name) : w->ReleaseSavepoint(name);
    INFO(s.ToString());
    if (named == savepoints_.rend()) {
      REQUIRE(absl::IsNotFound(s));
      return;
    }
    REQUIRE(s.ok());
    auto it = std::prev(named.base());  // the savepoint, as a forward iterator
    if (rollback) {
      ++met_.savepoint_rollbacks;
      working_ = it->second.m;
      xworking_ = it->second.x;
      savepoints_.erase(std::next(it), savepoints_.end());  // it stays, later ones go
    } else {
      savepoints_.erase(it, savepoints_.end());
    }
    CheckX(w, xworking_, "writer after savepoint");
  }

  // A statement of a few calls. It fails as a whole when a unique violation inside is passed on
  // or when it fails on purpose at its end: nothing of it stays. A violation it swallows undoes
  // only the failed call.
  void StatementOp() {
    Transaction* w = Writer();
    const State before{working_, xworking_};
    const bool fail_at_end = rng_() % 4 == 0;
    const bool pass_on = rng_() % 2 == 0;
    const int calls = 1 + static_cast<int>(rng_() % 4);
    Note("statement of " + std::to_string(calls) + " calls" + (fail_at_end ? ", failing" : "") +
         (pass_on ? ", passing violations on" : ""));
    bool failed = false;
    const absl::Status s = w->RunStatement([&]() -> absl::Status {
      for (int i = 0; i < calls; ++i) {
        absl::Status c;
        switch (rng_() % 5) {
          case 0: c = XInsert(); break;
          case 1: c = XUpdate(); break;
          case 2: c = XDelete(); break;
          case 3: Insert(); break;
          default: Update(); break;
        }
        if (!c.ok() && pass_on) {
          failed = true;
          return c;
        }
      }
      if (fail_at_end) {
        failed = true;
        return absl::AbortedError("model: the statement fails on purpose");
      }
      return absl::OkStatus();
    });
    INFO("statement: " << s.ToString());
    REQUIRE(s.ok() == !failed);
    if (failed) {
      ++met_.failed_statements;
      working_ = before.m;
      xworking_ = before.x;
    }
    CheckX(w, xworking_, "writer after statement");
  }

  void GcOp() {
    Note("collect garbage");
    ++met_.gcs;
    REQUIRE_OK(db_->CollectGarbage());
  }

  // ----------------------------------------------------------------- reading table x

  // The table scan, the unique index's full scan (NULL first, then by key) and a lookup of every
  // key in the model's key range against `x`.
  void CheckX(Transaction* t, const XModel& x, const char* who) {
    // The test's own INFO shows the history as it was when the operation began.
    INFO("history up to this check:" << History());
    auto rows = VALUE_OR_FAIL(testing::ScanAll(t, xtable_));
    INFO(who << " x scan: " << rows.size() << " rows, expected " << x.size());
    REQUIRE(rows.size() == x.size());
    auto it = x.begin();
    for (const auto& [id, row] : rows) {
      const XRow got = ToModel(t, row);
      INFO("x row " << id.value << " " << XRowText(got) << ", expected " << it->first << " "
                    << XRowText(it->second));
      REQUIRE(id.value == it->first);
      REQUIRE(got == it->second);
      ++it;
    }
    using Entry = std::pair<Value, uint64_t>;
    std::vector<Entry> expect;
    for (const auto& [rec, row] : x) expect.emplace_back(row.u, rec);
    std::sort(expect.begin(), expect.end(), KeyOrder{});
    auto entries = VALUE_OR_FAIL(testing::IndexRange(t, by_u_, {}, {}, false));
    REQUIRE(entries.size() == expect.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      INFO(who << " x_u entry " << i << ": record " << entries[i].first.value << ", expected "
               << expect[i].second);
      REQUIRE(entries[i].first.value == expect[i].second);
    }
    for (int64_t u = 0; u < 48; ++u) {
      auto hit = VALUE_OR_FAIL(t->Lookup(by_u_, {Value(u)}));
      std::optional<uint64_t> want;
      for (const auto& [rec, row] : x) {
        if (!IsNull(row.u) && std::get<int64_t>(row.u) == u) want = rec;
      }
      INFO(who << " x_u lookup " << u << ": got "
               << (hit ? std::to_string(hit->first.value) : "nothing") << ", expected "
               << (want ? std::to_string(*want) : "nothing"));
      REQUIRE(hit.has_value() == want.has_value());
      if (hit) REQUIRE(hit->first.value == *want);
    }
  }

  void CheckCommittedX(const char* when) {
    auto t = VALUE_OR_FAIL(db_->Begin());
    CheckX(t.get(), xcommitted_, when);
    REQUIRE_OK(t->Commit());
  }

  std::mt19937_64 rng_;
  std::string path_;
  std::unique_ptr<Database> db_;
  Table table_;
  Index by_k_;
  Table xtable_;
  Index by_u_;
  std::unique_ptr<Transaction> writer_;
  std::unique_ptr<Transaction> reader_;  // snapshot
  std::unique_ptr<Transaction> rc_;      // read committed, read-only
  Model committed_;
  Model working_;                                 // the writer's view while it is active
  Model reader_model_;                            // the snapshot reader's view
  XModel xcommitted_, xworking_, xreader_model_;  // the same for table x
  // The writer's savepoints, oldest first: name ("" once a newer one took it) and the state at
  // its creation.
  std::vector<std::pair<std::string, State>> savepoints_;
  std::set<uint64_t> seen_;
  uint64_t next_id_ = 1;
  std::deque<std::string> history_;
  size_t reopens_ = 0, commits_ = 0, max_rows_ = 0;
  Met met_;
};

TEST_CASE("randomized operations match an in-memory model", "[model]") {
  const uint64_t seed = EnvOr("EMBER_MODEL_SEED", std::random_device{}());
  const uint64_t ops = EnvOr("EMBER_MODEL_OPS", 5000);
  INFO("seed " << seed << " (replay with EMBER_MODEL_SEED=" << seed << ")");
  testing::TempDb tmp;
  ModelRunner runner(seed, tmp.path());
  runner.Create();
  for (uint64_t i = 0; i < ops; ++i) {
    INFO("operation " << i << "; recent:" << runner.History());
    runner.Step();
  }
  {
    INFO("final checks; recent:" << runner.History());
    runner.Finish();
  }
  // The run did real work (a run that never commits or reopens checks little).
  if (ops >= 2000) {
    CHECK(runner.commits() > 10);
    CHECK(runner.reopens() > 1);
    CHECK(runner.max_rows() > 50);
    CHECK(runner.met().violations > 10);
    CHECK(runner.met().savepoint_rollbacks > 5);
    CHECK(runner.met().failed_statements > 10);
    CHECK(runner.met().blobs > 100);
    CHECK(runner.met().gcs > 10);
  }
}

}  // namespace
}  // namespace ember
