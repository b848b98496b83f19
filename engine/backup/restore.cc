// ember::Restore: a new database from a backup file (backup_format.h). The database is built
// under a temporary name and renamed into place only once complete and synced.
//
// The calling thread reads the file frame by frame (each checked: header checksum, sequence
// number, payload checksum) and hands rows frames to the loaders, `workers - 1` threads with a
// transaction each (the calling thread loads too when they are all busy, and alone with one
// worker). BLOB pieces are assembled by the calling thread in its own transaction, so a rows
// frame naming such a BLOB is loaded there as well (a temporary BLOB is assigned by the
// transaction that made it). Once the end frame has been read and every count matches it, the
// transactions commit and the indexes are built with the parallel bulk build.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ember/database.h"
#include "engine/backup/backup_format.h"
#include "engine/db/database_impl.h"
#include "engine/db/transaction_impl.h"
#include "engine/io/file.h"
#include "engine/util/coding.h"
#include "engine/util/mutex.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Job {
  backup::FrameHeader header;
  std::string stored;
  std::string where;
};

// The database being restored, with what the loaders share.
class Loader {
 public:
  Loader(const backup::Catalog* catalog, std::vector<Table> tables)
      : catalog_(catalog), tables_(std::move(tables)), rows_(tables_.size()) {}

  // Loads one rows frame in `txn`. `pieces`: the BLOBs assembled from pieces (the caller's
  // transaction only).
  absl::Status LoadRows(Transaction* txn, const Job& job,
                        absl::flat_hash_map<uint64_t, BlobId>* pieces, std::string* raw,
                        std::vector<Row>* rows) {
    if (absl::Status s = backup::DecodePayload(job.header, job.stored, raw, job.where); !s.ok()) {
      return s;
    }
    std::string_view in = *raw;
    uint64_t table_no, count;
    if (!util::GetVarint64(&in, &table_no) || !util::GetVarint64(&in, &count) ||
        table_no >= tables_.size()) {
      return absl::DataLossError(absl::StrCat(job.where, ": corrupt rows frame header"));
    }
    const Table& t = tables_[table_no];
    const std::vector<Column>& cols = catalog_->tables[table_no].columns;
    if (count > in.size()) {
      return absl::DataLossError(absl::StrCat(job.where, ": corrupt rows frame header"));
    }
    // Values are assigned over the rows' old ones: strings keep their buffers frame to frame.
    if (rows->size() < count) rows->resize(count);
    for (uint64_t r = 0; r < count; ++r) {
      Row* row = &(*rows)[r];
      row->resize(cols.size());
      for (size_t c = 0; c < cols.size(); ++c) {
        backup::PortableValue v;
        if (absl::Status s = backup::NextValue(&in, cols[c].type, &v); !s.ok()) {
          return absl::DataLossError(
              absl::StrCat(job.where, ": table ", t.schema().name, ", row ", r, ": ", s.message()));
        }
        Value& out = (*row)[c];
        switch (v.tag) {
          case backup::kNull: out = std::monostate{}; break;
          case backup::kInt: out = v.i; break;
          case backup::kDouble: out = v.d; break;
          case backup::kString: out = std::string(v.bytes); break;
          case backup::kBlobBytes: {
            if (v.bytes.empty()) {
              out = BlobId{};
              empty_blobs_.fetch_add(1, std::memory_order_relaxed);
              break;
            }
            absl::StatusOr<std::unique_ptr<BlobWriter>> w = txn->CreateBlob(t, cols[c].name);
            if (!w.ok()) return w.status();
            if (absl::Status s = (*w)->Write(v.bytes); !s.ok()) return s;
            out = (*w)->id();
            blobs_.fetch_add(1, std::memory_order_relaxed);
            blob_bytes_.fetch_add(v.bytes.size(), std::memory_order_relaxed);
            break;
          }
          case backup::kBlobPieces: {
            auto it = pieces != nullptr ? pieces->find(v.blob_no)
                                        : absl::flat_hash_map<uint64_t, BlobId>::iterator();
            if (pieces == nullptr || it == pieces->end()) {
              return absl::DataLossError(absl::StrCat(job.where, ": table ", t.schema().name,
                                                      ", row ", r, " names BLOB ", v.blob_no,
                                                      ", which no earlier frame holds whole"));
            }
            out = it->second;
            pieces->erase(it);
            break;
          }
        }
      }
    }
    if (!in.empty()) {
      return absl::DataLossError(absl::StrCat(job.where, ": bytes after the frame's last row"));
    }
    absl::Status s = static_cast<db::TransactionImpl*>(txn)->BulkInsert(
        t, std::span<const Row>(rows->data(), count));
    if (!s.ok()) {
      // A row the table refuses (a NULL in a NOT NULL column, say) can only come from a
      // damaged or forged file: the backup wrote what the table held.
      if (absl::IsInvalidArgument(s)) {
        return absl::DataLossError(absl::StrCat(job.where, ": ", s.message()));
      }
      return s;
    }
    util::MutexLock g(mu_);
    rows_[table_no] += count;
    return absl::OkStatus();
  }

