// DatabaseImpl: create/open/close, the header page, the catalog of tables and indexes, DDL, stats.
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/blob/blob_codec.h"
#include "engine/blob/stored_blobs.h"
#include "engine/db/db_state.h"
#include "engine/db/garbage_collector.h"
#include "engine/db/transaction_impl.h"
#include "engine/io/owner_lock.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/pip.h"
#include "engine/record/record_format.h"
#include "engine/util/coding.h"

namespace ember {

uint32_t Table::id() const { return state_->id; }
const TableSchema& Table::schema() const { return state_->schema; }
const IndexSchema& Index::schema() const { return state_->schema; }

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

// Catalog rows (relation 0): kind, id, name, page, table, flags, definition.
constexpr int64_t kKindTable = 1;
constexpr int64_t kKindIndex = 2;
constexpr size_t kCatalogColumns = 7;
// Flags of an index row.
constexpr int64_t kIndexUnique = 1;
constexpr int64_t kIndexInactive = 2;

std::string EncodeColumns(const std::vector<Column>& cols) {
  std::string out;
  util::PutVarint64(&out, cols.size());
  for (const Column& c : cols) {
    util::PutVarint64(&out, c.name.size());
    out += c.name;
    out.push_back(static_cast<char>(c.type));
    // Flags: bit 0 nullable, bit 1 a zstd level byte follows (files without it still read).
    out.push_back(static_cast<char>((c.nullable ? 1 : 0) | (c.zstd_level > 0 ? 2 : 0)));
    if (c.zstd_level > 0) out.push_back(static_cast<char>(c.zstd_level));
  }
  return out;
}

bool DecodeColumns(std::string_view in, std::vector<Column>* cols) {
  uint64_t n;
  if (!util::GetVarint64(&in, &n) || n > 4096) return false;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len;
    if (!util::GetVarint64(&in, &len) || len + 2 > in.size()) return false;
    Column c;
    c.name = std::string(in.substr(0, len));
    in.remove_prefix(len);
    uint8_t t = static_cast<uint8_t>(in[0]);
    if (t < 1 || t > 5) return false;
    c.type = static_cast<ColumnType>(t);
    const uint8_t flags = static_cast<uint8_t>(in[1]);
    if (flags > 3) return false;
    c.nullable = (flags & 1) != 0;
    in.remove_prefix(2);
    if (flags & 2) {
      if (in.empty()) return false;
      c.zstd_level = static_cast<uint8_t>(in[0]);
      in.remove_prefix(1);
      if (c.zstd_level < 1 || c.zstd_level > blob::kMaxZstdLevel) return false;
    }
    cols->push_back(std::move(c));
  }
  return in.empty();
}

std::string EncodeNames(const std::vector<std::string>& names) {
  std::string out;
  util::PutVarint64(&out, names.size());
  for (const std::string& n : names) {
    util::PutVarint64(&out, n.size());
    out += n;
  }
  return out;
}

bool DecodeNames(std::string_view in, std::vector<std::string>* names) {
  uint64_t n;
  if (!util::GetVarint64(&in, &n) || n > 4096) return false;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len;
    if (!util::GetVarint64(&in, &len) || len > in.size()) return false;
    names->emplace_back(in.substr(0, len));
    in.remove_prefix(len);
  }
  return in.empty();
}

// A catalog row decoded and type-checked: a damaged or foreign row is DataLoss naming its
// record, never a wrong variant access.
struct CatalogRow {
  int64_t kind = 0;
  uint32_t id = 0;
  std::string name;
  page::PageNo page = 0;
  std::string table;  // of an index
  int64_t flags = 0;
  std::string definition;
};

