// ember-stat's walk of a database file (Firebird's gstat): the header, the catalog, every
// table's pointer and data pages with their version chains, every index's B-tree levels. It
// reads through tools/common/page_reader.h (read-only, no owner lock) and decodes pages with
// the engine's own decoders (engine/page, engine/record, engine/blob), so it reads exactly the
// format the engine writes.
//
// Which version counts: a transaction below the header's OIT is committed (as the engine reads
// them, the TIP is not consulted), others by their TIP state on disk. A transaction the owner
// has running reads as active; one a crash left active also reads as active here until the
// next open marks it dead. "Garbage" is an estimate from the header's OST (the oldest
// snapshot the owner last wrote there): versions behind the newest committed version older
// than it, versions of dead transactions, and delete stubs older than it. The owner's horizon
// in memory may be further on, so the estimate is a lower bound, as gstat's is.
//
// A page that cannot be read or decoded is a Problem naming it; the walk goes on with the
// rest (the rest of the table, the next table, the next index level).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "engine/page/page.h"
#include "engine/page/tip.h"
#include "tools/common/page_reader.h"

namespace ember::tools {

struct Fill {
  std::array<uint64_t, 5> buckets{};  // 0-19%, 20-39%, 40-59%, 60-79%, 80-100%
  uint64_t pages = 0;
  double sum_percent = 0;
  void Add(double percent);
  double average() const { return pages == 0 ? 0 : sum_percent / static_cast<double>(pages); }
};

struct IndexInfo {
  uint32_t id = 0;
  std::string name, table;
  page::PageNo root = page::kNoPage;  // kNoPage: inactive
  bool unique = false, inactive = false;
  size_t key_columns = 0;
  // Filled by the walk.
  uint32_t depth = 0;
  uint64_t leaf_pages = 0, internal_pages = 0, entries = 0, distinct_keys = 0;
  Fill leaf_fill;
  std::vector<std::string> problems;
};

struct TableInfo {
  uint32_t id = 0;
  std::string name;
  page::PageNo first_pp = page::kNoPage;
  std::vector<IndexInfo*> indexes;
  // Filled by the walk.
  uint64_t pointer_pages = 0, data_pages = 0, secondary_pages = 0, swept_pages = 0;
  Fill fill;              // primary data pages
  uint64_t records = 0;   // with a committed version that is not a delete
  uint64_t versions = 0;  // every version of every record (heads included)
  uint64_t back_versions = 0;
  uint64_t max_chain = 0;      // the longest version chain (versions)
  uint64_t delete_stubs = 0;   // committed deletes not yet collected
  uint64_t uncommitted = 0;    // versions of transactions active (or left by a crash)
  uint64_t dead_versions = 0;  // versions of rolled-back transactions
  uint64_t garbage = 0;        // estimate, see the file comment
  uint64_t fragments = 0;
  uint64_t blobs = 0, blob_pages = 0;  // stored BLOBs and their pages (data and list pages)
  uint64_t empty_blobs = 0;  // of `blobs`, those of no bytes (builds before 2026-12 stored them)
  std::vector<std::string> problems;
};

class Analyzer {
 public:
  // `on_page`: called after every page read (for the progress display).
  Analyzer(PageReader* reader, std::function<void(uint64_t)> on_page)
      : r_(reader), on_page_(std::move(on_page)) {}

  // The TIP chain and the catalog. Errors here are problems of the database section; a
  // catalog that cannot be read at all leaves no tables.
  void LoadCatalog();
  void WalkTable(TableInfo* t);
  void WalkIndex(IndexInfo* ix);

  std::vector<TableInfo>& tables() { return tables_; }
  std::vector<IndexInfo>& indexes() { return indexes_; }
  const std::vector<std::string>& problems() const { return problems_; }
  uint64_t tip_pages() const { return tips_.size(); }
  // Every problem met anywhere.
  uint64_t problem_count() const;

 private:
  // The page, from a small cache of pages read; the pointer stays valid until the next Fetch.
  absl::StatusOr<const uint8_t*> Fetch(page::PageNo no);
  page::TxnState StateOf(uint64_t txn) const;
  bool Committed(uint64_t txn) const { return StateOf(txn) == page::TxnState::kCommitted; }
  // Calls `fn(data_page_no, slot_flags)` for each data page of the relation whose first pointer
  // page is `first_pp`; problems go to `problems`.
  void ForEachDataPage(page::PageNo first_pp, uint32_t relation, std::vector<std::string>* problems,
                       uint64_t* pointer_pages,
                       const std::function<void(page::PageNo, uint8_t)>& fn);
  // The raw row of the newest committed version of the record at (page, line), nullopt when
  // it has none or it is a delete. Used for the catalog only (bodies are decoded).
  absl::StatusOr<std::optional<std::string>> CommittedRow(page::PageNo p, uint16_t line);
  absl::StatusOr<std::string> StoredBody(page::PageNo p, uint16_t line);
  void LoadTips();
  void WalkChain(TableInfo* t, page::PageNo p, uint16_t line);
  void CountBlob(TableInfo* t, page::PageNo p, std::string_view rec);

  PageReader* r_;
  std::function<void(uint64_t)> on_page_;
  std::unordered_map<page::PageNo, std::vector<uint8_t>> cache_;
  std::vector<std::vector<uint8_t>> tips_;  // the TIP chain's pages, in order
  std::vector<TableInfo> tables_;
  std::vector<IndexInfo> indexes_;
  std::vector<std::string> problems_;  // header, TIP and catalog
};

}  // namespace ember::tools
