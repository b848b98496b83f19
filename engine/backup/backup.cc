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
#include "engine/db/backup_source.h"
#include "engine/record/record_format.h"

namespace ember::db {
namespace {

using internal::TableState;

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
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(backup::kFrameTarget, *len - p.offset));
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

// What the workers share while they write the chunks of one backup.
struct Job {
  BackupSource* db;
  const BackupSource::Snapshot* snap;
  const BackupOptions* options;
  backup::FrameFile* out;
  std::vector<worker::Chunk> chunks;  // Chunk::part: position in snap->tables
  uint64_t total_pages = 0;
  Totals totals;
  std::atomic<uint64_t> blob_numbers{0}, pages_done{0};
};

// One worker's: its BLOB reader and encoder, and the rows it wrote per table.
struct WorkerState {
  std::unique_ptr<blob::TxnBlobs> blobs;
  std::unique_ptr<ChunkWriter> writer;
  std::vector<uint64_t> table_rows;
};

// Writes the visible rows of one chunk of data pages as frames.
absl::Status WriteChunk(Job& job, const worker::Chunk& it, const worker::TaskContext& ctx,
                        WorkerState& ws) {
  const BackupSource::Snapshot& snap = *job.snap;
  if (!ws.writer) {
    ws.blobs = job.db->SnapshotBlobs(snap.txn->id());
    ws.writer = std::make_unique<ChunkWriter>(job.out, job.options->zstd_level, ws.blobs.get(),
                                              &job.blob_numbers, &job.totals);
    ws.table_rows.assign(snap.tables.size(), 0);
  }
  if (absl::Status s = job.db->CheckOpen(); !s.ok()) return s;
  TableState* t = snap.tables[it.part];
  const size_t ncols = t->schema.columns.size();
  std::vector<ember::Row> rows;
  util::ReaderLock g(job.db->catalog_mutex());
  t->relation->PrefetchPages(it.first, it.end - it.first);
  for (uint32_t seq = it.first; seq < it.end; ++seq) {
    if (ctx.cancelled()) return absl::CancelledError("backup cancelled");
    size_t nrows = 0;
    // Rows are decoded with the page latched; their BLOBs are read once it is released.
    absl::Status s =
        t->relation->VisitPage(seq, snap.view, [&](uint64_t rec, std::string_view raw) {
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
      if (absl::Status e = ws.writer->Row(it.part, *t, rows[r]); !e.ok()) return e;
    }
    ws.table_rows[it.part] += nrows;
  }
  if (absl::Status s = ws.writer->Flush(it.part); !s.ok()) return s;
  const uint32_t pages = it.end - it.first;
  job.totals.pages.fetch_add(pages, std::memory_order_relaxed);
  const uint64_t done = job.pages_done.fetch_add(pages) + pages;
  if (ctx.worker == 0 && job.options->progress) job.options->progress(done, job.total_pages);
  return absl::OkStatus();
}

absl::Status WriteFrame(backup::FrameFile* out, backup::FrameType type, std::string_view raw,
                        int level) {
  absl::StatusOr<backup::EncodedFrame> f = backup::EncodeFrame(type, 0, raw, level);
  if (!f.ok()) return f.status();
  return out->Write(std::move(*f));
}

}  // namespace

absl::StatusOr<BackupResult> WriteBackup(BackupSource* db, const std::string& path,
                                         const BackupOptions& options) {
  if (absl::Status s = db->CheckOpen(); !s.ok()) return s;
  if (options.zstd_level < 1 || options.zstd_level > 19) {
    return absl::InvalidArgumentError(
        absl::StrCat("backup zstd_level ", options.zstd_level, " is not in 1..19"));
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<BackupSource::Snapshot> snap = db->BeginSnapshot();
  if (!snap.ok()) return snap.status();
  backup::Catalog catalog;
  std::vector<uint32_t> sizes;
  for (const TableState* t : snap->tables) {
    // A table whose pages are unknown (a damaged pointer-page chain) would be backed up empty:
    // the whole backup fails, before anything is written at `path`.
    if (absl::Status d = t->DamageFor("backup"); !d.ok()) return d;
    catalog.tables.push_back(t->schema);
    sizes.push_back(t->relation->PageSequences());
  }
  for (auto& [schema, active] : snap->indexes) catalog.indexes.push_back({schema, active});

  backup::FileHeader fh;
  fh.snapshot = snap->txn->id();
  fh.source_page_size = db->page_size();
  absl::StatusOr<std::unique_ptr<backup::FrameFile>> file = backup::FrameFile::Create(path, fh);
  if (!file.ok()) return file.status();
  Job job{db, &*snap, &options, file->get(), worker::CutChunks(sizes, internal::kReadAhead)};
  for (uint32_t n : sizes) job.total_pages += n;
  auto fail = [&](const absl::Status& s) {
    job.out->Discard();
    return s;
  };
  const std::string raw_catalog = backup::EncodeCatalog(catalog);
  job.totals.raw_bytes += raw_catalog.size();
  if (absl::Status s =
          WriteFrame(job.out, backup::FrameType::kCatalog, raw_catalog, options.zstd_level);
      !s.ok()) {
    return fail(s);
  }

  const int workers = db->WorkersFor(options.workers);
  std::vector<WorkerState> states;
  absl::Status run =
      worker::RunWithLocals(db->workers(), workers, job.chunks.size(), &states,
                            [&](size_t i, const worker::TaskContext& ctx, WorkerState& ws) {
                              return WriteChunk(job, job.chunks[i], ctx, ws);
                            });
  if (!run.ok()) return fail(run);

  backup::EndTotals end;
  end.frames = job.out->frames();
  end.rows.assign(snap->tables.size(), 0);
  for (const WorkerState& ws : states) {
    for (size_t t = 0; t < ws.table_rows.size(); ++t) end.rows[t] += ws.table_rows[t];
  }
  end.blobs = job.totals.blobs.load();
  end.blob_bytes = job.totals.blob_bytes.load();
  if (absl::Status s = WriteFrame(job.out, backup::FrameType::kEnd, backup::EncodeEnd(end), 0);
      !s.ok()) {
    return fail(s);
  }
  absl::StatusOr<uint64_t> bytes = job.out->Finish();
  if (!bytes.ok()) return fail(bytes.status());
  if (options.progress) options.progress(job.total_pages, job.total_pages);

  BackupResult r;
  r.snapshot = snap->txn->id();
  r.tables = snap->tables.size();
  r.indexes = catalog.indexes.size();
  for (uint64_t n : end.rows) r.rows += n;
  r.blobs = end.blobs;
  r.blob_bytes = end.blob_bytes;
  r.raw_bytes = job.totals.raw_bytes.load();
  r.bytes = *bytes;
  r.pages = job.totals.pages.load();
  r.workers = workers;
  if (absl::Status s = snap->txn->Commit(); !s.ok()) return s;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace ember::db
