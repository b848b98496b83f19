// A transaction's BLOBs: its temporary BLOBs (results of Concat, BLOBs being written, not yet
// assigned to a field) and reads of stored BLOBs.
//
// Where a temporary BLOB lives follows blob_temp_space (architecture.md):
//   0: every temporary BLOB in database pages (Firebird without HQbird's BlobTempSpace);
//   1: those the engine makes (Concat, ConcatBytes) in TempSpace, API-written ones in pages;
//   2: every temporary BLOB in TempSpace.
// A temporary BLOB in TempSpace is a list of pieces of immutable extents: Concat of two such
// BLOBs shares their extents instead of copying them, and appending writes past the end of the
// last extent when nobody else's piece reaches that end (capacity doubling), so building a BLOB
// by `b = Concat(b, piece)` costs O(bytes) in time and temp space. In database pages (mode 0,
// and API-written BLOBs in mode 1) Concat copies both operands, as Firebird's `||` does - that
// quadratic copy is what the BLOB temp-space experiment measures against. Temporary BLOBs vanish at
// transaction end (their pages are freed, their TempSpace extents released) unless assigned to a
// field, which materialises them as stored BLOBs of the field's relation.
//
// Thread safety: one thread at a time (like the transaction).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/blob/blob_codec.h"
#include "engine/blob/blob_format.h"
#include "engine/blob/paged_blob.h"
#include "engine/io/temp_space.h"
#include "engine/record/relation.h"

namespace ember::blob {

class TxnBlobs {
 public:
  using Resolver = std::function<record::Relation*(uint32_t relation_id)>;
  // `ids` numbers temporary BLOBs across the whole database (shared by every transaction), so
  // one transaction's temporary id never names another's; null: numbered per object.
  TxnBlobs(cache::BufferCache* cache, cache::PageSpace* space, io::TempSpace* temp, int mode,
           uint64_t txn, Resolver resolve, std::atomic<uint64_t>* ids = nullptr);
  ~TxnBlobs();

  // A new empty temporary BLOB; `engine_made` for results of BLOB operations (mode 1 puts those
  // in TempSpace), false for BLOBs written through the API.
  // `compressed_target`: the BLOB is meant for a compressed column, so mode 1 puts it in
  // TempSpace too: only its compressed form should reach database pages (mode 0 stays pages).
  absl::StatusOr<uint64_t> Create(bool engine_made, bool compressed_target = false);
  // Extends a temporary BLOB of this transaction in place.
  absl::Status Append(uint64_t id, std::string_view bytes);
  // A new temporary BLOB holding a's bytes then b's (any mix of temporary and stored).
  absl::StatusOr<uint64_t> Concat(uint64_t a, uint64_t b);
  absl::StatusOr<uint64_t> ConcatBytes(uint64_t a, std::string_view bytes);
  // A new temporary BLOB (in pages, as an API-written one) holding a copy of `src`.
  absl::StatusOr<uint64_t> Copy(uint64_t src);

  absl::StatusOr<uint64_t> Length(uint64_t id);
  absl::Status Read(uint64_t id, uint64_t offset, void* buf, size_t n);

  // The stored BLOB for temporary BLOB `id` assigned to a field of `rel`: pages are adopted
  // (page-backed) or written (TempSpace-backed); with `zstd_level` > 0 the bytes are written
  // compressed in frames (blob_codec.h) instead. `links` receives the page of the header record,
  // which the record holding the id must follow to disk. A stored id is returned unchanged.
  absl::StatusOr<uint64_t> Materialize(uint64_t id, record::Relation* rel,
                                       std::vector<page::PageNo>* links, int zstd_level = 0);
  // A new stored BLOB of `rel` holding `bytes` compressed at `zstd_level` (> 0), straight from
  // memory: a long value of a compressed string or bytes column.
  absl::StatusOr<uint64_t> StoreCompressed(std::string_view bytes, record::Relation* rel,
                                           std::vector<page::PageNo>* links, int zstd_level);
  // Drops a temporary BLOB now (its pages or extent are reused at once).
  absl::Status Release(uint64_t id);
  // Transaction end: every temporary BLOB not materialised goes.
  absl::Status ReleaseAll();

