// Database::Backup: one snapshot of every table written to a backup file (backup_format.h) on
// the worker pool. The work is cut into chunks of data pages; each worker reads its chunk's
// visible rows under the snapshot of a read-only transaction, encodes them portably, compresses
// them into frames and appends each frame to the file whole (frames of different chunks
// interleave; the restore needs no order among them). A BLOB too long for a row frame goes
// ahead of its row in pieces of its own frames, written by the same worker before the rows
// frame naming it, so a restore always meets the pieces first.
#include <algorithm>
#include <atomic>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/backup/backup_format.h"
#include "engine/blob/txn_blobs.h"
#include "engine/db/db_state.h"
#include "engine/db/transaction_impl.h"
#include "engine/record/record_format.h"

namespace ember::db {
namespace {

using internal::TableState;

// Data pages per work item: as the sweep's, a read-ahead extent.
constexpr uint32_t kChunkPages = 32;

struct Item {
  uint32_t table = 0;  // position in the backup's table list
  uint32_t first = 0, end = 0;
};

struct Totals {
  std::atomic<uint64_t> blobs{0}, blob_bytes{0}, raw_bytes{0}, pages{0};
};

// One worker's encoder: rows of the current chunk into a rows frame, BLOB pieces straight to
// the file.
class ChunkWriter {
 public:
  ChunkWriter(backup::FrameFile* file, int level, blob::TxnBlobs* blobs,
              std::atomic<uint64_t>* blob_numbers, Totals* totals)
      : file_(file), level_(level), blobs_(blobs), blob_numbers_(blob_numbers), totals_(totals) {}

  absl::Status Row(uint32_t table_no, const TableState& t, const ember::Row& row) {
    const std::vector<Column>& cols = t.schema.columns;
    for (size_t i = 0; i < cols.size(); ++i) {
      const Value& v = row[i];
      if (IsNull(v)) {
        backup::AppendNull(&body_);
      } else if (const int64_t* x = std::get_if<int64_t>(&v)) {
        backup::AppendInt(&body_, *x);
      } else if (const double* d = std::get_if<double>(&v)) {
        backup::AppendDouble(&body_, *d);
      } else if (const std::string* s = std::get_if<std::string>(&v)) {
        backup::AppendString(&body_, *s);
      } else if (const BlobId* b = std::get_if<BlobId>(&v)) {
        if (absl::Status st = Blob(table_no, i, cols[i].type, b->value); !st.ok()) {
          return absl::Status(st.code(), absl::StrCat("table ", t.schema.name, ", column ",
                                                      cols[i].name, ": ", st.message()));
        }
      }
    }
    ++rows_;
    if (body_.size() >= backup::kFrameTarget) return Flush(table_no);
    return absl::OkStatus();
  }

  // Writes the rows gathered so far as one frame.
  absl::Status Flush(uint32_t table_no) {
    if (rows_ == 0) return absl::OkStatus();
    std::string raw;
    raw.reserve(body_.size() + 12);
    util::PutVarint64(&raw, table_no);
    util::PutVarint64(&raw, rows_);
    raw += body_;
    totals_->raw_bytes.fetch_add(raw.size(), std::memory_order_relaxed);
    absl::StatusOr<backup::EncodedFrame> f = backup::EncodeFrame(
        backup::FrameType::kRows, names_pieces_ ? backup::kFrameNamesPieces : 0, raw, level_);
    body_.clear();
    rows_ = 0;
    names_pieces_ = false;
    if (!f.ok()) return f.status();
    return file_->Write(std::move(*f));
  }