absl::StatusOr<CatalogRow> ParseCatalogRow(uint64_t rec, std::string_view raw) {
  auto bad = [rec](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("catalog record ", rec, ": ", what));
  };
  Row r;
  if (absl::Status s = record::DecodeRow(raw, kCatalogColumns, &r); !s.ok()) {
    return bad(s.message());
  }
  const int64_t* kind = std::get_if<int64_t>(&r[0]);
  const int64_t* id = std::get_if<int64_t>(&r[1]);
  const std::string* name = std::get_if<std::string>(&r[2]);
  const int64_t* page = std::get_if<int64_t>(&r[3]);
  const std::string* table = std::get_if<std::string>(&r[4]);
  const int64_t* flags = std::get_if<int64_t>(&r[5]);
  const std::string* def = std::get_if<std::string>(&r[6]);
  if (!kind || !id || !name || !page || !table || !flags || !def) {
    return bad("a value of the wrong type (kind, id, name, page, table, flags, definition)");
  }
  if (*kind != kKindTable && *kind != kKindIndex) return bad(absl::StrCat("kind ", *kind));
  if (*id < 1 || *id > int64_t{UINT32_MAX}) return bad(absl::StrCat("relation id ", *id));
  // An inactive index (flags bit 1) has no tree: page 0.
  const bool inactive = *kind == kKindIndex && (*flags & kIndexInactive) != 0;
  if (*page < (inactive ? 0 : 1) || *page > int64_t{UINT32_MAX}) {
    return bad(absl::StrCat("page ", *page));
  }
  CatalogRow out;
  out.kind = *kind;
  out.id = static_cast<uint32_t>(*id);
  out.name = *name;
  out.page = static_cast<page::PageNo>(*page);
  out.table = *table;
  out.flags = *flags;
  out.definition = *def;
  return out;
}

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
        "parallel_workers ", o.parallel_workers, ", max_parallel_workers ",
        o.max_parallel_workers, ": need 1 <= parallel_workers <= max_parallel_workers <= 64"));
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

