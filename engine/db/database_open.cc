// DatabaseImpl's life: Database::Open, creating a new file or opening one (the header page, the
// doublewrite recovery, the catalog, the reclamation after a crash), and Close.
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/blob/stored_blobs.h"
#include "engine/db/catalog_rows.h"
#include "engine/db/database_impl.h"
#include "engine/db/garbage_collector.h"
#include "engine/db/transaction_impl.h"
#include "engine/io/owner_lock.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/pip.h"
#include "engine/record/record_format.h"
#include "engine/util/coding.h"

namespace ember {

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         const Options& options) {
  const bool exists = io::FileExists(path);
  if (!exists && !options.create_if_missing) {
    return absl::NotFoundError(absl::StrCat("database ", path, " does not exist"));
  }
  if (exists && options.create_if_missing && options.error_if_exists) {
    return absl::AlreadyExistsError(absl::StrCat("database ", path, " already exists"));
  }
  // The owner lock first: nothing is read or written before this handle owns the file (a new
  // file is created by taking its lock).
  absl::StatusOr<std::unique_ptr<io::OwnerLock>> lock =
      exists ? io::OwnerLock::Acquire(path) : io::OwnerLock::CreateAndAcquire(path);
  if (!lock.ok()) return lock.status();
  io::FileOptions fo;
  fo.mode = io::OpenMode::kOpenExisting;
  fo.use_io_uring = options.use_io_uring;
  absl::StatusOr<std::unique_ptr<io::File>> f = io::OpenPosixFile(path, fo);
  absl::StatusOr<std::unique_ptr<db::DatabaseImpl>> d =
      f.ok() ? db::DatabaseImpl::OpenFile(std::move(*f), options, !exists)
             : absl::StatusOr<std::unique_ptr<db::DatabaseImpl>>(f.status());
  if (!d.ok()) {
    if (!exists) (void)io::RemoveFile(path);  // leave nothing half-created behind (still ours)
    return d.status();
  }
  (*d)->TakeOwnerLock(std::move(*lock));
  return std::unique_ptr<Database>(std::move(*d));
}