 private:
  // A BLOB id in a BLOB column, or a string/bytes value stored out of line.
  absl::Status Blob(uint32_t table_no, size_t column, ColumnType type, uint64_t id) {
    if (id == 0) {  // the empty BLOB
      backup::AppendBlobBytes(&body_, {});
      return absl::OkStatus();
    }
    absl::StatusOr<uint64_t> len = blobs_->Length(id);
    if (!len.ok()) return len.status();
    if (*len == 0 && type == ColumnType::kBlob) {
      // A BLOB record of no bytes (earlier builds stored those) is the empty BLOB.
      backup::AppendBlobBytes(&body_, {});
      return absl::OkStatus();
    }
    if (type == ColumnType::kBlob) {
      totals_->blobs.fetch_add(1, std::memory_order_relaxed);
      totals_->blob_bytes.fetch_add(*len, std::memory_order_relaxed);
    }
    if (type != ColumnType::kBlob || *len <= backup::kFrameTarget) {
      buf_.resize(*len);
      if (absl::Status s = blobs_->Read(id, 0, buf_.data(), buf_.size()); !s.ok()) return s;
      if (type == ColumnType::kBlob) {
        backup::AppendBlobBytes(&body_, buf_);
      } else {
        backup::AppendString(&body_, buf_);
      }
      return absl::OkStatus();
    }
    backup::BlobPiece p;
    p.blob_no = blob_numbers_->fetch_add(1, std::memory_order_relaxed);
    p.table = table_no;
    p.column = column;
    p.total = *len;
    for (p.offset = 0; p.offset < *len;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(backup::kFrameTarget, *len - p.offset));
      std::string raw;
      backup::EncodeBlobPieceHeader(p, &raw);
      const size_t at = raw.size();
      raw.resize(at + n);
      if (absl::Status s = blobs_->Read(id, p.offset, raw.data() + at, n); !s.ok()) return s;
      totals_->raw_bytes.fetch_add(raw.size(), std::memory_order_relaxed);
      absl::StatusOr<backup::EncodedFrame> f =
          backup::EncodeFrame(backup::FrameType::kBlobPiece, 0, raw, level_);
      if (!f.ok()) return f.status();
      if (absl::Status s = file_->Write(std::move(*f)); !s.ok()) return s;
      p.offset += n;
    }
    backup::AppendBlobPieces(&body_, p.blob_no);
    names_pieces_ = true;
    return absl::OkStatus();
  }

  backup::FrameFile* file_;
  const int level_;
  blob::TxnBlobs* blobs_;
  std::atomic<uint64_t>* blob_numbers_;
  Totals* totals_;
  std::string body_, buf_;
  uint64_t rows_ = 0;
  bool names_pieces_ = false;
};

}  // namespace