absl::StatusOr<std::unique_ptr<DatabaseImpl>> DatabaseImpl::OpenFile(
    std::unique_ptr<io::File> file, const Options& options, bool create) {
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

absl::Status DatabaseImpl::CheckOpen() const {
  if (!open_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(absl::StrCat("database ", file_->path(), " is closed"));
  }
  return absl::OkStatus();
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
    pip->Mark(0);
  }
  space_ = std::make_unique<cache::PageSpace>(cache_.get(), first_free);
  txns_ = std::make_unique<txn::TxnManager>(cache_.get(), space_.get(),
                                            [this](uint64_t n) { return PersistNext(n); });
  absl::StatusOr<page::PageNo> tip = txns_->CreateInitial();
  if (!tip.ok()) return tip.status();
  absl::StatusOr<page::PageNo> cat = record::Relation::Create(cache_.get(), space_.get(), 0, 0);
  if (!cat.ok()) return cat.status();
  {
    std::lock_guard<std::mutex> g(header_mu_);
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
  return file_->Sync();
}

absl::Status DatabaseImpl::OpenExisting() {
  const char* path = file_->path().c_str();
  absl::StatusOr<uint64_t> size = file_->Size();
  if (!size.ok()) return size.status();
  if (*size < page::kMinPageSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not an EmberDB database (", *size, " bytes, shorter than one page)"));
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
  if (options_.doublewrite) cache_->EnableDoublewrite(*dw);
  {
    std::lock_guard<std::mutex> g(header_mu_);  // before the latch, as in WriteHeader
    absl::StatusOr<cache::PageRef> h = cache_->Fetch(0, LatchMode::kShared);
    if (!h.ok()) return h.status();
    if (absl::Status s = page::ReadHeader(h->data(), &header_, path); !s.ok()) return s;
    opened_after_crash_ = (header_.flags & page::kHeaderFlagCleanShutdown) == 0;
    sweep_interval_.store(options_.sweep_interval.value_or(header_.sweep_interval));
  }
  if (header_.dw_first != page::kDoublewriteFirst ||
      header_.dw_slots != page::DoublewriteSlots(ps)) {
    return absl::DataLossError(absl::StrCat(path, ": header names a doublewrite area of ",
                                            header_.dw_slots, " pages at page ", header_.dw_first,
                                            "; format ", page::kFormatVersion, " has ",
                                            page::DoublewriteSlots(ps), " at page ",
                                            page::kDoublewriteFirst));
  }
  if (*size % ps != 0) {
    // A torn extension at the end: whole pages before it are what counts.
  }
  const uint32_t file_pages = static_cast<uint32_t>(*size / ps);
  uint32_t page_count = std::max(header_.page_count, file_pages);
  {
    // After a crash the last PIP may mark pages allocated that never reached the file (the PIP
    // was synced before them, e.g. by an eviction's careful-write sync). Count them, or they are
    // invisible to Validate (pages past page_count read as free) and leak once the file grows.
    const uint32_t per = page::PagesPerPip(ps);
    uint32_t k = 0;
    while (page::PipPageNo(k + 1, ps) < std::min(page_count, file_pages)) ++k;
    if (page::PipPageNo(k, ps) < file_pages) {
      absl::StatusOr<cache::PageRef> pip = cache_->Fetch(page::PipPageNo(k, ps), LatchMode::kShared);
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
  if (absl::Status s = txns_->Load(header_.first_tip, header_.oit, header_.next_txn); !s.ok()) {
    return s;
  }
  catalog_ = std::make_unique<record::Relation>(cache_.get(), space_.get(), txns_.get(), 0,
                                                header_.catalog_pp);
  if (absl::Status s = catalog_->Load(); !s.ok()) return s;
  if (absl::Status s = LoadCatalog(); !s.ok()) return s;
  return WriteHeader(/*clean=*/false);
}

absl::Status DatabaseImpl::WriteHeader(bool clean) {
  std::lock_guard<std::mutex> g(header_mu_);
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
    h->Mark(0);
  }
  const page::PageNo zero[] = {0};
  return cache_->FlushPages(zero);
}

absl::Status DatabaseImpl::PersistNext(uint64_t next) {
  {
    std::lock_guard<std::mutex> g(header_mu_);
    header_.next_txn = next;
  }
  return WriteHeader(/*clean=*/false);
}

absl::Status DatabaseImpl::Close() {
  if (!open_.load()) return absl::OkStatus();
  StopAutoSweep();  // first: it runs transactions' work beside ours
  if (gc_) gc_->Stop();  // before open_ drops: a round in progress finishes its pages
  if (!open_.exchange(false)) return absl::OkStatus();
  // Transactions still active end rolled back: marked dead, none of their changes is ever
  // visible, and their versions are garbage. (A commit in doubt stays active: MarkDead refuses
  // it, and the next Open settles it.) Their objects only see "closed" from now on.
  for (uint64_t id : txns_->ActiveIds()) (void)txns_->MarkDead(id);
  // Nothing reads any more: what drops left goes now.
  ReapDropped(/*force=*/true);
  // Lines left to a collection that did not come; FlushAll writes what freeing them dirties.
  for (const auto& t : tables_) {
    std::vector<record::Unlinked> later;
    t->relation->TakeLater(&later);
    if (!later.empty()) bg_errors_.Add(t->relation->FreeUnlinked(&later, kGcMarkTxn));
  }
  absl::Status s = cache_->FlushAll();
  if (s.ok()) s = WriteHeader(/*clean=*/true);
  if (s.ok()) s = cache_->RetireDoublewrite();
  if (s.ok()) s = file_->Sync();
  if (!s.ok()) cache_->DiscardAll();
  owner_lock_.reset();  // nothing more reaches the file from this handle
  if (s.ok()) s = bg_errors_.Take();  // the file is closed cleanly; the user still hears it
  return s;
}

std::unique_ptr<txn::UndoLog> DatabaseImpl::TakeUndoLog() {
  {
    std::lock_guard<std::mutex> g(undo_pool_mu_);
    if (!undo_pool_.empty()) {
      std::unique_ptr<txn::UndoLog> log = std::move(undo_pool_.back());
      undo_pool_.pop_back();
      return log;
    }
  }
  return std::make_unique<txn::UndoLog>(temp_.get(), options_.undo_memory_limit);
}

void DatabaseImpl::ReturnUndoLog(std::unique_ptr<txn::UndoLog> log) {
  if (log == nullptr || log->Reset() > kUndoPoolKeep) return;  // a huge one gives its memory back
  std::lock_guard<std::mutex> g(undo_pool_mu_);
  if (undo_pool_.size() < kUndoPoolLogs) undo_pool_.push_back(std::move(log));
}

void DatabaseImpl::ReclaimAfterCrash() {
  ember::ValidateOptions vo;
  vo.free_unreachable = true;
  absl::StatusOr<ValidationReport> rep = Validate(vo);
  const char* what = "reclaiming the pages leaked by the crash before this open";
  if (!rep.ok()) {
    bg_errors_.Add(absl::Status(rep.status().code(),
                                absl::StrCat(what, ": ", rep.status().message())));
    return;
  }
  if (!rep->ok()) {  // Validate freed nothing: report what it found
    bg_errors_.Add(absl::DataLossError(
        absl::StrCat(what, ": Validate found ", rep->errors.size(), " error(s), so nothing was ",
                     "freed; the first: ", rep->errors[0])));
    return;
  }
  pages_reclaimed_ = rep->freed_pages;
  blob_pages_reclaimed_ = rep->freed_blob_pages;
}

void DatabaseImpl::SimulateCrash() {
  StopAutoSweep();
  if (gc_) gc_->Stop();
  open_.store(false);
  cache_->DiscardAll();
  owner_lock_.reset();  // a dead process's lock goes with it
}

// ---------------------------------------------------------------- catalog

absl::StatusOr<TableState*> DatabaseImpl::AddTableState(uint32_t id, const TableSchema& schema,
                                                        page::PageNo first_pp,
                                                        uint64_t catalog_rec) {
  auto t = std::make_unique<TableState>();
  t->id = id;
  t->catalog_rec = catalog_rec;
  t->schema = schema;
  t->relation =
      std::make_unique<record::Relation>(cache_.get(), space_.get(), txns_.get(), id, first_pp);
  // A damaged pointer-page chain makes only this table unusable: the relation keeps the
  // DataLoss (Relation::damage) for every call that needs its pages, and the rest of the
  // database opens. Errors of other codes still fail the open.
  if (absl::Status s = t->relation->Load(); !s.ok() && !absl::IsDataLoss(s)) return s;
  record::Relation* rel = t->relation.get();
  rel->SetBlobFreer([this, rel](std::span<const uint64_t> ids, uint64_t mark_txn) {
    return blob::FreeStoredBlobs(cache_.get(), space_.get(), rel, ids, mark_txn);
  });
  TableState* raw = t.get();
  table_by_name_[schema.name] = raw;
  tables_.push_back(std::move(t));
  next_relation_id_ = std::max(next_relation_id_, id + 1);
  return raw;
}

absl::StatusOr<IndexState*> DatabaseImpl::AddIndexState(uint32_t id, const IndexSchema& schema,
                                                        page::PageNo root,
                                                        uint64_t catalog_rec) {
  auto it = table_by_name_.find(schema.table);
  if (it == table_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("index ", schema.name, ": no table ", schema.table));
  }
  auto ix = std::make_unique<IndexState>();
  ix->id = id;
  ix->catalog_rec = catalog_rec;
  ix->schema = schema;
  ix->table = it->second;
  for (const std::string& col : schema.columns) {
    size_t pos = 0;
    const auto& cols = ix->table->schema.columns;
    while (pos < cols.size() && cols[pos].name != col) ++pos;
    if (pos == cols.size()) {
      return absl::NotFoundError(
          absl::StrCat("index ", schema.name, ": table ", schema.table, " has no column ", col));
    }
    ix->key_columns.push_back(pos);
  }
  if (ix->key_columns.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("index ", schema.name, " has no columns"));
  }
  if (root != 0) {
    ix->SetTree(std::make_unique<index::BTree>(cache_.get(), space_.get(), root));
  } else {
    ix->active.store(false);
  }
  IndexState* raw = ix.get();
  index_by_name_[schema.name] = raw;
  indexes_.push_back(std::move(ix));
  next_relation_id_ = std::max(next_relation_id_, id + 1);
  return raw;
}

absl::Status DatabaseImpl::LoadCatalog() {
  record::ReadView all{0, UINT64_MAX, txns_.get()};
  std::vector<std::pair<uint64_t, std::string>> rows;
  const uint32_t n = catalog_->PageSequences();
  for (uint32_t seq = 0; seq < n; ++seq) {
    if (absl::Status s = catalog_->ReadPage(seq, all, &rows); !s.ok()) return s;
  }
  std::unique_lock<std::shared_mutex> g(catalog_mu_);
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
    if (!inactive) ix.value()->table->indexes.push_back(*ix);
  }
  return absl::OkStatus();
}

