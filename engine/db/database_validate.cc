// Database::Validate: walks every page reachable from the header and checks the structures;
// pages allocated in the PIPs but reachable from nothing are reported (and freed on request).
// Meant for a quiet database: concurrent writers can make it report transient problems.
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/blob/blob_format.h"
#include "engine/blob/stored_blobs.h"
#include "engine/db/database_impl.h"
#include "engine/db/garbage_collector.h"
#include "engine/page/blob_page.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/pip.h"
#include "engine/page/tip.h"
#include "engine/record/record_format.h"
#include "engine/util/coding.h"

namespace ember::db {

struct ValidateWalk {
  ValidationReport rep;
  std::vector<page::PageNo> pages{0};  // every page reached, the header first
  // Orphan BLOBs: headers no version names (their pages count as used until freed), by table.
  std::vector<std::pair<internal::TableState*, std::vector<uint64_t>>> orphans;
  // The database as the walk started.
  uint32_t ps = 0;
  uint32_t page_count = 0;
};

namespace {

// A page of a stored BLOB of relation `rel`: read (its checksum verified by the cache), it
// must be a BLOB page of the kind expected. A list page's entries go to `listed`.
void CheckBlobPage(cache::BufferCache* cache, uint32_t rel, page::PageNo p, bool list,
                   std::vector<page::PageNo>* listed, ValidateWalk* w) {
  ValidationReport& rep = w->rep;
  const uint32_t ps = w->ps;
  w->pages.push_back(p);
  const char* what = list ? "list" : "data";
  absl::StatusOr<cache::PageRef> r = cache->Fetch(p, cache::LatchMode::kShared);
  if (!r.ok()) {
    rep.errors.push_back(
        absl::StrCat("relation ", rel, ": BLOB ", what, " page ", p, ": ", r.status().message()));
    return;
  }
  const uint8_t* d = r->data();
  const bool is_list = (page::GetFlags(d) & page::kBlobListPage) != 0;
  const uint32_t cap = list ? page::BlobListCapacity(ps) : page::BlobPageCapacity(ps);
  // (Not the relation id: the pages of a BLOB written as a temporary one keep relation 0.)
  if (page::GetType(d) != page::PageType::kBlob || is_list != list || page::BlobUsed(d) > cap) {
    rep.errors.push_back(absl::StrCat("relation ", rel, ": page ", p, " is not a BLOB ", what,
                                      " page (a ", page::PageTypeName(page::GetType(d)), " page, ",
                                      page::BlobUsed(d), " used)"));
    return;
  }
  if (!listed) return;
  for (uint32_t i = 0; i < page::BlobUsed(d); ++i) {
    listed->push_back(util::Get32(page::BlobData(d) + size_t{4} * i));
  }
}

// The pages of the stored BLOB whose header record is `body`: every one is reachable through
// it and checked here, so a damaged BLOB page is found by Validate, not by the next reader.
void CheckBlobPages(cache::BufferCache* cache, uint32_t rel, std::string_view body,
                    ValidateWalk* w) {
  absl::StatusOr<blob::BlobHeader> h = blob::DecodeBlobHeader(body);
  if (!h.ok()) {
    w->rep.errors.push_back(absl::StrCat("relation ", rel, ": ", h.status().message()));
    return;
  }
  std::vector<page::PageNo> data_pages;
  for (page::PageNo p : h->pages) {
    if (h->level == 2) {
      CheckBlobPage(cache, rel, p, /*list=*/true, &data_pages, w);
    } else {
      data_pages.push_back(p);
    }
  }
  for (page::PageNo p : data_pages) CheckBlobPage(cache, rel, p, /*list=*/false, nullptr, w);
}

}  // namespace

absl::StatusOr<ValidationReport> DatabaseImpl::Validate(const ValidateOptions& options) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  // The background collector's rounds unlink lines before they free them: not while we look.
  std::unique_lock<std::mutex> pause;
  if (gc_) pause = gc_->Pause();
  util::MutexLock no_sweep(sweep_mu_);  // nor a sweep's
  ValidateWalk w;
  w.rep.repaired_pages = repaired_pages_;
  w.ps = options_.page_size;
  w.page_count = space_->page_count();

  ListFixedPages(&w);
  util::ReaderLock g(catalog_mu_);
  if (absl::Status s = CheckRelations(&w); !s.ok()) return s;
  if (absl::Status s = CheckIndexes(&w); !s.ok()) return s;
  if (absl::Status s = CheckPageSpace(&w); !s.ok()) return s;
  // A damaged page can hide references to pages that then only look unreachable (or to the
  // BLOBs that look orphaned): with errors, nothing is freed.
  if (!w.rep.ok()) return std::move(w.rep);
  if (absl::Status s = FreeUnreferenced(options, &w); !s.ok()) return s;
  return std::move(w.rep);
}

void DatabaseImpl::ListFixedPages(ValidateWalk* w) {
  ValidationReport& rep = w->rep;
  std::vector<page::PageNo>& pages = w->pages;
  for (uint32_t k = 0; page::PipPageNo(k, w->ps) < w->page_count; ++k) {
    pages.push_back(page::PipPageNo(k, w->ps));
  }
  for (page::PageNo p = txns_->first_tip(); p != page::kNoPage;) {
    pages.push_back(p);
    absl::StatusOr<cache::PageRef> r = cache_->Fetch(p, cache::LatchMode::kShared);
    if (!r.ok()) {
      rep.errors.push_back(absl::StrCat("TIP page ", p, ": ", r.status().message()));
      break;
    }
    if (page::GetType(r->data()) != page::PageType::kTip) {
      rep.errors.push_back(absl::StrCat("page ", p, ": expected a TIP page"));
      break;
    }
    p = page::TipNext(r->data());
  }
}