absl::StatusOr<BackupResult> DatabaseImpl::Backup(const std::string& path,
                                                  const BackupOptions& options) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (options.zstd_level < 1 || options.zstd_level > 19) {
    return absl::InvalidArgumentError(
        absl::StrCat("backup zstd_level ", options.zstd_level, " is not in 1..19"));
  }
  const auto start = std::chrono::steady_clock::now();
  // The snapshot and the definitions it goes with: no DDL between them.
  std::unique_ptr<Transaction> txn;
  backup::Catalog catalog;
  std::vector<TableState*> tables;
  {
    std::lock_guard<std::mutex> ddl(ddl_mu_);
    TransactionOptions to;
    to.read_only = true;
    absl::StatusOr<std::unique_ptr<Transaction>> t = Begin(to);
    if (!t.ok()) return t.status();
    txn = std::move(*t);
    std::shared_lock<std::shared_mutex> g(catalog_mu_);
    for (const auto& t : tables_) {
      if (t->drop_txn.load(std::memory_order_acquire) != 0) continue;
      tables.push_back(t.get());
      catalog.tables.push_back(t->schema);
    }
    for (const auto& ix : indexes_) {
      if (ix->drop_txn.load(std::memory_order_acquire) != 0 ||
          !ix->ready.load(std::memory_order_acquire)) {
        continue;
      }
      catalog.indexes.push_back({ix->schema, ix->active.load(std::memory_order_acquire)});
    }
  }
  auto* ti = static_cast<TransactionImpl*>(txn.get());
  const record::ReadView view = ti->View();

  std::vector<Item> items;
  for (uint32_t i = 0; i < tables.size(); ++i) {
    // A table whose pages are unknown (a damaged pointer-page chain) would be backed up empty:
    // the whole backup fails, before anything is written at `path`.
    if (absl::Status d = tables[i]->DamageFor("backup"); !d.ok()) return d;
    const uint32_t n = tables[i]->relation->PageSequences();
    for (uint32_t first = 0; first < n; first += kChunkPages) {
      items.push_back({i, first, std::min(n, first + kChunkPages)});
    }
  }
  uint64_t total_pages = 0;
  for (const Item& it : items) total_pages += it.end - it.first;

  backup::FileHeader fh;
  fh.snapshot = txn->id();
  fh.source_page_size = cache_->page_size();
  absl::StatusOr<std::unique_ptr<backup::FrameFile>> file = backup::FrameFile::Create(path, fh);
  if (!file.ok()) return file.status();
  backup::FrameFile* out = file->get();
  auto fail = [&](const absl::Status& s) {
    out->Discard();
    return s;
  };

  Totals totals;
  {
    const std::string raw = backup::EncodeCatalog(catalog);
    totals.raw_bytes += raw.size();
    absl::StatusOr<backup::EncodedFrame> f =
        backup::EncodeFrame(backup::FrameType::kCatalog, 0, raw, options.zstd_level);
    if (!f.ok()) return fail(f.status());
    if (absl::Status s = out->Write(std::move(*f)); !s.ok()) return fail(s);
  }

  const int workers =
      workers_->WorkersFor(options.workers > 0 ? options.workers : options_.parallel_workers);
  std::vector<std::unique_ptr<blob::TxnBlobs>> blobs(static_cast<size_t>(workers));
  std::vector<std::unique_ptr<ChunkWriter>> writers(static_cast<size_t>(workers));
  std::vector<uint64_t> table_rows(tables.size());
  std::mutex table_rows_mu;
  std::atomic<uint64_t> blob_numbers{0}, pages_done{0};
  DatabaseImpl* db = this;
  absl::Status run = workers_->Run(workers, items.size(), [&](size_t i, const worker::TaskContext& ctx) {
    const size_t w = static_cast<size_t>(ctx.worker);
    if (!writers[w]) {
      blobs[w] = std::make_unique<blob::TxnBlobs>(
          cache_.get(), space_.get(), temp_.get(), options_.blob_temp_space, txn->id(),
          [db](uint32_t rel) { return db->RelationById(rel); }, &next_temp_blob_);
      writers[w] = std::make_unique<ChunkWriter>(out, options.zstd_level, blobs[w].get(),
                                                 &blob_numbers, &totals);
    }
    if (absl::Status s = CheckOpen(); !s.ok()) return s;
    const Item& it = items[i];
    TableState* t = tables[it.table];
    ChunkWriter& cw = *writers[w];
    const size_t ncols = t->schema.columns.size();
    std::vector<ember::Row> rows;
    size_t nrows = 0;
    uint64_t chunk_rows = 0;
    std::shared_lock<std::shared_mutex> g(catalog_mu_);
    t->relation->PrefetchPages(it.first, it.end - it.first);
    for (uint32_t seq = it.first; seq < it.end; ++seq) {
      if (ctx.cancelled()) return absl::CancelledError("backup cancelled");
      nrows = 0;
      // Rows are decoded with the page latched; their BLOBs are read once it is released.
      absl::Status s = t->relation->VisitPage(seq, view, [&](uint64_t rec, std::string_view raw) {
        if (nrows == rows.size()) rows.emplace_back();
        if (absl::Status d = record::DecodeRow(raw, ncols, &rows[nrows]); !d.ok()) {
          return absl::DataLossError(
              absl::StrCat("table ", t->schema.name, " record ", rec, ": ", d.message()));
        }
        ++nrows;
        return absl::OkStatus();
      });
      if (!s.ok()) return s;
      for (size_t r = 0; r < nrows; ++r) {
        if (absl::Status e = cw.Row(it.table, *t, rows[r]); !e.ok()) return e;
      }
      chunk_rows += nrows;
    }
    if (absl::Status s = cw.Flush(it.table); !s.ok()) return s;
    totals.pages.fetch_add(it.end - it.first, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> l(table_rows_mu);
      table_rows[it.table] += chunk_rows;
    }
    const uint64_t done = pages_done.fetch_add(it.end - it.first) + (it.end - it.first);
    if (ctx.worker == 0 && options.progress) options.progress(done, total_pages);
    return absl::OkStatus();
  });
  if (!run.ok()) return fail(run);

  backup::EndTotals end;
  end.frames = out->frames();
  end.rows = table_rows;
  end.blobs = totals.blobs.load();
  end.blob_bytes = totals.blob_bytes.load();
  {
    absl::StatusOr<backup::EncodedFrame> f =
        backup::EncodeFrame(backup::FrameType::kEnd, 0, backup::EncodeEnd(end), 0);
    if (!f.ok()) return fail(f.status());
    if (absl::Status s = out->Write(std::move(*f)); !s.ok()) return fail(s);
  }
  absl::StatusOr<uint64_t> bytes = out->Finish();
  if (!bytes.ok()) return fail(bytes.status());
  if (options.progress) options.progress(total_pages, total_pages);

  BackupResult r;
  r.snapshot = txn->id();
  r.tables = tables.size();
  r.indexes = catalog.indexes.size();
  for (uint64_t n : table_rows) r.rows += n;
  r.blobs = totals.blobs.load();
  r.blob_bytes = totals.blob_bytes.load();
  r.raw_bytes = totals.raw_bytes.load();
  r.bytes = *bytes;
  r.pages = totals.pages.load();
  r.workers = workers;
  if (absl::Status s = txn->Commit(); !s.ok()) return s;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace ember::db