absl::StatusOr<Table> DatabaseImpl::CreateTable(const TableSchema& schema) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (schema.name.empty() || schema.columns.empty()) {
    return absl::InvalidArgumentError("a table needs a name and at least one column");
  }
  for (size_t i = 0; i < schema.columns.size(); ++i) {
    const Column& c = schema.columns[i];
    if (c.zstd_level < 0 || c.zstd_level > blob::kMaxZstdLevel) {
      return absl::InvalidArgumentError(absl::StrCat("table ", schema.name, ": column ", c.name,
                                                     ": zstd_level ", c.zstd_level,
                                                     " is not 0 (off) or 1..",
                                                     blob::kMaxZstdLevel));
    }
    if (c.zstd_level > 0 && c.type != ColumnType::kBlob && c.type != ColumnType::kBytes &&
        c.type != ColumnType::kString) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", schema.name, ": column ", c.name,
          ": only BLOB, string and bytes columns can be compressed (zstd_level)"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (schema.columns[i].name == schema.columns[j].name) {
        return absl::InvalidArgumentError(absl::StrCat("table ", schema.name, ": column ",
                                                       schema.columns[i].name, " given twice"));
      }
    }
  }
  std::lock_guard<std::mutex> ddl(ddl_mu_);
  uint32_t id;
  {
    std::shared_lock<std::shared_mutex> g(catalog_mu_);
    if (table_by_name_.contains(schema.name)) {
      return absl::AlreadyExistsError(absl::StrCat("table ", schema.name, " already exists"));
    }
    id = next_relation_id_;
  }
  absl::StatusOr<txn::TxnManager::Started> t = txns_->Begin();
  if (!t.ok()) return t.status();
  absl::StatusOr<page::PageNo> pp = record::Relation::Create(cache_.get(), space_.get(), t->id, id);
  absl::Status s = pp.status();
  uint64_t rec = 0;
  if (s.ok()) {
    Row row{int64_t{kKindTable}, int64_t{id}, schema.name, int64_t{*pp}, std::string(),
            int64_t{0}, EncodeColumns(schema.columns)};
    std::string raw;
    record::EncodeRow(row, &raw);
    absl::StatusOr<uint64_t> r = catalog_->Insert(t->id, raw);
    s = r.status();
    if (r.ok()) rec = *r;
  }
  if (s.ok()) s = txns_->Commit(t->id);
  if (!s.ok()) {
    (void)txns_->MarkDead(t->id);
    return s;
  }
  std::unique_lock<std::shared_mutex> g(catalog_mu_);
  absl::StatusOr<TableState*> ts = AddTableState(id, schema, *pp, rec);
  if (!ts.ok()) return ts.status();
  // (Committed: the table exists, damaged from the start, as a reopen would find it.)
  if (const absl::Status& d = (*ts)->relation->damage(); !d.ok()) return d;
  return (*ts)->handle();
}