namespace db {

using cache::LatchMode;
using internal::IndexState;
using internal::TableState;

namespace {

absl::Status ValidateOptions(const Options& o) {
  if (!page::ValidPageSize(o.page_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", o.page_size, ": must be a power of two in 4096..32768"));
  }
  if (o.blob_temp_space < 0 || o.blob_temp_space > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob_temp_space ", o.blob_temp_space, ": must be 0, 1 or 2"));
  }
  if (o.cache_pages < 16) {
    return absl::InvalidArgumentError(absl::StrCat("cache_pages ", o.cache_pages, ": at least 16"));
  }
  if (o.max_parallel_workers < 1 || o.max_parallel_workers > 64 || o.parallel_workers < 1 ||
      o.parallel_workers > o.max_parallel_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parallel_workers ", o.parallel_workers, ", max_parallel_workers ", o.max_parallel_workers,
        ": need 1 <= parallel_workers <= max_parallel_workers <= 64"));
  }
  if (o.sort_memory_limit < (uint64_t{64} << 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sort_memory_limit ", o.sort_memory_limit, ": at least 64 KB"));
  }
  return absl::OkStatus();
}

uint64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

DatabaseImpl::DatabaseImpl(std::unique_ptr<io::File> file, const Options& options)
    : file_(std::move(file)),
      options_(options),
      workers_(std::make_unique<worker::WorkerPool>(
          options.max_parallel_workers,
          std::chrono::milliseconds(options.worker_idle_timeout_ms))) {}

DatabaseImpl::~DatabaseImpl() {
  if (open_.load()) (void)Close();
  StopAutoSweep();  // (Close stops it; this covers a handle that crashed)
}

absl::StatusOr<std::unique_ptr<DatabaseImpl>> DatabaseImpl::OpenFile(std::unique_ptr<io::File> file,
                                                                     const Options& options,
                                                                     bool create) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  std::unique_ptr<DatabaseImpl> d(new DatabaseImpl(std::move(file), options));
  io::TempSpaceOptions to;
  to.dirs = options.temp_directories;
  to.cache_limit = options.temp_cache_limit;
  d->temp_ = std::make_unique<io::TempSpace>(to);
  io::TempSpace::RemoveStaleFiles(d->temp_->dirs());
  absl::Status s = create ? d->CreateNew() : d->OpenExisting();
  if (!s.ok()) {
    if (d->cache_) d->cache_->DiscardAll();
    return s;
  }
  d->open_.store(true);
  // Before any transaction can start and before the collector runs: nothing allocates pages
  // while the walk decides which ones are leaked.
  if (d->opened_after_crash_ && options.reclaim_after_crash) d->ReclaimAfterCrash();
  if (options.gc_policy != GcPolicy::kCooperative) {
    d->gc_ = std::make_unique<GarbageCollector>(d.get());
  }
  return d;
}

absl::Status DatabaseImpl::MakeCache(uint32_t page_size) {
  cache::CacheOptions co{page_size, options_.cache_pages, options_.forced_writes};
  absl::StatusOr<std::unique_ptr<cache::BufferCache>> cache =
      cache::BufferCache::Create(file_.get(), co);
  if (!cache.ok()) return cache.status();
  cache_ = std::move(*cache);
  return absl::OkStatus();
}

absl::Status DatabaseImpl::CreateNew() {
  const uint32_t ps = options_.page_size;
  if (absl::Status s = MakeCache(ps); !s.ok()) return s;
  // The doublewrite area must read back as zeros (no records) until it is written.
  const page::PageNo first_free = page::DoublewriteEnd(ps);
  if (absl::Status s = file_->Allocate(uint64_t{first_free} * ps); !s.ok()) return s;
  if (options_.doublewrite) cache_->EnableDoublewrite(cache::DwRecovery{});
  // Page 0 (header) and page 1 (first PIP) by hand; everything else through the allocator.
  {
    absl::StatusOr<cache::PageRef> pip = cache_->FetchNew(1);
    if (!pip.ok()) return pip.status();
    page::InitPip(pip->data(), ps, 1, 0);
    pip->Mark(cache::kSystemMark);
  }
  space_ = std::make_unique<cache::PageSpace>(cache_.get(), first_free);
  txns_ = std::make_unique<txn::TxnManager>(cache_.get(), space_.get(),
                                            [this](uint64_t n) { return PersistNext(n); });
  absl::StatusOr<page::PageNo> tip = txns_->CreateInitial();
  if (!tip.ok()) return tip.status();
  absl::StatusOr<page::PageNo> cat = record::Relation::Create(cache_.get(), space_.get(), 0, 0);
  if (!cat.ok()) return cat.status();
  {
    util::MutexLock g(header_mu_);
    header_ = page::HeaderFields{};
    header_.page_size = ps;
    header_.first_tip = *tip;
    header_.catalog_pp = *cat;
    header_.create_time_us = NowMicros();
    header_.dw_first = page::kDoublewriteFirst;
    header_.dw_slots = page::DoublewriteSlots(ps);
    // The header keeps Firebird's default; an Options value only overrides it for this open.
    sweep_interval_.store(options_.sweep_interval.value_or(header_.sweep_interval));
  }
  catalog_ = std::make_unique<record::Relation>(cache_.get(), space_.get(), txns_.get(), 0, *cat);
  if (absl::Status s = catalog_->Load(); !s.ok()) return s;
  if (absl::Status s = cache_->FlushAll(); !s.ok()) return s;
  if (absl::Status s = WriteHeader(/*clean=*/false); !s.ok()) return s;
  return cache_->Checkpoint();  // page 0 at home: an open reads its page size before recovery
}

absl::Status DatabaseImpl::OpenExisting() {
  const char* path = file_->path().c_str();
  absl::StatusOr<uint64_t> size = file_->Size();
  if (!size.ok()) return size.status();
  if (*size < page::kMinPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not an EmberDB database (", *size, " bytes, shorter than one page)"));
  }
  std::vector<uint8_t> first(page::kMinPageSize);
  if (absl::Status s = file_->Read(0, first.data(), first.size()); !s.ok()) return s;
  uint32_t ps;
  if (absl::Status s = page::PeekPageSize(first.data(), first.size(), &ps, path); !s.ok()) {
    return s;
  }
  options_.page_size = ps;
  // Before anything reads a page: repair what a crash tore (the header page too; its first
  // 4 KiB, read above, hold only fields that never change).
  absl::StatusOr<cache::DwRecovery> dw = cache::RecoverDoublewrite(file_.get(), ps);
  if (!dw.ok()) return dw.status();
  for (const cache::DwRecovery::Repaired& r : dw->repaired) {
    repaired_pages_.push_back(r.page);
    if (r.torn) ++torn_pages_repaired_;
  }
  size = file_->Size();  // a repair may have written past the old end
  if (!size.ok()) return size.status();
  if (absl::Status s = MakeCache(ps); !s.ok()) return s;
  cache_->CountSyncs(dw->syncs);  // the recovery's, made before the cache existed
  if (options_.doublewrite) cache_->EnableDoublewrite(*dw);
  page::HeaderFields header;  // what the rest of the open reads of it
  {
    util::MutexLock g(header_mu_);  // before the latch, as in WriteHeader
    absl::StatusOr<cache::PageRef> h = cache_->Fetch(0, LatchMode::kShared);
    if (!h.ok()) return h.status();
    if (absl::Status s = page::ReadHeader(h->data(), &header_, path); !s.ok()) return s;
    opened_after_crash_ = (header_.flags & page::kHeaderFlagCleanShutdown) == 0;
    sweep_interval_.store(options_.sweep_interval.value_or(header_.sweep_interval));
    header = header_;
  }
  if (header.dw_first != page::kDoublewriteFirst || header.dw_slots != page::DoublewriteSlots(ps)) {
    return absl::DataLossError(
        absl::StrCat(path, ": header names a doublewrite area of ", header.dw_slots,
                     " pages at page ", header.dw_first, "; format ", page::kFormatVersion, " has ",
                     page::DoublewriteSlots(ps), " at page ", page::kDoublewriteFirst));
  }
  if (*size % ps != 0) {
    // A torn extension at the end: whole pages before it are what counts.
  }
  const uint32_t file_pages = static_cast<uint32_t>(*size / ps);
  uint32_t page_count = std::max(header.page_count, file_pages);
  {
    // After a crash the last PIP may mark pages allocated that never reached the file (the PIP
    // was synced before them, e.g. by an eviction's careful-write sync). Count them, or they are
    // invisible to Validate (pages past page_count read as free) and leak once the file grows.
    const uint32_t per = page::PagesPerPip(ps);
    uint32_t k = 0;
    while (page::PipPageNo(k + 1, ps) < std::min(page_count, file_pages)) ++k;
    if (page::PipPageNo(k, ps) < file_pages) {
      absl::StatusOr<cache::PageRef> pip =
          cache_->Fetch(page::PipPageNo(k, ps), LatchMode::kShared);
      if (!pip.ok()) return pip.status();
      if (page::GetType(pip->data()) == page::PageType::kPip) {
        for (uint32_t p = (k + 1) * per; p-- > std::max(page_count, k * per);) {
          if (!page::PipIsFree(pip->data(), ps, p)) {
            page_count = p + 1;
            break;
          }
        }
      }
    }
  }
  space_ = std::make_unique<cache::PageSpace>(cache_.get(), page_count);
  txns_ = std::make_unique<txn::TxnManager>(cache_.get(), space_.get(),
                                            [this](uint64_t n) { return PersistNext(n); });
  if (absl::Status s = txns_->Load(header.first_tip, header.oit, header.next_txn); !s.ok()) {
    return s;
  }
  catalog_ = std::make_unique<record::Relation>(cache_.get(), space_.get(), txns_.get(), 0,
                                                header.catalog_pp);
  if (absl::Status s = catalog_->Load(); !s.ok()) return s;
  if (absl::Status s = LoadCatalog(); !s.ok()) return s;
  return WriteHeader(/*clean=*/false);
}

absl::Status DatabaseImpl::WriteHeader(bool clean) {
  util::MutexLock g(header_mu_);
  txn::TxnCounters c = txns_->counters();
  header_.next_txn = std::max(header_.next_txn, c.next);
  header_.oit = c.oit;
  header_.oat = c.oat;
  header_.ost = c.ost;
  header_.page_count = space_->page_count();
  header_.flags = clean ? page::kHeaderFlagCleanShutdown : 0;
  {
    absl::StatusOr<cache::PageRef> h = cache_->Fetch(0, LatchMode::kExclusive);
    if (!h.ok()) return h.status();
    if (page::GetType(h->data()) != page::PageType::kHeader) {
      page::InitPage(h->data(), options_.page_size, page::PageType::kHeader, 0);
    }
    page::WriteHeader(h->data(), header_);
    h->Mark(cache::kSystemMark);
  }
  const page::PageNo zero[] = {0};
  return cache_->FlushPages(zero);
}

absl::Status DatabaseImpl::PersistNext(uint64_t next) {
  {
    util::MutexLock g(header_mu_);
    header_.next_txn = next;
  }
  return WriteHeader(/*clean=*/false);
}

absl::Status DatabaseImpl::Close() {
  if (!open_.load()) return absl::OkStatus();
  StopAutoSweep();       // first: it runs transactions' work beside ours
  if (gc_) gc_->Stop();  // before open_ drops: a round in progress finishes its pages
  if (!open_.exchange(false)) return absl::OkStatus();
  // Transactions still active end rolled back: marked dead, none of their changes is ever
  // visible, and their versions are garbage. (A commit in doubt stays active: MarkDead refuses
  // it, and the next Open settles it.) Their objects only see "closed" from now on.
  for (uint64_t id : txns_->ActiveIds()) (void)txns_->MarkDead(id);
  // Nothing reads any more: what drops left goes now.
  ReapDropped(/*force=*/true);
  // Lines left to a collection that did not come; FlushAll writes what freeing them dirties.
  std::vector<TableState*> tables;
  {
    util::ReaderLock g(catalog_mu_);
    for (const auto& t : tables_) tables.push_back(t.get());
  }
  for (TableState* t : tables) {
    std::vector<record::Unlinked> later;
    t->relation->TakeLater(&later);
    if (!later.empty()) bg_errors_.Add(t->relation->FreeUnlinked(&later, cache::kNoOwnerMark));
  }
  absl::Status s = cache_->FlushAll();
  if (s.ok()) s = WriteHeader(/*clean=*/true);
  if (s.ok()) s = cache_->RetireDoublewrite();
  if (s.ok()) s = cache_->Sync();
  if (!s.ok()) cache_->DiscardAll();
  owner_lock_.reset();                // nothing more reaches the file from this handle
  if (s.ok()) s = bg_errors_.Take();  // the file is closed cleanly; the user still hears it
  return s;
}

void DatabaseImpl::ReclaimAfterCrash() {
  ember::ValidateOptions vo;
  vo.free_unreachable = true;
  absl::StatusOr<ValidationReport> rep = Validate(vo);
  const char* what = "reclaiming the pages leaked by the crash before this open";
  if (!rep.ok()) {
    bg_errors_.Add(
        absl::Status(rep.status().code(), absl::StrCat(what, ": ", rep.status().message())));
    return;
  }
  if (!rep->ok()) {  // Validate freed nothing: report what it found
    bg_errors_.Add(absl::DataLossError(absl::StrCat(what, ": Validate found ", rep->errors.size(),
                                                    " error(s), so nothing was ",
                                                    "freed; the first: ", rep->errors[0])));
    return;
  }
  pages_reclaimed_ = rep->freed_pages;
  blob_pages_reclaimed_ = rep->freed_blob_pages;
}

void DatabaseImpl::TEST_SimulateCrash() {
  StopAutoSweep();
  if (gc_) gc_->Stop();
  open_.store(false);
  cache_->DiscardAll();
  owner_lock_.reset();  // a dead process's lock goes with it
}

absl::Status DatabaseImpl::LoadCatalog() {
  record::ReadView all{0, UINT64_MAX, txns_.get()};
  std::vector<std::pair<uint64_t, std::string>> rows;
  const uint32_t n = catalog_->PageSequences();
  for (uint32_t seq = 0; seq < n; ++seq) {
    if (absl::Status s = catalog_->ReadPage(seq, all, &rows); !s.ok()) return s;
  }
  util::WriterLock g(catalog_mu_);
  std::vector<std::pair<uint64_t, CatalogRow>> index_rows;
  for (const auto& [rec, raw] : rows) {
    absl::StatusOr<CatalogRow> r = ParseCatalogRow(rec, raw);
    if (!r.ok()) return r.status();
    if (r->kind == kKindTable) {
      TableSchema ts;
      ts.name = r->name;
      if (!DecodeColumns(r->definition, &ts.columns)) {
        return absl::DataLossError(absl::StrCat("catalog: bad definition of table ", ts.name));
      }
      absl::StatusOr<TableState*> t = AddTableState(r->id, ts, r->page, rec);
      if (!t.ok()) return t.status();
    } else {
      index_rows.emplace_back(rec, std::move(*r));
    }
  }
  for (const auto& [rec, r] : index_rows) {
    IndexSchema is;
    is.name = r.name;
    is.table = r.table;
    is.unique = (r.flags & kIndexUnique) != 0;
    const bool inactive = (r.flags & kIndexInactive) != 0;
    if (!DecodeNames(r.definition, &is.columns)) {
      return absl::DataLossError(absl::StrCat("catalog: bad definition of index ", is.name));
    }
    absl::StatusOr<IndexState*> ix = AddIndexState(r.id, is, inactive ? 0 : r.page, rec);
    if (!ix.ok()) return ix.status();
    if (!inactive) {
      TableState* t = (*ix)->table;
      util::WriterLock rows(t->rows_mu);  // nothing else runs yet: for the analysis
      t->indexes.push_back(*ix);
    }
  }
  return absl::OkStatus();
}

}  // namespace db
}  // namespace ember