  // A piece of a BLOB sent in BlobPiece frames, into the caller's transaction.
  absl::Status LoadPiece(Transaction* txn, const Job& job, std::string* raw,
                         absl::flat_hash_map<uint64_t, BlobId>* done) {
    if (absl::Status s = backup::DecodePayload(job.header, job.stored, raw, job.where); !s.ok()) {
      return s;
    }
    absl::StatusOr<backup::BlobPiece> p = backup::DecodeBlobPiece(*raw);
    if (!p.ok()) return absl::DataLossError(absl::StrCat(job.where, ": ", p.status().message()));
    if (p->table >= tables_.size() || p->column >= catalog_->tables[p->table].columns.size() ||
        catalog_->tables[p->table].columns[p->column].type != ColumnType::kBlob) {
      return absl::DataLossError(absl::StrCat(job.where, ": a BLOB piece for no BLOB column"));
    }
    Open& o = open_[p->blob_no];
    if (!o.writer) {
      if (p->offset != 0) {
        return absl::DataLossError(
            absl::StrCat(job.where, ": BLOB ", p->blob_no, " starts at offset ", p->offset));
      }
      absl::StatusOr<std::unique_ptr<BlobWriter>> w =
          txn->CreateBlob(tables_[p->table], catalog_->tables[p->table].columns[p->column].name);
      if (!w.ok()) return w.status();
      o.writer = std::move(*w);
      o.total = p->total;
    } else if (p->offset != o.written || p->total != o.total) {
      return absl::DataLossError(absl::StrCat(job.where, ": BLOB ", p->blob_no, " piece at ",
                                              p->offset, " where ", o.written, " was next"));
    }
    if (absl::Status s = o.writer->Write(p->bytes); !s.ok()) return s;
    o.written += p->bytes.size();
    if (o.written == o.total) {
      (*done)[p->blob_no] = o.writer->id();
      blobs_.fetch_add(1, std::memory_order_relaxed);
      blob_bytes_.fetch_add(o.total, std::memory_order_relaxed);
      open_.erase(p->blob_no);
    }
    return absl::OkStatus();
  }