absl::StatusOr<Index> DatabaseImpl::CreateIndex(const IndexSchema& schema,
                                                const IndexBuildOptions& build) {
  return DefineIndex(schema, build, /*active=*/true);
}

absl::StatusOr<Index> DatabaseImpl::CreateInactiveIndex(const IndexSchema& schema) {
  return DefineIndex(schema, IndexBuildOptions{}, /*active=*/false);
}

absl::StatusOr<Index> DatabaseImpl::DefineIndex(const IndexSchema& schema,
                                                const IndexBuildOptions& build, bool active) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (build.workers < 0 || build.fill_percent < 10 || build.fill_percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("index ", schema.name, ": build workers ", build.workers, " (0 or more), ",
                     "fill_percent ", build.fill_percent, " (10..100)"));
  }
  std::lock_guard<std::mutex> ddl(ddl_mu_);
  absl::StatusOr<txn::TxnManager::Started> t = txns_->Begin();
  if (!t.ok()) return t.status();
  IndexState* ix = nullptr;
  {
    std::unique_lock<std::shared_mutex> g(catalog_mu_);
    absl::Status s;
    if (index_by_name_.contains(schema.name)) {
      s = absl::AlreadyExistsError(absl::StrCat("index ", schema.name, " already exists"));
    }
    const uint32_t id = next_relation_id_;
    absl::StatusOr<page::PageNo> root =
        !s.ok()   ? absl::StatusOr<page::PageNo>(s)
        : !active ? absl::StatusOr<page::PageNo>(0)  // no tree: AddIndexState makes it inactive
                  : index::BTree::Create(cache_.get(), space_.get(), t->id, 0,
                                         static_cast<uint16_t>(id));
    absl::StatusOr<IndexState*> added = root.ok() ? AddIndexState(id, schema, *root, 0)
                                                  : absl::StatusOr<IndexState*>(root.status());
    if (!added.ok()) {
      (void)txns_->MarkDead(t->id);
      return added.status();
    }
    ix = *added;
    ix->ready.store(false);  // GetIndex does not find it until it is built
  }
  TableState* table = ix->table;
  IndexStats stats;
  // The catalog row, committed: the index exists from then on.
  auto record = [&]() -> absl::Status {
    absl::StatusOr<uint64_t> r = catalog_->Insert(t->id, IndexCatalogRow(*ix));
    if (!r.ok()) return r.status();
    ix->catalog_rec = *r;
    return txns_->Commit(t->id);
  };
  absl::Status s;
  if (!active) {
    // Writers of the table do not maintain an inactive index: no rows lock, no build.
    s = record();
    if (s.ok()) {
      ix->ready.store(true);
      return ix->handle();
    }
  } else {
    // Built under the table's rows lock: writers of the table wait (each change of its rows
    // updates its indexes, and the new one is not there yet); readers and other tables do not.
    std::unique_lock<std::shared_mutex> rows(table->rows_mu);
    s = BuildIndex(ix, t->id, build, &stats);
    if (s.ok()) s = record();
    if (s.ok()) {
      table->indexes.push_back(ix);
      {
        std::lock_guard<std::mutex> sg(ix->stats_mu);
        ix->stats = stats;
      }
      ix->ready.store(true);
      return ix->handle();
    }
  }
  // (The rows lock is let go first: writers take the catalog lock before it.) Nothing on disk
  // links to the root (the catalog row, if written, is the dead transaction's).
  (void)txns_->MarkDead(t->id);
  if (active) (void)space_->Free(ix->btree()->root(), t->id);
  std::unique_lock<std::shared_mutex> g(catalog_mu_);
  index_by_name_.erase(schema.name);
  auto it = std::find_if(indexes_.begin(), indexes_.end(),
                         [&](const auto& p) { return p.get() == ix; });
  if (it != indexes_.end()) indexes_.erase(it);
  return s;
}

