// Helpers shared by the database-level tests (tests/db/*_test.cc): a temporary database file,
// row formatting for failure messages, file corruption helpers, and an ErrorLog in which worker
// threads collect their problems for the main thread to check (status_matchers.h's assertions
// belong on the main thread only).
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ember/ember.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ember::testing {

// Whether `s` has code `code` and its message contains `part`.
inline bool IsError(const absl::Status& s, absl::StatusCode code, std::string_view part = {}) {
  return s.code() == code && std::string(s.message()).find(part) != std::string::npos;
}

// Whether `msg` says "page P", not followed by another digit (damage reports name the page).
inline bool NamesPage(absl::string_view msg, uint32_t p) {
  const std::string needle = "page " + std::to_string(p);
  for (size_t at = msg.find(needle); at != absl::string_view::npos;
       at = msg.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if (end == msg.size() || msg[end] < '0' || msg[end] > '9') return true;
  }
  return false;
}

// DataLoss naming page `p` (a Status or the status of a StatusOr).
template <typename S>
bool LostAt(const S& s, uint32_t p) {
  const absl::Status st = StatusOf(s);
  return absl::IsDataLoss(st) && NamesPage(st.message(), p);
}

inline std::string ValueText(const Value& v) {
  if (IsNull(v)) return "NULL";
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", *d);
    return b;
  }
  if (auto* s = std::get_if<std::string>(&v)) {
    if (s->size() > 40) return "'" + s->substr(0, 20) + "...'(" + std::to_string(s->size()) + ")";
    return "'" + *s + "'";
  }
  return "blob:" + std::to_string(std::get<BlobId>(v).value);
}

inline std::string RowText(const Row& r) {
  std::string out = "(";
  for (size_t i = 0; i < r.size(); ++i) out += (i ? ", " : "") + ValueText(r[i]);
  return out + ")";
}

// Value equality where a double compares by bits (so NaN == NaN and -0.0 != +0.0).
inline bool SameValue(const Value& a, const Value& b) {
  if (a.index() != b.index()) return false;
  if (auto* d = std::get_if<double>(&a)) {
    const double e = std::get<double>(b);
    return std::memcmp(d, &e, sizeof e) == 0;
  }
  return a == b;
}

inline bool SameRow(const Row& a, const Row& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameValue(a[i], b[i])) return false;
  }
  return true;
}

// A database file in a fresh temporary directory, removed (with the directory) at the end.
class TempDb {
 public:
  TempDb() : path_(dir_.File("test.edb")) { REQUIRE(dir_.ok()); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return dir_.File(name); }

 private:
  TempDir dir_;
  std::string path_;
};

inline Options CreateOptions(uint32_t page_size = 8192, uint32_t cache_pages = 256) {
  Options o;
  o.create_if_missing = true;
  o.page_size = page_size;
  o.cache_pages = cache_pages;
  return o;
}

inline std::unique_ptr<Database> OpenOrFail(const std::string& path, const Options& o) {
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path, o);
  if (!db.ok()) FAIL("Open " << path << ": " << db.status().ToString());
  return std::move(*db);
}

// Validate finds no error and no unreachable page (`when` names the moment in the failure);
// returns the report for further checks.
inline ValidationReport RequireValid(Database* db, const std::string& when) {
  absl::StatusOr<ValidationReport> r = db->Validate();
  if (!r.ok()) FAIL(when << ": Validate: " << r.status().ToString());
  INFO(when << ": " << (r->errors.empty() ? std::string() : r->errors[0]));
  REQUIRE(r->errors.empty());
  REQUIRE(r->unreachable_pages.empty());
  return std::move(*r);
}

// Every row of a cursor, with its record id.
// A database with table t(id int64 NOT NULL, k int64, v string), a unique index t_id on id and
// a non-unique index t_k on k: the fixture of the transaction, savepoint and GC tests (each
// derives from it and adds its own helpers).
struct TableDb {
  TempDb tmp;
  Options opts;
  std::unique_ptr<Database> db;
  Table t;
  Index by_id;
  Index by_k;

  explicit TableDb(Options o = CreateOptions(4096, 128)) : opts(std::move(o)) { Open(true); }
  ~TableDb() {
    if (db) (void)db->Close();
  }
  TableDb(const TableDb&) = delete;
  TableDb& operator=(const TableDb&) = delete;

  void Open(bool create) {
    Options o = opts;
    o.create_if_missing = create;
    db = OpenOrFail(tmp.path(), o);
    if (create) {
      t = VALUE_OR_FAIL(db->CreateTable({"t",
                                         {{"id", ColumnType::kInt64, false},
                                          {"k", ColumnType::kInt64},
                                          {"v", ColumnType::kString}}}));
      by_id = VALUE_OR_FAIL(db->CreateIndex({"t_id", "t", {"id"}, true}));
      by_k = VALUE_OR_FAIL(db->CreateIndex({"t_k", "t", {"k"}, false}));
    } else {
      t = VALUE_OR_FAIL(db->GetTable("t"));
      by_id = VALUE_OR_FAIL(db->GetIndex("t_id"));
      by_k = VALUE_OR_FAIL(db->GetIndex("t_k"));
    }
  }
  void Reopen() {
    REQUIRE_OK(db->Close());
    db.reset();
    Open(false);
  }
};

inline absl::StatusOr<std::vector<std::pair<RecordId, Row>>> Drain(Cursor* c,
                                                                   size_t limit = SIZE_MAX) {
  std::vector<std::pair<RecordId, Row>> out;
  while (c->Valid()) {
    out.emplace_back(c->id(), c->row());
    if (out.size() > limit) return absl::InternalError("cursor returned too many rows");
    if (absl::Status s = c->Next(); !s.ok()) return s;
  }
  return out;
}

inline absl::StatusOr<std::vector<std::pair<RecordId, Row>>> ScanAll(Transaction* t,
                                                                     const Table& table) {
  absl::StatusOr<std::unique_ptr<Cursor>> c = t->Scan(table);
  if (!c.ok()) return c.status();
  return Drain(c->get());
}

inline absl::StatusOr<std::vector<std::pair<RecordId, Row>>> IndexRange(
    Transaction* t, const Index& ix, const Row& lo, const Row& hi, bool descending = false) {
  absl::StatusOr<std::unique_ptr<Cursor>> c = t->IndexScan(ix, lo, hi, descending);
  if (!c.ok()) return c.status();
  return Drain(c->get());
}

// Whole-file helpers for corruption tests.
inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteFileBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Problems seen by worker threads (Catch2 assertions are not thread-safe).
class ErrorLog {
 public:
  void Add(std::string e) {
    std::lock_guard<std::mutex> g(mu_);
    if (errors_.size() < 50) errors_.push_back(std::move(e));
    ++count_;
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> g(mu_);
    return errors_;
  }
  size_t count() {
    std::lock_guard<std::mutex> g(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> errors_;
  size_t count_ = 0;
};

// Fails the test (on the main thread) listing what the workers logged.
inline void RequireNoErrors(ErrorLog& log) {
  const size_t n = log.count();
  if (n == 0) return;
  std::ostringstream os;
  os << n << " error(s) in worker threads:";
  for (const std::string& e : log.Take()) os << "\n  " << e;
  FAIL(os.str());
}

}  // namespace ember::testing