  size_t temp_count() const { return temps_.size(); }

 private:
  // A TempSpace extent; its bytes below `used` never change (pieces may share them). Released
  // when the last piece naming it goes.
  struct Extent {
    uint64_t off = 0, cap = 0, used = 0;
  };
  struct Piece {
    std::shared_ptr<Extent> ext;
    uint64_t start = 0, len = 0;  // bytes [start, start + len) of the extent
  };
  struct Temp {
    bool in_temp_space = false;
    uint64_t len = 0;
    std::vector<Piece> pieces;         // TempSpace: the bytes, in order
    std::vector<uint64_t> ends;        // end offset (in the BLOB) of each piece
    std::unique_ptr<PagedBlob> paged;  // database pages
  };
  struct Stored {
    uint64_t length = 0;               // the BLOB's bytes
    std::string inline_data;           // level 0: the stored bytes
    std::unique_ptr<PagedBlob> paged;  // level 1 / 2 (pages flattened): the stored bytes
    bool compressed = false;
    FrameTable frames;          // compressed: where each frame lies in the stored bytes
    int64_t cached_frame = -1;  // compressed: the frame last decompressed, kept in `frame`
    std::string frame;
  };
  absl::StatusOr<Temp*> FindTemp(uint64_t id);
  absl::StatusOr<Stored*> FindStored(uint64_t id);
  // Bytes [offset, offset + n) of what `s` holds in its pages or inline (compressed: frames).
  absl::Status ReadStoredBytes(const Stored& s, uint64_t offset, void* buf, size_t n) const;
  absl::Status ReadCompressed(Stored& s, uint64_t offset, void* buf, size_t n);
  // Reads bytes [offset, offset + n) of what is being stored.
  using Source = std::function<absl::Status(uint64_t offset, char* buf, size_t n)>;
  // Writes `len` bytes from `src` compressed: `h` gets the stored length and frame size and,
  // when they fit inline, the stored bytes; otherwise `*pages` holds them.
  absl::Status Compress(const Source& src, uint64_t len, int level, uint32_t rel_id, BlobHeader* h,
                        std::unique_ptr<PagedBlob>* pages);
  // Stores header `h` (with its data in `written` or `adopted` past level 0, building list
  // pages at level 2) as a BLOB of `rel`; on an error frees every page `written` holds.
  absl::StatusOr<uint64_t> StoreHeader(BlobHeader& h, std::unique_ptr<PagedBlob>& written,
                                       const PagedBlob* adopted, record::Relation* rel,
                                       std::vector<page::PageNo>* links);
  absl::Status AppendTemp(Temp* t, const void* data, size_t n);
  // Appends `src`'s bytes to `dst`: shares its pieces when both are in TempSpace, else copies.
  absl::Status AppendBlob(Temp* dst, uint64_t src);
  void AddPiece(Temp* t, Piece p);
  absl::Status ReadTemp(const Temp& t, uint64_t offset, void* buf, size_t n) const;
  // Copies all of `src` onto the end of temporary `dst`, in chunks.
  absl::Status CopyInto(uint64_t src, Temp* dst);
  absl::Status FreeTemp(Temp& t);

  cache::BufferCache* cache_;
  cache::PageSpace* space_;
  io::TempSpace* temp_;
  int mode_;
  uint64_t txn_;
  Resolver resolve_;
  uint64_t next_temp_ = 1;
  std::atomic<uint64_t>* ids_ = nullptr;
  absl::flat_hash_map<uint64_t, Temp> temps_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Stored>> stored_;  // decoded headers
  std::unique_ptr<FrameCompressor> compressor_;                    // made on first need
  std::unique_ptr<FrameDecompressor> decompressor_;                // made on first need
  std::string stored_frame_;  // a frame's stored bytes, being decoded
};

}  // namespace ember::blob
