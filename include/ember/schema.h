// Table and index definitions, and the typed values stored in rows.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ember {

// A string or bytes value of at least a quarter page (1,024 bytes at 4 KiB pages, 2,048 at
// 8 KiB) is stored out of line, as a BLOB of its table, and read back whole. One longer than a
// quarter page then takes a page of its own: a table of values just over the threshold takes
// several times their bytes on disk (a larger page size keeps such values in the row).
enum class ColumnType : uint8_t { kInt64 = 1, kDouble = 2, kString = 3, kBytes = 4, kBlob = 5 };

struct Column {
  std::string name;
  ColumnType type = ColumnType::kInt64;
  bool nullable = true;
  // BLOB, string and bytes columns: the zstd level (1..19) at which the values this column
  // stores as BLOBs are compressed - every BLOB assigned to it, and strings and bytes too long
  // for the record. 0 (the default): stored as they are. Reads decompress one 64 KB frame at a
  // time, so seeks stay cheap. Compression costs CPU on store and read; it pays for text, logs
  // and documents, not for media that are compressed already (such frames are kept raw).
  int zstd_level = 0;
};

struct TableSchema {
  std::string name;
  std::vector<Column> columns;
};

struct IndexSchema {
  std::string name;
  std::string table;
  std::vector<std::string> columns;  // key columns, in order
  bool unique = false;
};

// How an index is built (Database::CreateIndex on a populated table, and rebuilds).
struct IndexBuildOptions {
  int workers = 0;        // 0: Options::parallel_workers; capped by max_parallel_workers
  int fill_percent = 90;  // how full the bulk build fills pages (room for later inserts)
  // kBulk: scan, sort, merge and a bottom-up build, on `workers` workers. kInsert: one entry at
  // a time through the tree, as writes add them (one worker; for comparison and checks).
  enum class Method { kBulk, kInsert } method = Method::kBulk;
};

// The id of a stored BLOB (used by the BLOB layer).
struct BlobId {
  uint64_t value = 0;
  friend bool operator==(BlobId, BlobId) = default;
};

// One field: NULL, int64, double, string/bytes (both held as std::string), or a BLOB id.
using Value = std::variant<std::monostate, int64_t, double, std::string, BlobId>;
using Row = std::vector<Value>;

inline bool IsNull(const Value& v) { return std::holds_alternative<std::monostate>(v); }

// A record's permanent address inside its table.
struct RecordId {
  uint64_t value = 0;
  friend bool operator==(RecordId, RecordId) = default;
  friend auto operator<=>(RecordId, RecordId) = default;
};

}  // namespace ember