absl::Status DatabaseImpl::CheckRelations(ValidateWalk* w) {
  ValidationReport& rep = w->rep;
  std::vector<page::PageNo>& pages = w->pages;
  if (absl::Status s = catalog_->Check(
          &rep.errors, &pages, [](uint64_t) {}, &rep.records);
      !s.ok()) {
    return s;
  }
  // What drops left, not freed yet (some snapshot may still read it): reachable, unchecked
  // for orphans.
  // (BLOB pages are read after each walk, with no data page latched: one latch at a time.)
  std::vector<std::string> bodies;
  for (const PendingDrop& d : pending_drops_) {
    if (d.table == nullptr) continue;
    uint64_t versions = 0;
    bodies.clear();
    absl::Status s = d.table->relation->Check(
        &rep.errors, &pages, [](uint64_t) {}, &versions,
        [&](page::PageNo, uint16_t, uint64_t, std::string_view body) {
          bodies.emplace_back(body);
        });
    if (!s.ok()) return s;
    for (const std::string& body : bodies) CheckBlobPages(cache_.get(), d.table->id, body, w);
  }
  for (const auto& t : tables_) {
    const size_t ncols = t->schema.columns.size();
    absl::flat_hash_set<uint64_t> named;
    std::vector<std::pair<uint64_t, uint64_t>> headers;  // (BLOB id, writer)
    bodies.clear();
    absl::Status s = t->relation->Check(
        &rep.errors, &pages, [](uint64_t) {}, &rep.records,
        [&](page::PageNo p, uint16_t line, uint64_t txn, std::string_view body) {
          headers.emplace_back(blob::StoredId(t->id, p, line), txn);
          bodies.emplace_back(body);
        },
        [&](std::string_view raw) {
          Row row;
          if (absl::Status d = record::DecodeRow(raw, ncols, &row); !d.ok()) return d;
          for (const Value& v : row) {
            if (const auto* b = std::get_if<BlobId>(&v)) named.insert(b->value);
          }
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
    for (const std::string& body : bodies) CheckBlobPages(cache_.get(), t->id, body, w);
    std::vector<uint64_t> table_orphans;
    for (const auto& [id, writer] : headers) {
      // An active writer may be about to write the record naming it.
      if (named.contains(id) || txns_->StateOf(writer) == txn::kCnActive) continue;
      rep.orphan_blobs.push_back(id);
      table_orphans.push_back(id);
    }
    if (!table_orphans.empty()) w->orphans.emplace_back(t.get(), std::move(table_orphans));
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::CheckIndexes(ValidateWalk* w) {
  ValidationReport& rep = w->rep;
  for (const PendingDrop& d : pending_drops_) {
    for (const index::BTree* tree : d.trees) {
      if (absl::Status s = tree->Check(
              &rep.errors, [](std::string_view, uint64_t) {}, &w->pages);
          !s.ok()) {
        return s;
      }
    }
  }
  for (const auto& ix : indexes_) {
    if (ix->btree() == nullptr) continue;  // inactive
    absl::Status s = ix->btree()->Check(
        &rep.errors,
        [&](std::string_view key, uint64_t value) {
          ++rep.index_entries;
          std::string_view columns;
          uint64_t rec;
          if (!internal::ParseIndexEntry(*ix, key, &columns, &rec)) {
            rep.errors.push_back(absl::StrCat("index ", ix->schema.name, ": an entry of ",
                                              key.size(), " bytes does not parse as ",
                                              ix->key_columns.size(),
                                              " key columns and a record number"));
          } else if (value != 0) {
            rep.errors.push_back(absl::StrCat("index ", ix->schema.name, ": entry value ", value,
                                              " where 0 was expected (the key holds record ", rec,
                                              ")"));
          }
          // An entry whose record does not exist is not an error: it is what a crash leaves
          // when the transaction that inserted the record never committed (its index page
          // reached disk, its data page did not: index pages are not ordered after data pages,
          // as in Firebird, since that would cost a sync per commit). Readers skip such
          // entries, like the entries of dead versions. A committed record always exists: its
          // data page is written by its commit.
        },
        &w->pages);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::CheckPageSpace(ValidateWalk* w) {
  ValidationReport& rep = w->rep;
  absl::flat_hash_set<page::PageNo> used(w->pages.begin(), w->pages.end());
  rep.pages_checked = used.size();
  for (page::PageNo p : used) {
    absl::StatusOr<bool> free = space_->IsFree(p);
    if (!free.ok()) return free.status();
    if (*free) rep.errors.push_back(absl::StrCat("page ", p, " is in use but free in its PIP"));
  }
  for (page::PageNo p = page::DoublewriteEnd(w->ps); p < w->page_count; ++p) {
    if (used.contains(p)) continue;
    absl::StatusOr<bool> free = space_->IsFree(p);
    if (!free.ok()) return free.status();
    if (*free) continue;
    rep.unreachable_pages.push_back(p);
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::FreeUnreferenced(const ValidateOptions& options, ValidateWalk* w) {
  ValidationReport& rep = w->rep;
  if (options.free_unreachable && !rep.unreachable_pages.empty()) {
    for (page::PageNo p : rep.unreachable_pages) {
      if (absl::Status s = space_->Free(p, 0); !s.ok()) return s;
      ++rep.freed_pages;
    }
    if (absl::Status s = cache_->FlushAll(); !s.ok()) return s;
  }
  if (options.free_unreachable && !w->orphans.empty()) {
    for (const auto& [t, ids] : w->orphans) {
      if (absl::Status s = blob::FreeStoredBlobs(cache_.get(), space_.get(), t->relation.get(), ids,
                                                 0, &rep.freed_blob_pages);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = cache_->FlushAll(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ember::db
