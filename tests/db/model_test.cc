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
//   EMBER_MODEL_OPS=n    number of operations (default 5000)
//   EMBER_MODEL_SEED=s   replay a given seed (printed on failure)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "tests/db/db_test_util.h"

namespace ember {
namespace {

using testing::RowText;
using testing::SameRow;
using Model = std::map<uint64_t, Row>;  // record number -> row

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
    Value k = rng_() % 10 == 0 ? Value(std::monostate{}) : Value(static_cast<int64_t>(rng_() % 60) - 10);
    Value d = rng_() % 4 == 0 ? Value(std::monostate{})
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
    return rng_() % 10 == 0 ? Value(std::monostate{}) : Value(static_cast<int64_t>(rng_() % 64) - 12);
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
      case 0: row[1] = RandomKey(); break;                 // key only
      case 1: row[2] = RandomString(); break;              // body only
      case 2: row[3] = rng_() % 2 ? Value(std::monostate{}) : Value(1.0 / static_cast<double>(1 + rng_() % 100)); break;
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
    if (working_.count(target)) target = (working_.empty() ? 0 : working_.rbegin()->first) + 1 + rng_() % 3;
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
    ++commits_;
  }

  void Rollback() {
    if (!writer_) return;
    Note("rollback " + std::to_string(writer_->id()));
    REQUIRE_OK(writer_->Rollback());
    writer_.reset();
    working_ = committed_;
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
    db_.reset();
    Options o = testing::CreateOptions(4096, 64);
    o.create_if_missing = false;
    db_ = testing::OpenOrFail(path_, o);
    table_ = VALUE_OR_FAIL(db_->GetTable("m"));
    by_k_ = VALUE_OR_FAIL(db_->GetIndex("m_k"));
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
      Note("begin snapshot reader " + std::to_string(reader_->id()));
      return;
    }
    Note("snapshot reader check");
    switch (rng_() % 4) {
      case 0: {
        std::optional<uint64_t> rec = PickRecord(reader_model_, false);
        if (rec) CheckGet(reader_.get(), reader_model_, *rec, "snapshot reader");
        break;
      }
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
    switch (rng_() % 4) {
      case 0: {
        std::optional<uint64_t> rec = PickRecord(committed_, false);
        if (rec) CheckGet(rc_.get(), committed_, *rec, "read committed");
        break;
      }
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
    REQUIRE_OK(t->Commit());
  }

  std::mt19937_64 rng_;
  std::string path_;
  std::unique_ptr<Database> db_;
  Table table_;
  Index by_k_;
  std::unique_ptr<Transaction> writer_;
  std::unique_ptr<Transaction> reader_;  // snapshot
  std::unique_ptr<Transaction> rc_;      // read committed, read-only
  Model committed_;
  Model working_;       // the writer's view while it is active
  Model reader_model_;  // the snapshot reader's view
  std::set<uint64_t> seen_;
  uint64_t next_id_ = 1;
  std::deque<std::string> history_;
  size_t reopens_ = 0, commits_ = 0, max_rows_ = 0;
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
  }
}

}  // namespace
}  // namespace ember
