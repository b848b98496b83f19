// Quick start: create a database, a table with an index, insert, query through the index,
// update, commit, reopen and read back. Uses only the public API (include/ember/).
//   quickstart [path]   (default: ./quickstart.edb, removed first)
#include <cstdio>
#include <string>

#include "ember/ember.h"

#define CHECK_OK(expr)                                                             \
  do {                                                                             \
    absl::Status _s = (expr);                                                      \
    if (!_s.ok()) {                                                                \
      std::fprintf(stderr, "%s: %s\n", #expr, std::string(_s.ToString()).c_str()); \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "quickstart.edb";
  std::remove(path.c_str());

  ember::Options options;
  options.create_if_missing = true;
  {
    auto db = ember::Database::Open(path, options);
    CHECK_OK(db.status());
    auto people = (*db)->CreateTable({"people",
                                      {{"id", ember::ColumnType::kInt64, false},
                                       {"name", ember::ColumnType::kString},
                                       {"score", ember::ColumnType::kDouble}}});
    CHECK_OK(people.status());
    auto by_id = (*db)->CreateIndex({"people_pk", "people", {"id"}, /*unique=*/true});
    CHECK_OK(by_id.status());

    auto txn = (*db)->Begin();
    CHECK_OK(txn.status());
    for (int64_t i = 1; i <= 1000; ++i) {
      CHECK_OK((*txn)->Insert(*people, {i, "person " + std::to_string(i), i * 0.5}).status());
    }
    auto found = (*txn)->Lookup(*by_id, {int64_t{42}});
    CHECK_OK(found.status());
    if (!*found) return std::fprintf(stderr, "id 42 not found\n"), 1;
    std::printf("found: %s\n", std::get<std::string>((*found)->second[1]).c_str());
    ember::Row updated = (*found)->second;
    updated[1] = std::string("the answer");
    CHECK_OK((*txn)->Update(*people, (*found)->first, updated));
    CHECK_OK((*txn)->Commit());
    ember::Counters c = (*txn)->counters();
    std::printf("transaction: %llu fetches, %llu marks, %llu reads, %llu writes\n",
                (unsigned long long)c.fetches, (unsigned long long)c.marks,
                (unsigned long long)c.reads, (unsigned long long)c.writes);
    txn->reset();
    CHECK_OK((*db)->Close());
  }
  {
    options.create_if_missing = false;
    auto db = ember::Database::Open(path, options);
    CHECK_OK(db.status());
    auto by_id = (*db)->GetIndex("people_pk");
    CHECK_OK(by_id.status());
    auto txn = (*db)->Begin();
    CHECK_OK(txn.status());
    auto found = (*txn)->Lookup(*by_id, {int64_t{42}});
    CHECK_OK(found.status());
    if (!*found || std::get<std::string>((*found)->second[1]) != "the answer") {
      return std::fprintf(stderr, "after reopen: update lost\n"), 1;
    }
    int rows = 0;
    auto cur = (*txn)->IndexScan(*by_id, {int64_t{10}}, {int64_t{19}});
    CHECK_OK(cur.status());
    while ((*cur)->Valid()) {
      ++rows;
      CHECK_OK((*cur)->Next());
    }
    if (rows != 10) return std::fprintf(stderr, "range scan gave %d rows\n", rows), 1;
    auto report = (*db)->Validate();
    CHECK_OK(report.status());
    if (!report->ok()) return std::fprintf(stderr, "validate: %s\n", report->errors[0].c_str()), 1;
    std::printf(
        "after reopen: id 42 is '%s'; ids 10..19 give %d rows; validate clean (%llu pages)\n",
        std::get<std::string>((*found)->second[1]).c_str(), rows,
        (unsigned long long)report->pages_checked);
    CHECK_OK((*txn)->Commit());
    cur->reset();
    txn->reset();
    CHECK_OK((*db)->Close());
  }
  std::remove(path.c_str());
  return 0;
}
