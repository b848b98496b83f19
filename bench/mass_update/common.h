// What the series of bench/mass_update share (see main.cc for the binary's description): the
// table TST(ID, VAL) and its load, the reading check, the rows' registration and the results
// the summaries read.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/util/bench_util.h"
#include "bench/util/rows.h"
#include "ember/ember.h"

namespace mass_update {

namespace eb = ember::bench;
using eb::AddRow;
using eb::AnyRowRan;
using eb::Cell;
using eb::CounterOf;
using eb::ParseList;
using eb::Ratio;
using eb::ResultReporter;
using eb::Time;

// VAL of row `id` as loaded.
int64_t LoadedVal(int64_t id);

// One series of rows: a database holding the table TST, the series' transaction and how far
// the series got.
struct TestDb {
  std::string path;
  std::unique_ptr<ember::Database> db;
  ember::Table table;
  std::vector<ember::RecordId> ids;  // record of row i + 1, for the rows asked for at the load
  std::unique_ptr<ember::Transaction> tx;
  int step = -1;  // -1: nothing; 0: loaded; then as the series counts its phases
};
// Ends the transaction (rolled back if still active), closes the database and removes its
// files; step -1.
void DropDb(TestDb* d);

// A fresh database (page size `page_size`, cooperative GC) with TST(ID int64, VAL int64):
// primary key TST_PK on ID, with `index` also TST_VAL on VAL, and rows 1..rows (VAL
// LoadedVal(ID)) inserted and committed; then the series' transaction begins (without its undo
// log with `no_savepoint`); step 0. Keeps the records of the first `keep_ids` rows.
absl::Status LoadTable(int64_t page_size, int64_t rows, bool index, bool no_savepoint,
                       int64_t keep_ids, TestDb* d);

// Reads every row in a new transaction: the ids must be exactly 1..rows, each row's VAL
// expected(ID).
absl::Status CheckRows(ember::Database* db, const ember::Table& t, int64_t rows,
                       const std::function<int64_t(int64_t id)>& expected);
// Validates the whole database: pages, records, and index entries against their records. After
// an undo (a rollback with the undo log) the indexes must hold just the loaded keys (`rows`
// per index); otherwise the updates' keys stay until garbage collection, so only validity is
// checked.
absl::Status CheckIndexes(ember::Database* db, int64_t rows, bool index, bool undone);

// The series (statements.cc: the four mass-update statements; working_set.cc: rows updated
// in many small statements). SetUp* checks the series' flags, runs its untimed checks and
// registers its rows; false (after saying why) means the binary exits non-zero. Print*Summary
// prints the series' summary for what ran; Drop* removes the series' databases.
bool SetUpStatements(const std::vector<int64_t>& page_sizes,
                     const std::vector<int64_t>& no_savepoint);
void PrintStatementsSummary();
void DropStatements();
bool SetUpWorkingSet(const std::vector<int64_t>& page_sizes,
                     const std::vector<int64_t>& no_savepoint);
void PrintWorkingSetSummary();
void DropWorkingSet();

}  // namespace mass_update
