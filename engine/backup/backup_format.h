// The backup file's format (docs/backup-format.md): the file header, checksummed frames that
// are zstd-compressed, and the portable encodings of the catalog and of rows inside them.
// Nothing here depends on the page size or on the record format of the database.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/schema.h"
#include "engine/util/mutex.h"

namespace ember::backup {

inline constexpr char kFileMagic[8] = {'E', 'M', 'B', 'E', 'R', 'B', 'A', 'K'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kFileHeaderSize = 32;
inline constexpr uint32_t kFrameMagic = 0x52464245;  // "EBFR"
inline constexpr size_t kFrameHeaderSize = 32;
// A frame's payload is at most this long, stored or raw: a bound a damaged length cannot pass.
inline constexpr uint32_t kMaxFramePayload = 1u << 30;
// Rows frames are cut when their raw payload passes this; BLOB values longer than this go in
// pieces of this size (BlobPiece frames) instead of inside the row.
inline constexpr size_t kFrameTarget = 1u << 20;

enum class FrameType : uint8_t { kCatalog = 1, kRows = 2, kBlobPiece = 3, kEnd = 4 };
enum class Codec : uint8_t { kNone = 0, kZstd = 1 };
// Rows frame flag: some row names a BLOB sent in BlobPiece frames before it.
inline constexpr uint16_t kFrameNamesPieces = 1;

// Tags of a value in a portable row (one per column).
enum ValueTag : uint8_t {
  kNull = 0,
  kInt = 1,         // zigzag varint
  kDouble = 2,      // 8 bytes, IEEE 754, little-endian
  kString = 3,      // varint length + bytes (string and bytes columns)
  kBlobBytes = 4,   // varint length + bytes: a BLOB value held in the row
  kBlobPieces = 5,  // varint BLOB number: a BLOB value sent in BlobPiece frames before the row
};

struct FileHeader {
  uint32_t version = kFormatVersion;
  uint64_t snapshot = 0;          // the backup transaction (informational)
  uint32_t source_page_size = 0;  // informational: restores choose their own
};
std::string EncodeFileHeader(const FileHeader& h);
// `what` names the file in errors.
absl::StatusOr<FileHeader> DecodeFileHeader(std::string_view bytes, const std::string& what);

struct FrameHeader {
  FrameType type = FrameType::kRows;
  Codec codec = Codec::kZstd;
  uint16_t flags = 0;
  uint64_t seq = 0;
  uint32_t stored_len = 0;
  uint32_t raw_len = 0;
  uint32_t payload_crc = 0;
};

// A frame ready to be written but for its sequence number (given at write time).
struct EncodedFrame {
  FrameHeader header;
  std::string stored;  // the payload as stored (compressed, or raw when that is not smaller)
};
// Compresses `raw` at `level` (kept raw when that does not make it smaller).
absl::StatusOr<EncodedFrame> EncodeFrame(FrameType type, uint16_t flags, std::string_view raw,
                                         int level);
std::string EncodeFrameHeader(const FrameHeader& h);
// Checks a frame header (magic, checksum, type, lengths); `where` names it in errors.
absl::StatusOr<FrameHeader> DecodeFrameHeader(std::string_view bytes, const std::string& where);
// The raw payload of a frame whose stored bytes are `stored` (checked against the header's
// checksum and raw length).
absl::Status DecodePayload(const FrameHeader& h, std::string_view stored, std::string* raw,
                           const std::string& where);

// Writes frames to a file from many threads: each Write numbers its frame and appends it whole.
class FrameFile {
 public:
  ~FrameFile();
  // Creates (truncates) `path` and writes the file header.
  static absl::StatusOr<std::unique_ptr<FrameFile>> Create(const std::string& path,
                                                           const FileHeader& h);
  absl::Status Write(EncodedFrame f);
  // Flushes and syncs the file, then closes it. Returns the file's size.
  absl::StatusOr<uint64_t> Finish();
  uint64_t frames() const;
  // Closes the file and removes it (a backup that failed leaves nothing behind).
  void Discard();

 private:
  // `buf`: what to write first (the file header).
  FrameFile(std::string path, int fd, std::string buf)
      : path_(std::move(path)), fd_(fd), buf_(std::move(buf)) {}
  absl::Status FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::string path_;
  mutable util::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::string buf_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;  // written to the file so far
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the first write error (sticky)
};

// Reads a backup file's frames in order, checking each (header, payload checksum, sequence).
class FrameReader {
 public:
  ~FrameReader();
  static absl::StatusOr<std::unique_ptr<FrameReader>> Open(const std::string& path);
  const FileHeader& header() const { return header_; }
  uint64_t size() const { return size_; }
  uint64_t offset() const { return offset_; }
  // The next frame's header and stored payload (checksum verified). False at the end of the
  // file; a frame cut short is DataLoss.
  absl::StatusOr<bool> Next(FrameHeader* h, std::string* stored);
  // "backup file P: frame N at offset O" for errors about the frame Next returned last.
  std::string Where() const;

 private:
  absl::Status ReadExact(void* buf, size_t n, bool* eof);
  std::string path_;
  int fd_ = -1;
  FileHeader header_;
  uint64_t size_ = 0, offset_ = 0, frame_offset_ = 0, next_seq_ = 0;
};

// --- the catalog frame
struct CatalogTable {
  TableSchema schema;
};
struct CatalogIndex {
  IndexSchema schema;
  bool active = true;
};
struct Catalog {
  std::vector<TableSchema> tables;
  std::vector<CatalogIndex> indexes;
};
std::string EncodeCatalog(const Catalog& c);
absl::StatusOr<Catalog> DecodeCatalog(std::string_view raw);

// --- rows frames: varint table number, varint row count, the rows.
// A value goes on through AppendValue; BLOB values through AppendBlobBytes / AppendBlobPieces.
void AppendNull(std::string* out);
void AppendInt(std::string* out, int64_t v);
void AppendDouble(std::string* out, double v);
void AppendString(std::string* out, std::string_view v);
void AppendBlobBytes(std::string* out, std::string_view v);
void AppendBlobPieces(std::string* out, uint64_t blob_no);

// One decoded value of a portable row; string values point into the frame.
struct PortableValue {
  ValueTag tag = kNull;
  int64_t i = 0;
  double d = 0;
  std::string_view bytes;
  uint64_t blob_no = 0;
};
// Decodes the next value of `*in`, checking its tag against the column's type.
absl::Status NextValue(std::string_view* in, ColumnType type, PortableValue* v);

// --- BlobPiece frames: varint BLOB number, table, column, total size, offset; then bytes.
struct BlobPiece {
  uint64_t blob_no = 0, table = 0, column = 0, total = 0, offset = 0;
  std::string_view bytes;
};
void EncodeBlobPieceHeader(const BlobPiece& p, std::string* out);
absl::StatusOr<BlobPiece> DecodeBlobPiece(std::string_view raw);

// --- the end frame: what came before it, to tell a complete file from a cut one.
struct EndTotals {
  uint64_t frames = 0;         // frames before the end frame
  std::vector<uint64_t> rows;  // per table
  uint64_t blobs = 0, blob_bytes = 0;
};
std::string EncodeEnd(const EndTotals& e);
absl::StatusOr<EndTotals> DecodeEnd(std::string_view raw);

}  // namespace ember::backup