std::string DatabaseImpl::IndexCatalogRow(const IndexState& ix) const {
  const index::BTree* tree = ix.btree();
  const bool inactive = tree == nullptr;
  Row row{int64_t{kKindIndex}, int64_t{ix.id}, ix.schema.name,
          int64_t{inactive ? 0 : tree->root()}, ix.schema.table,
          int64_t{(ix.schema.unique ? kIndexUnique : 0) | (inactive ? kIndexInactive : 0)},
          EncodeNames(ix.schema.columns)};
  std::string raw;
  record::EncodeRow(row, &raw);
  return raw;
}

absl::StatusOr<IndexStats> DatabaseImpl::GetIndexStats(const Index& index) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (!index) return absl::InvalidArgumentError("invalid index handle");
  IndexState* ix = IndexState::From(index);
  if (ix->drop_txn.load() != 0 &&
      txn::IsCommittedCn(txns_->StateOf(ix->drop_txn.load()))) {
    return absl::NotFoundError(absl::StrCat("index ", ix->schema.name, " was dropped"));
  }
  std::lock_guard<std::mutex> g(ix->stats_mu);
  return ix->stats;
}

absl::StatusOr<Table> DatabaseImpl::GetTable(std::string_view name) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  std::shared_lock<std::shared_mutex> g(catalog_mu_);
  auto it = table_by_name_.find(absl::string_view(name.data(), name.size()));
  if (it == table_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("no table ", std::string(name)));
  }
  return it->second->handle();
}

