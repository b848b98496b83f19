// ember-stat's page walk (analyzer.h).
#include "tools/ember-stat/analyzer.h"

#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "ember/schema.h"
#include "engine/blob/blob_format.h"
#include "engine/page/blob_page.h"
#include "engine/page/btree_page.h"
#include "engine/page/data_page.h"
#include "engine/page/pointer_page.h"
#include "engine/record/record_format.h"
#include "engine/util/coding.h"
#include "engine/util/key_encoding.h"

namespace ember::tools {

using page::PageNo;

namespace {

// Enough for the pages a version chain or a B-tree level visits around one data page; cleared
// when full (a cache miss is only a re-read).
constexpr size_t kCachePages = 4096;
// Catalog row columns (engine/db/database_impl.cc, docs/format.md "Catalog").
constexpr int64_t kKindTable = 1, kKindIndex = 2;
constexpr int64_t kIndexUnique = 1, kIndexInactive = 2;
constexpr size_t kCatalogColumns = 7;

const int64_t* Int(const Row& row, size_t i) { return std::get_if<int64_t>(&row[i]); }
const std::string* Str(const Row& row, size_t i) { return std::get_if<std::string>(&row[i]); }

}  // namespace

void Fill::Add(double percent) {
  ++pages;
  sum_percent += percent;
  size_t b = static_cast<size_t>(percent / 20);
  buckets[std::min<size_t>(b, buckets.size() - 1)]++;
}

uint64_t Analyzer::problem_count() const {
  uint64_t n = problems_.size();
  for (const TableInfo& t : tables_) n += t.problems.size();
  for (const IndexInfo& ix : indexes_) n += ix.problems.size();
  return n;
}

absl::StatusOr<const uint8_t*> Analyzer::Fetch(PageNo no) {
  if (auto it = cache_.find(no); it != cache_.end()) return it->second.data();
  if (cache_.size() >= kCachePages) cache_.clear();
  std::vector<uint8_t> buf(r_->page_size());
  absl::Status s = r_->ReadPage(no, buf.data());
  if (on_page_) on_page_(1);
  if (!s.ok()) return s;
  return cache_.emplace(no, std::move(buf)).first->second.data();
}

page::TxnState Analyzer::StateOf(uint64_t txn) const {
  // Fragments and pages changed by no transaction carry 0; below the OIT every transaction
  // reads as committed (the engine does not load their TIP states either).
  if (txn == 0 || txn < r_->header().oit) return page::TxnState::kCommitted;
  if (tips_.empty()) return page::TxnState::kActive;
  const uint64_t per = page::TxnsPerTip(r_->page_size());
  const uint64_t first = page::TipFirstTxn(tips_[0].data());
  if (txn < first) return page::TxnState::kCommitted;
  const uint64_t k = (txn - first) / per;
  if (k >= tips_.size()) return page::TxnState::kActive;  // not on disk yet: not committed
  return page::TipGetState(tips_[k].data(), txn);
}

void Analyzer::LoadTips() {
  std::unordered_set<PageNo> seen;
  for (PageNo p = r_->header().first_tip; p != page::kNoPage;) {
    if (!seen.insert(p).second) {
      problems_.push_back(absl::StrCat("TIP page ", p, ": the TIP chain loops back to it"));
      return;
    }
    std::vector<uint8_t> buf(r_->page_size());
    absl::Status s = r_->ReadPage(p, buf.data());
    if (on_page_) on_page_(1);
    if (s.ok() && page::GetType(buf.data()) != page::PageType::kTip) {
      s = absl::DataLossError(absl::StrCat("page ", p, ": expected a TIP page, found type ",
                                           page::PageTypeName(page::GetType(buf.data()))));
    }
    if (!s.ok()) {
      problems_.push_back(
          absl::StrCat(s.message(), " (TIP chain: later transactions read as not committed)"));
      return;
    }
    const PageNo next = page::TipNext(buf.data());
    tips_.push_back(std::move(buf));
    p = next;
  }
}

void Analyzer::ForEachDataPage(PageNo first_pp, uint32_t relation,
                               std::vector<std::string>* problems, uint64_t* pointer_pages,
                               const std::function<void(PageNo, uint8_t)>& fn) {
  const uint32_t ps = r_->page_size();
  std::unordered_set<PageNo> seen;
  for (PageNo pp = first_pp; pp != page::kNoPage;) {
    if (!seen.insert(pp).second) {
      problems->push_back(absl::StrCat("pointer page ", pp, ": the chain loops back to it"));
      return;
    }
    absl::StatusOr<const uint8_t*> got = Fetch(pp);
    if (!got.ok()) {
      // The rest of the chain hangs from this page: nothing more of the relation is found.
      problems->push_back(absl::StrCat(got.status().message(),
                                       " (pointer page: the data pages it lists are skipped)"));
      return;
    }
    // Copied: fetching the data pages may evict it.
    std::vector<uint8_t> ppage(*got, *got + ps);
    if (page::GetType(ppage.data()) != page::PageType::kPointer ||
        page::PpRelation(ppage.data()) != relation) {
      problems->push_back(absl::StrCat("page ", pp, ": expected pointer page of relation ",
                                       relation, ", found ",
                                       page::PageTypeName(page::GetType(ppage.data())),
                                       " page of relation ", page::PpRelation(ppage.data())));
      return;
    }
    ++*pointer_pages;
    const uint16_t count = page::PpCount(ppage.data());
    for (uint32_t slot = 0; slot < count; ++slot) {
      const PageNo dp = page::PpGetSlot(ppage.data(), ps, slot);
      if (dp != page::kNoPage) fn(dp, page::PpGetFlags(ppage.data(), ps, slot));
    }
    pp = page::PpNext(ppage.data());
  }
}

absl::StatusOr<std::string> Analyzer::StoredBody(PageNo p, uint16_t line) {
  const uint32_t ps = r_->page_size();
  std::string body;
  bool first = true;
  for (int hops = 0; hops < 1 << 16; ++hops) {
    absl::StatusOr<const uint8_t*> got = Fetch(p);
    if (!got.ok()) return got.status();
    std::optional<std::string_view> rec = page::DpGet(*got, ps, line);
    record::RecordHeader h;
    if (!rec || !record::DecodeHeader(*rec, &h)) {
      return absl::DataLossError(absl::StrCat("page ", p, " line ", line, ": ",
                                              first ? "no record" : "no fragment", " there"));
    }
    body.append(rec->substr(h.size()));
    if (!(h.flags & record::kRecFragmented)) return body;
    p = h.frag_page;
    line = h.frag_line;
    first = false;
  }
  return absl::DataLossError(absl::StrCat("page ", p, " line ", line, ": fragment chain loops"));
}

absl::StatusOr<std::optional<std::string>> Analyzer::CommittedRow(PageNo p, uint16_t line) {
  const uint32_t ps = r_->page_size();
  std::string newer;  // raw body of the version walked last (deltas apply to it)
  for (int depth = 0; depth < 1 << 16 && p != page::kNoPage; ++depth) {
    absl::StatusOr<const uint8_t*> got = Fetch(p);
    if (!got.ok()) return got.status();
    std::optional<std::string_view> rec = page::DpGet(*got, ps, line);
    record::RecordHeader h;
    if (!rec || !record::DecodeHeader(*rec, &h)) {
      return absl::DataLossError(
          absl::StrCat("page ", p, " line ", line, ": record header does not decode"));
    }
    std::string raw;
    if (!(h.flags & record::kRecDeleted)) {
      absl::StatusOr<std::string> stored = StoredBody(p, line);
      if (!stored.ok()) return stored.status();
      absl::Status s = (h.flags & record::kRecDelta)
                           ? record::ApplyDelta(newer, *stored, &raw)
                           : record::DecompressBody(h.encoding, *stored, &raw);
      if (!s.ok()) {
        return absl::DataLossError(absl::StrCat("page ", p, " line ", line, ": ", s.message()));
      }
    }
    if (Committed(h.txn)) {
      if (h.flags & record::kRecDeleted) return std::optional<std::string>();
      return std::optional<std::string>(std::move(raw));
    }
    newer = std::move(raw);
    p = h.back_page;
    line = h.back_line;
  }
  return std::optional<std::string>();
}

void Analyzer::LoadCatalog() {
  LoadTips();
  const uint32_t ps = r_->page_size();
  uint64_t pointer_pages = 0;
  std::vector<std::pair<PageNo, uint8_t>> pages;
  ForEachDataPage(r_->header().catalog_pp, 0, &problems_, &pointer_pages,
                  [&](PageNo dp, uint8_t flags) { pages.emplace_back(dp, flags); });
  std::vector<Row> rows;
  for (const auto& [dp, flags] : pages) {
    if (flags & page::kPpSecondary) continue;
    absl::StatusOr<const uint8_t*> got = Fetch(dp);
    if (!got.ok()) {
      problems_.push_back(absl::StrCat(got.status().message(),
                                       " (catalog data page: tables or indexes may be missing)"));
      continue;
    }
    const uint16_t lines = page::DpLineCount(*got);
    std::vector<uint16_t> heads;
    for (uint16_t l = 0; l < lines; ++l) {
      std::optional<std::string_view> rec = page::DpGet(*got, ps, l);
      record::RecordHeader h;
      if (rec && record::DecodeHeader(*rec, &h) && !(h.flags & record::kRecNotPrimary)) {
        heads.push_back(l);
      }
    }
    for (uint16_t l : heads) {
      absl::StatusOr<std::optional<std::string>> raw = CommittedRow(dp, l);
      Row row;
      absl::Status s = raw.ok() ? absl::OkStatus() : raw.status();
      if (s.ok() && !raw->has_value()) continue;
      if (s.ok()) s = record::DecodeRow(**raw, kCatalogColumns, &row);
      if (s.ok() && (!Int(row, 0) || !Int(row, 1) || !Str(row, 2) || !Int(row, 3) || !Str(row, 4) ||
                     !Int(row, 5))) {
        s = absl::DataLossError("unexpected column types");
      }
      if (!s.ok()) {
        problems_.push_back(
            absl::StrCat("catalog record on page ", dp, " line ", l, ": ", s.message()));
        continue;
      }
      rows.push_back(std::move(row));
    }
  }
  for (const Row& row : rows) {
    if (*Int(row, 0) == kKindTable) {
      TableInfo t;
      t.id = static_cast<uint32_t>(*Int(row, 1));
      t.name = *Str(row, 2);
      t.first_pp = static_cast<PageNo>(*Int(row, 3));
      tables_.push_back(std::move(t));
    } else if (*Int(row, 0) == kKindIndex) {
      IndexInfo ix;
      ix.id = static_cast<uint32_t>(*Int(row, 1));
      ix.name = *Str(row, 2);
      ix.root = static_cast<PageNo>(*Int(row, 3));
      ix.table = *Str(row, 4);
      ix.unique = (*Int(row, 5) & kIndexUnique) != 0;
      ix.inactive = (*Int(row, 5) & kIndexInactive) != 0 || ix.root == page::kNoPage;
      if (const std::string* def = Str(row, 6)) {
        std::string_view in = *def;
        uint64_t n = 0;
        if (util::GetVarint64(&in, &n)) ix.key_columns = n;
      }
      indexes_.push_back(std::move(ix));
    }
  }
  std::sort(tables_.begin(), tables_.end(),
            [](const TableInfo& a, const TableInfo& b) { return a.name < b.name; });
  std::sort(indexes_.begin(), indexes_.end(),
            [](const IndexInfo& a, const IndexInfo& b) { return a.name < b.name; });
  for (IndexInfo& ix : indexes_) {
    for (TableInfo& t : tables_) {
      if (t.name == ix.table) t.indexes.push_back(&ix);
    }
  }
}

void Analyzer::WalkChain(TableInfo* t, PageNo p, uint16_t line) {
  const uint32_t ps = r_->page_size();
  const uint64_t ost = r_->header().ost;
  uint64_t chain = 0;
  bool seen_committed = false;  // the newest committed version met
  bool horizon_passed = false;  // a committed version older than the OST met: the rest is garbage
  for (; p != page::kNoPage && chain < (1u << 20); ++chain) {
    absl::StatusOr<const uint8_t*> got = Fetch(p);
    if (!got.ok()) {
      t->problems.push_back(absl::StrCat(got.status().message(), " (a version chain of table ",
                                         t->name, " goes on there)"));
      break;
    }
    std::optional<std::string_view> rec = page::DpGet(*got, ps, line);
    record::RecordHeader h;
    if (!rec || !record::DecodeHeader(*rec, &h)) {
      t->problems.push_back(absl::StrCat("page ", p, " line ", line, ": ",
                                         chain == 0 ? "record" : "back version",
                                         " header does not decode"));
      break;
    }
    ++t->versions;
    if (chain > 0) ++t->back_versions;
    const page::TxnState st = StateOf(h.txn);
    if (horizon_passed) {
      ++t->garbage;
    } else if (st == page::TxnState::kDead) {
      ++t->dead_versions;
      ++t->garbage;
    } else if (st != page::TxnState::kCommitted) {
      ++t->uncommitted;
    } else {
      const bool deleted = (h.flags & record::kRecDeleted) != 0;
      if (!seen_committed) {
        if (deleted) ++t->delete_stubs;
        else ++t->records;
      }
      if (h.txn < ost) {
        horizon_passed = true;
        if (deleted && !seen_committed) ++t->garbage;  // a delete everyone sees
      }
      seen_committed = true;
    }
    p = h.back_page;
    line = h.back_line;
  }
  t->max_chain = std::max(t->max_chain, chain);
}

void Analyzer::CountBlob(TableInfo* t, PageNo p, std::string_view rec) {
  record::RecordHeader h;
  if (!record::DecodeHeader(rec, &h)) return;
  absl::StatusOr<blob::BlobHeader> b = blob::DecodeBlobHeader(rec.substr(h.size()));
  if (!b.ok()) {
    t->problems.push_back(absl::StrCat("page ", p, ": BLOB header record: ", b.status().message()));
    return;
  }
  ++t->blobs;
  if (b->length == 0) ++t->empty_blobs;
  if (b->level == 1) t->blob_pages += b->pages.size();
  if (b->level != 2) return;
  for (PageNo list : b->pages) {
    ++t->blob_pages;
    absl::StatusOr<const uint8_t*> got = Fetch(list);
    if (!got.ok()) {
      t->problems.push_back(absl::StrCat(got.status().message(), " (BLOB list page)"));
      continue;
    }
    t->blob_pages += page::BlobUsed(*got);
  }
}

void Analyzer::WalkTable(TableInfo* t) {
  const uint32_t ps = r_->page_size();
  std::vector<std::pair<PageNo, uint8_t>> pages;
  ForEachDataPage(t->first_pp, t->id, &t->problems, &t->pointer_pages,
                  [&](PageNo dp, uint8_t flags) { pages.emplace_back(dp, flags); });
  for (const auto& [dp, slot_flags] : pages) {
    absl::StatusOr<const uint8_t*> got = Fetch(dp);
    if (!got.ok()) {
      t->problems.push_back(std::string(got.status().message()));
      continue;
    }
    std::vector<uint8_t> dpage(*got, *got + ps);  // chains may evict it
    const uint8_t* d = dpage.data();
    if (page::GetType(d) != page::PageType::kData || page::DpRelation(d) != t->id) {
      t->problems.push_back(absl::StrCat("page ", dp, ": expected a data page of table ", t->name,
                                         ", found ", page::PageTypeName(page::GetType(d)),
                                         " page of relation ", page::DpRelation(d)));
      continue;
    }
    const bool secondary = ((slot_flags | page::GetFlags(d)) & page::kPpSecondary) != 0;
    if (slot_flags & page::kPpSwept) ++t->swept_pages;
    const uint16_t lines = page::DpLineCount(d);
    if (secondary) {
      ++t->secondary_pages;
    } else {
      ++t->data_pages;
      const double usable = ps - page::kDpLinesOffset;
      t->fill.Add(100.0 * (usable - page::DpFreeSpace(d, ps)) / usable);
    }
    for (uint16_t l = 0; l < lines; ++l) {
      std::optional<std::string_view> rec = page::DpGet(d, ps, l);
      if (!rec) continue;
      record::RecordHeader h;
      if (!record::DecodeHeader(*rec, &h)) {
        t->problems.push_back(
            absl::StrCat("page ", dp, " line ", l, ": record header does not decode"));
        continue;
      }
      if (h.flags & record::kRecBlob) {
        CountBlob(t, dp, *rec);
      } else if (h.flags & record::kRecFragment) {
        ++t->fragments;
      } else if (!(h.flags & record::kRecBackVersion) && !secondary) {
        WalkChain(t, dp, l);
      }
    }
  }
}

void Analyzer::WalkIndex(IndexInfo* ix) {
  if (ix->inactive) return;
  const uint32_t ps = r_->page_size();
  // The leftmost page of each level: the root, then each one's low_page.
  std::vector<PageNo> leftmost;
  PageNo p = ix->root;
  for (int guard = 0; guard < 64; ++guard) {
    absl::StatusOr<const uint8_t*> got = Fetch(p);
    page::BtreeHeader h;
    absl::Status s = got.ok() ? page::ReadBtreeHeader(*got, ps, p, &h) : got.status();
    if (!s.ok()) {
      ix->problems.push_back(absl::StrCat(s.message(), leftmost.empty()
                                                           ? " (root page: index skipped)"
                                                           : " (leftmost page of a level)"));
      if (leftmost.empty()) return;
      break;
    }
    leftmost.push_back(p);
    if (h.leaf()) break;
    p = h.low_page;
  }
  ix->depth = static_cast<uint32_t>(leftmost.size());
  std::string prev_key;
  bool have_prev = false;
  for (size_t level = 0; level < leftmost.size(); ++level) {
    std::unordered_set<PageNo> seen;
    for (p = leftmost[level]; p != page::kNoPage;) {
      if (!seen.insert(p).second) {
        ix->problems.push_back(absl::StrCat("btree page ", p, ": the sibling chain loops"));
        break;
      }
      absl::StatusOr<const uint8_t*> got = Fetch(p);
      page::BtreeNode node;
      absl::Status s = got.ok() ? page::DecodeBtreePage(*got, ps, p, &node) : got.status();
      if (!s.ok()) {
        // The rest of the level is reached only through this page's right sibling.
        ix->problems.push_back(absl::StrCat(s.message(), " (rest of the level skipped)"));
        break;
      }
      if (!node.leaf()) {
        ++ix->internal_pages;
      } else {
        ++ix->leaf_pages;
        const size_t usable = ps - page::kBtreeHeaderSize;
        ix->leaf_fill.Add(100.0 * static_cast<double>(usable - node.free_space(ps)) /
                          static_cast<double>(usable));
        for (const page::BtreeEntry& e : node.entries) {
          ++ix->entries;
          // The key columns, without the record number the entry ends with.
          std::string_view in = e.key;
          for (size_t c = 0; c < ix->key_columns; ++c) {
            if (!util::SkipKeyColumn(&in)) break;
          }
          std::string_view key(e.key.data(), e.key.size() - in.size());
          if (!have_prev || key != prev_key) ++ix->distinct_keys;
          prev_key.assign(key);
          have_prev = true;
        }
      }
      p = node.right_sibling;
    }
  }
}

}  // namespace ember::tools