  absl::Status CheckEnd(const backup::EndTotals& e, uint64_t frames, const std::string& where) {
    util::MutexLock g(mu_);
    if (e.frames != frames) {
      return absl::DataLossError(absl::StrCat(where, ": the end frame counts ", e.frames,
                                              " frames before it, the file holds ", frames));
    }
    if (e.rows.size() != rows_.size()) {
      return absl::DataLossError(absl::StrCat(where, ": the end frame counts ", e.rows.size(),
                                              " tables, the catalog ", rows_.size()));
    }
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (e.rows[i] != rows_[i]) {
        return absl::DataLossError(absl::StrCat(where, ": table ", tables_[i].schema().name,
                                                " has ", e.rows[i], " rows in the backup, ",
                                                rows_[i], " were read"));
      }
    }
    if (!open_.empty()) {
      return absl::DataLossError(absl::StrCat(where, ": a BLOB's pieces end early"));
    }
    // Backups of builds that stored BLOBs of no bytes as BLOB records count those among the
    // BLOBs; they come as empty values, like the empty BLOB, which no build counts.
    if (e.blobs < blobs_.load() || e.blobs > blobs_.load() + empty_blobs_.load() ||
        e.blob_bytes != blob_bytes_.load()) {
      return absl::DataLossError(absl::StrCat(where, ": the end frame counts ", e.blobs,
                                              " BLOBs of ", e.blob_bytes, " bytes, ", blobs_.load(),
                                              " of ", blob_bytes_.load(), " were read"));
    }
    return absl::OkStatus();
  }

  uint64_t rows() const {
    util::MutexLock g(mu_);
    uint64_t n = 0;
    for (uint64_t r : rows_) n += r;
    return n;
  }
  uint64_t blobs() const { return blobs_.load(); }
  uint64_t blob_bytes() const { return blob_bytes_.load(); }

 private:
  struct Open {
    std::unique_ptr<BlobWriter> writer;
    uint64_t total = 0, written = 0;
  };
  const backup::Catalog* catalog_;
  std::vector<Table> tables_;
  mutable util::Mutex mu_;
  std::vector<uint64_t> rows_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Open> open_;  // the calling thread's
  std::atomic<uint64_t> blobs_{0}, blob_bytes_{0};
  std::atomic<uint64_t> empty_blobs_{0};  // empty values in BLOB columns
};

// Rows frames waiting for a loader thread.
class JobQueue {
 public:
  explicit JobQueue(size_t limit) : limit_(limit) {}
  // False when the queue is full (the caller loads the job itself).
  bool TryPush(Job* j) {
    util::MutexLock g(mu_);
    if (q_.size() >= limit_) return false;
    q_.push_back(std::move(*j));
    cv_.NotifyOne();
    return true;
  }
  // False once closed and empty.
  bool Pop(Job* j) {
    util::MutexLock g(mu_);
    cv_.Wait(g, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !q_.empty() || closed_; });
    if (q_.empty()) return false;
    *j = std::move(q_.front());
    q_.pop_front();
    return true;
  }
  void Close() {
    util::MutexLock g(mu_);
    closed_ = true;
    cv_.NotifyAll();
  }

 private:
  const size_t limit_;
  util::Mutex mu_;
  util::CondVar cv_;
  std::deque<Job> q_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status SyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io::ErrnoStatus(errno, "open to sync", path);
  const int r = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (r != 0) return io::ErrnoStatus(err, "fsync", path);
  return absl::OkStatus();
}

// The catalog frame, which comes first, decoded.
absl::StatusOr<backup::Catalog> ReadCatalog(backup::FrameReader* reader) {
  backup::FrameHeader h;
  std::string stored, raw;
  absl::StatusOr<bool> more = reader->Next(&h, &stored);
  if (!more.ok()) return more.status();
  if (!*more || h.type != backup::FrameType::kCatalog) {
    return absl::DataLossError(absl::StrCat(reader->Where(), ": the catalog frame is missing"));
  }
  if (absl::Status s = backup::DecodePayload(h, stored, &raw, reader->Where()); !s.ok()) return s;
  absl::StatusOr<backup::Catalog> catalog = backup::DecodeCatalog(raw);
  if (!catalog.ok()) {
    return absl::DataLossError(absl::StrCat(reader->Where(), ": ", catalog.status().message()));
  }
  return catalog;
}