absl::StatusOr<Index> DatabaseImpl::GetIndex(std::string_view name) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  std::shared_lock<std::shared_mutex> g(catalog_mu_);
  auto it = index_by_name_.find(absl::string_view(name.data(), name.size()));
  if (it == index_by_name_.end() || !it->second->ready.load()) {
    return absl::NotFoundError(absl::StrCat("no index ", std::string(name)));
  }
  return it->second->handle();
}

std::vector<std::string> DatabaseImpl::TableNames() {
  std::vector<std::string> out;
  if (!CheckOpen().ok()) return out;  // a closed database has no tables to offer
  std::shared_lock<std::shared_mutex> g(catalog_mu_);
  for (const auto& t : tables_) out.push_back(t->schema.name);
  return out;
}

DatabaseStats DatabaseImpl::stats() {
  DatabaseStats s;
  util::PageCounters c = cache_->counters();
  s.pages = {c.fetches, c.marks, c.reads, c.writes, c.dw_writes, c.cycle_writes};
  txn::TxnCounters t = txns_->counters();
  s.next_transaction = t.next;
  s.oldest_interesting = t.oit;
  s.oldest_active = t.oat;
  s.oldest_snapshot = t.ost;
  s.commits = t.commits;
  s.group_commit_flushes = t.group_flushes;
  s.page_count = space_->page_count();
  s.pages_repaired_at_open = repaired_pages_.size();
  s.torn_pages_repaired_at_open = torn_pages_repaired_;
  io::TempSpaceStats ts = temp_->stats();
  s.temp_bytes_in_memory = ts.bytes_in_memory;
  s.temp_bytes_on_disk = ts.bytes_on_disk;
  s.temp_spills = ts.spills;
  s.gc_versions_removed = gc_versions_.load(std::memory_order_relaxed);
  s.gc_records_removed = gc_records_.load(std::memory_order_relaxed);
  s.gc_index_entries_removed = gc_keys_.load(std::memory_order_relaxed);
  s.gc_pages_queued = gc_ ? gc_->queued() : 0;
  s.sweeps = sweeps_.load(std::memory_order_relaxed);
  s.automatic_sweeps = auto_sweeps_.load(std::memory_order_relaxed);
  s.sweep_interval = sweep_interval_.load(std::memory_order_relaxed);
  s.background_errors = bg_errors_.count();
  s.last_background_error = bg_errors_.last();
  s.opened_after_crash = opened_after_crash_;
  s.pages_reclaimed_at_open = pages_reclaimed_;
  s.blob_pages_reclaimed_at_open = blob_pages_reclaimed_;
  return s;
}

record::Relation* DatabaseImpl::RelationById(uint32_t id) {
  if (id == 0) return catalog_.get();
  std::shared_lock<std::shared_mutex> g(catalog_mu_);
  for (const auto& t : tables_) {
    if (t->id == id) return t->relation.get();
  }
  // A BLOB of a dropped table, read by a snapshot older than the drop.
  for (const auto& t : dropped_tables_) {
    if (t->id == id) return t->relation.get();
  }
  return nullptr;
}

uint32_t DatabaseImpl::max_key_size() const {
  return internal::MaxIndexKey(options_.page_size);
}

absl::StatusOr<std::unique_ptr<Transaction>> DatabaseImpl::Begin(const TransactionOptions& o) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  absl::StatusOr<txn::TxnManager::Started> t = txns_->Begin();
  if (!t.ok()) return t.status();
  MaybeStartAutoSweep(t->id);
  return std::unique_ptr<Transaction>(new TransactionImpl(this, o, t->id, t->snapshot));
}

}  // namespace db
}  // namespace ember
