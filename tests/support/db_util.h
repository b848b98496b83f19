// Helpers for the tests that open databases through the public API: a temporary database file,
// options and opening, Validate, reading rows back (cursors, scans, index ranges), row
// formatting and comparison for failure messages, whole-file reads and writes for corruption
// tests, error checks, the table fixture of the transaction tests, and an ErrorLog for worker
// threads (Catch2 assertions belong on the main thread).
#pragma once
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ember/ember.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ember::testing {

// Whether `s` has code `code` and its message contains `part`.
bool IsError(const absl::Status& s, absl::StatusCode code, std::string_view part = {});

// Whether `msg` says "page P", not followed by another digit (damage reports name the page).
bool NamesPage(absl::string_view msg, uint32_t p);

// DataLoss naming page `p` (a Status or the status of a StatusOr).
template <typename S>
bool LostAt(const S& s, uint32_t p) {
  const absl::Status st = StatusOf(s);
  return absl::IsDataLoss(st) && NamesPage(st.message(), p);
}

// A value or a row as failure messages show it (long strings shortened).
std::string ValueText(const Value& v);
std::string RowText(const Row& r);

// Value equality where a double compares by bits (so NaN == NaN and -0.0 != +0.0).
bool SameValue(const Value& a, const Value& b);
bool SameRow(const Row& a, const Row& b);

// A database file in a fresh temporary directory, removed (with the directory) at the end.
class TempDb {
 public:
  TempDb();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return dir_.File(name); }

 private:
  TempDir dir_;
  std::string path_;
};

// Options that create the database, with the given page size and cache.
Options CreateOptions(uint32_t page_size = 8192, uint32_t cache_pages = 256);

std::unique_ptr<Database> OpenOrFail(const std::string& path, const Options& o);

// Validate finds no error and no unreachable page (`when` names the moment in the failure);
// returns the report for further checks.
ValidationReport RequireValid(Database* db, const std::string& when);

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

  explicit TableDb(Options o = CreateOptions(4096, 128));
  ~TableDb();
  TableDb(const TableDb&) = delete;
  TableDb& operator=(const TableDb&) = delete;

  // Opens the database (creating it and its table and indexes when `create`).
  void Open(bool create);
  // Closes and opens it again.
  void Reopen();
};

// Every row of a cursor, with its record id (an error past `limit` rows).
absl::StatusOr<std::vector<std::pair<RecordId, Row>>> Drain(Cursor* c, size_t limit = SIZE_MAX);

// Every row of `table` that `t` sees.
absl::StatusOr<std::vector<std::pair<RecordId, Row>>> ScanAll(Transaction* t, const Table& table);

// The rows of an index range scan of `ix` from `lo` to `hi`.
absl::StatusOr<std::vector<std::pair<RecordId, Row>>> IndexRange(Transaction* t, const Index& ix,
                                                                 const Row& lo, const Row& hi,
                                                                 bool descending = false);

// Whole-file helpers for corruption tests.
std::string ReadFileBytes(const std::string& path);
void WriteFileBytes(const std::string& path, std::string_view bytes);

// Problems seen by worker threads (Catch2 assertions are not thread-safe).
class ErrorLog {
 public:
  void Add(std::string e);
  std::vector<std::string> Take();
  size_t count();

 private:
  std::mutex mu_;
  std::vector<std::string> errors_;
  size_t count_ = 0;
};

// Fails the test (on the main thread) listing what the workers logged.
void RequireNoErrors(ErrorLog& log);

}  // namespace ember::testing