// Reads every frame after the catalog and loads its rows in `txns` (one per worker: txns[0] is
// the calling thread's, which also assembles BLOB pieces), up to and including the end frame,
// whose totals must match what was read.
absl::Status LoadFrames(backup::FrameReader* reader, Loader* loader,
                        const std::vector<std::unique_ptr<Transaction>>& txns,
                        const RestoreOptions& ro) {
  const int workers = static_cast<int>(txns.size());
  JobQueue queue(static_cast<size_t>(workers) * 2);
  util::Mutex err_mu;
  absl::Status first_error;
  std::atomic<bool> failed{false};
  auto note = [&](const absl::Status& s) {
    util::MutexLock g(err_mu);
    if (first_error.ok()) first_error = s;
    failed.store(true);
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < workers; ++i) {
    threads.emplace_back([&, i] {
      Job j;
      std::string r;
      std::vector<Row> rows;
      while (queue.Pop(&j)) {
        if (failed.load()) continue;
        absl::Status s =
            loader->LoadRows(txns[static_cast<size_t>(i)].get(), j, nullptr, &r, &rows);
        if (!s.ok()) note(s);
      }
    });
  }
  auto join = [&] {
    queue.Close();
    for (std::thread& t : threads) t.join();
    threads.clear();
  };
  absl::Status s;
  absl::flat_hash_map<uint64_t, BlobId> pieces;
  std::vector<Row> rows;
  std::string raw;
  Job job;
  backup::FrameHeader h;
  bool ended = false;
  uint64_t frames = 1;  // the catalog's
  for (;;) {
    if (failed.load()) break;
    absl::StatusOr<bool> more = reader->Next(&h, &job.stored);
    if (!more.ok()) {
      s = more.status();
      break;
    }
    if (!*more) break;
    if (ended) {
      s = absl::DataLossError(absl::StrCat(reader->Where(), ": a frame after the end frame"));
      break;
    }
    job.header = h;
    job.where = reader->Where();
    if (ro.progress) ro.progress(reader->offset(), reader->size());
    if (h.type == backup::FrameType::kRows) {
      ++frames;
      if ((h.flags & backup::kFrameNamesPieces) != 0 || workers == 1 || !queue.TryPush(&job)) {
        s = loader->LoadRows(txns[0].get(), job, &pieces, &raw, &rows);
      }
    } else if (h.type == backup::FrameType::kBlobPiece) {
      ++frames;
      s = loader->LoadPiece(txns[0].get(), job, &raw, &pieces);
    } else if (h.type == backup::FrameType::kEnd) {
      join();
      if (failed.load()) break;
      s = backup::DecodePayload(h, job.stored, &raw, job.where);
      absl::StatusOr<backup::EndTotals> e =
          s.ok() ? backup::DecodeEnd(raw) : absl::StatusOr<backup::EndTotals>(s);
      s = e.ok() ? loader->CheckEnd(*e, frames, job.where)
                 : absl::DataLossError(absl::StrCat(job.where, ": ", e.status().message()));
      ended = true;
    } else {
      s = absl::DataLossError(absl::StrCat(job.where, ": a second catalog frame"));
    }
    if (!s.ok()) break;
  }
  join();
  if (s.ok() && !first_error.ok()) s = first_error;
  if (s.ok() && !ended) {
    s = absl::DataLossError(absl::StrCat("backup file is truncated: it ends at offset ",
                                         reader->offset(), " without its end frame"));
  }
  return s;
}

// Defines every index of the catalog: the active ones built on `workers`, the inactive ones
// (all of them with deactivate_indexes) without a tree. An active index the rows cannot build
// is left inactive with a warning, or fails the restore with `strict`.
absl::Status RestoreIndexes(db::DatabaseImpl* db, const backup::Catalog& catalog, int workers,
                            const RestoreOptions& ro, RestoreResult* result) {
  IndexBuildOptions build;
  build.workers = workers;
  for (const backup::CatalogIndex& ix : catalog.indexes) {
    if (!ix.active || ro.deactivate_indexes) {
      if (absl::StatusOr<Index> d = db->CreateInactiveIndex(ix.schema); !d.ok()) {
        return d.status();
      }
      continue;
    }
    absl::StatusOr<Index> made = db->CreateIndex(ix.schema, build);
    if (made.ok()) {
      ++result->indexes_built;
      continue;
    }
    // What the rows make impossible: duplicate keys of a unique index, a key too long for
    // this page size. Anything else (I/O, a full temp space) fails the restore.
    const absl::Status& why = made.status();
    if (!absl::IsAlreadyExists(why) && !absl::IsInvalidArgument(why)) return why;
    if (ro.strict) {
      return absl::Status(why.code(),
                          absl::StrCat(why.message(),
                                       " (restore with deactivate_indexes, "
                                       "ember-bak -c -i, to get the rows back with every index "
                                       "inactive)"));
    }
    if (absl::StatusOr<Index> d = db->CreateInactiveIndex(ix.schema); !d.ok()) {
      return d.status();
    }
    result->warnings.push_back(
        absl::StrCat("index ", ix.schema.name, " restored inactive: ", why.message()));
  }
  result->indexes = catalog.indexes.size();
  return absl::OkStatus();
}

