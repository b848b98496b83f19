// Maintenance: load a table, index it with the parallel bulk build, leave garbage behind and
// sweep it, deactivate and rebuild an index, drop an index and a table. Uses only the public
// API (include/ember/).
//   maintenance [path]   (default: ./maintenance.edb, removed first)
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
  const std::string path = argc > 1 ? argv[1] : "maintenance.edb";
  std::remove(path.c_str());

  ember::Options options;
  options.create_if_missing = true;
  options.max_parallel_workers = 2;  // threads an index build or a sweep may use
  options.parallel_workers = 2;      // what they use by default
  auto db = ember::Database::Open(path, options);
  CHECK_OK(db.status());
  auto words = (*db)->CreateTable(
      {"words", {{"id", ember::ColumnType::kInt64, false}, {"word", ember::ColumnType::kString}}});
  CHECK_OK(words.status());

  // Load first, index afterwards: the index is built in bulk (scan, sort, merge, bottom-up).
  std::vector<ember::RecordId> ids;
  {
    auto txn = (*db)->Begin();
    CHECK_OK(txn.status());
    for (int64_t i = 0; i < 20000; ++i) {
      auto id = (*txn)->Insert(*words, {i, "w" + std::to_string(i * 7919 % 20011)});
      CHECK_OK(id.status());
      ids.push_back(*id);
    }
    CHECK_OK((*txn)->Commit());
  }
  auto by_word = (*db)->CreateIndex({"words_word", "words", {"word"}, /*unique=*/false});
  CHECK_OK(by_word.status());
  auto stats = (*db)->GetIndexStats(*by_word);
  CHECK_OK(stats.status());
  std::printf("index built: %llu entries, %llu distinct keys, %d workers\n",
              (unsigned long long)stats->entries, (unsigned long long)stats->distinct_keys,
              stats->workers);

  // A transaction without an undo log that rolls back leaves its versions behind as garbage.
  {
    ember::TransactionOptions to;
    to.no_savepoint = true;
    auto txn = (*db)->Begin(to);
    CHECK_OK(txn.status());
    for (int64_t i = 0; i < 20000; i += 2) {
      CHECK_OK((*txn)->Update(*words, ids[static_cast<size_t>(i)], {i, std::string("changed")}));
    }
    CHECK_OK((*txn)->Rollback());
  }
  auto swept = (*db)->Sweep();
  CHECK_OK(swept.status());
  std::printf("sweep: %llu versions and %llu index entries removed, OIT %llu -> %llu\n",
              (unsigned long long)swept->versions_removed,
              (unsigned long long)swept->index_entries_removed,
              (unsigned long long)swept->oit_before, (unsigned long long)swept->oit_after);
  // (The background collector may have taken some of them first: between the two, all go.)
  auto table_stats = (*db)->GetTableStats(*words);
  CHECK_OK(table_stats.status());
  if (table_stats->dead_versions != 0 || (*db)->stats().gc_versions_removed != 10000) {
    return std::fprintf(stderr, "after the sweep: %llu dead versions left, %llu removed\n",
                        (unsigned long long)table_stats->dead_versions,
                        (unsigned long long)(*db)->stats().gc_versions_removed),
           1;
  }

  // ALTER INDEX ... INACTIVE / ACTIVE: the tree goes, then is rebuilt.
  CHECK_OK((*db)->SetIndexActive("words_word", false));
  CHECK_OK((*db)->SetIndexActive("words_word", true));
  {
    auto txn = (*db)->Begin();
    CHECK_OK(txn.status());
    auto hit = (*txn)->Lookup(*by_word, {std::string("w7919")});
    CHECK_OK(hit.status());
    if (!*hit) return std::fprintf(stderr, "w7919 not found after the rebuild\n"), 1;
    CHECK_OK((*txn)->Commit());
  }

  // Drops: the pages go back to the free list once no snapshot can read them.
  CHECK_OK((*db)->DropIndex("words_word"));
  CHECK_OK((*db)->DropTable("words"));
  auto report = (*db)->Validate();
  CHECK_OK(report.status());
  if (!report->ok() || !report->unreachable_pages.empty()) {
    return std::fprintf(stderr, "validate after the drops: %zu errors, %zu unreachable pages\n",
                        report->errors.size(), report->unreachable_pages.size()),
           1;
  }
  std::printf("dropped; validate clean (%llu pages checked)\n",
              (unsigned long long)report->pages_checked);
  CHECK_OK((*db)->Close());
  std::remove(path.c_str());
  return 0;
}