absl::StatusOr<RestoreResult> RestoreInto(backup::FrameReader* reader, const std::string& tmp,
                                          const Options& options, const RestoreOptions& ro,
                                          int workers) {
  RestoreResult result;
  result.workers = workers;
  const auto start = Clock::now();
  Options o = options;
  o.create_if_missing = true;
  o.error_if_exists = true;
  // The file is synced once at the end (Close), before it gets its name.
  o.forced_writes = false;
  o.max_parallel_workers = std::max(o.max_parallel_workers, workers);
  absl::StatusOr<std::unique_ptr<Database>> opened = Database::Open(tmp, o);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<Database> db = std::move(*opened);

  absl::StatusOr<backup::Catalog> catalog = ReadCatalog(reader);
  if (!catalog.ok()) return catalog.status();
  std::vector<Table> tables;
  for (const TableSchema& ts : catalog->tables) {
    absl::StatusOr<Table> t = db->CreateTable(ts);
    if (!t.ok()) return t.status();
    tables.push_back(*t);
  }
  result.tables = tables.size();
  Loader loader(&*catalog, tables);

  TransactionOptions to;
  to.no_savepoint = true;  // a failed restore throws the whole file away
  std::vector<std::unique_ptr<Transaction>> txns;
  for (int i = 0; i < workers; ++i) {
    absl::StatusOr<std::unique_ptr<Transaction>> t = db->Begin(to);
    if (!t.ok()) return t.status();
    txns.push_back(std::move(*t));
  }
  if (absl::Status s = LoadFrames(reader, &loader, txns, ro); !s.ok()) return s;
  for (auto& t : txns) {
    if (absl::Status c = t->Commit(); !c.ok()) return c;
  }
  txns.clear();
  result.rows = loader.rows();
  result.blobs = loader.blobs();
  result.blob_bytes = loader.blob_bytes();
  result.bytes_read = reader->offset();
  const auto loaded = Clock::now();
  result.load_seconds = std::chrono::duration<double>(loaded - start).count();

  if (absl::Status s =
          RestoreIndexes(static_cast<db::DatabaseImpl*>(db.get()), *catalog, workers, ro, &result);
      !s.ok()) {
    return s;
  }
  result.index_seconds = std::chrono::duration<double>(Clock::now() - loaded).count();
  if (absl::Status c = db->Close(); !c.ok()) return c;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace

absl::StatusOr<RestoreResult> Restore(const std::string& backup, const std::string& path,
                                      const Options& options, const RestoreOptions& restore) {
  const auto start = Clock::now();
  if (path.empty()) return absl::InvalidArgumentError("restore: no database path");
  const int workers = std::clamp(restore.workers > 0 ? restore.workers : options.parallel_workers,
                                 1, std::max(1, options.max_parallel_workers));
  absl::StatusOr<std::unique_ptr<backup::FrameReader>> reader = backup::FrameReader::Open(backup);
  if (!reader.ok()) return reader.status();
  std::error_code ec;
  if (fs::exists(path, ec) && !restore.replace) {
    return absl::AlreadyExistsError(
        absl::StrCat("restore: database ", path, " exists (restore with replace to overwrite)"));
  }
  const std::string tmp = path + ".restoring";
  fs::remove(tmp, ec);
  absl::StatusOr<RestoreResult> r = RestoreInto(reader->get(), tmp, options, restore, workers);
  if (!r.ok()) {
    fs::remove(tmp, ec);
    return r.status();
  }
  // The file is complete and synced (Close): only now does it get its name.
  if (absl::Status s = SyncPath(tmp, false); !s.ok()) {
    fs::remove(tmp, ec);
    return s;
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return absl::UnavailableError(absl::StrCat("restore: cannot rename ", tmp, " to ", path));
  }
  fs::path dir = fs::absolute(fs::path(path), ec).parent_path();
  if (absl::Status s = SyncPath(dir.string(), true); !s.ok()) return s;
  r->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

}  // namespace ember
