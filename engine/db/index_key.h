// Index keys: a row's key columns encoded in memcmp order (util/key_encoding.h), the B-tree
// entry that appends the record number, and the key's text for messages.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ember/schema.h"
#include "engine/db/table_state.h"

namespace ember {
namespace internal {

// Encodes the key columns of `row` (order-preserving; NULL sorts first). Returns whether any key
// column is NULL (such keys are exempt from uniqueness, as in SQL).
bool EncodeIndexKey(const IndexState& ix, const Row& row, std::string* key);
// Key `key` of `ix` (its encoded key columns, as EncodeIndexKey makes them) as the values it
// holds, for messages: "(name, id)=('alice', 42)"; strings quoted and escaped, bytes in hex,
// both cut at 64 bytes (then "...' (N bytes)").
std::string KeyText(const IndexState& ix, std::string_view key);
// The prefix of a key given as values for the first key columns (for lookups and ranges).
absl::Status EncodeKeyPrefix(const IndexState& ix, const Row& values, std::string* key);
// Full B-tree entry key: the encoded columns, then the record number as a byte count (1-8) and
// that many big-endian bytes (no high zero bytes). Entries order by key, then by record number.
// The tree's value is 0: the key carries the record (docs/format.md, "Index entries").
std::string IndexEntry(std::string_view key, uint64_t rec);
// Appends what IndexEntry puts after the key.
void AppendRecordNumber(uint64_t rec, std::string* entry);
// The longest encoded key (all key columns, before IndexEntry appends the record number) an
// index takes with pages of `page_size` (Database::max_key_size).
uint32_t MaxIndexKey(uint32_t page_size);
// Entries a seek for one key copies from its leaf (lookups, unique checks): that key's entries
// (usually one version's, a few when older versions had the same key) and the next key's,
// which ends the scan.
constexpr size_t kPointSeekBatch = 3;
// Splits an entry of `ix` into its key part (the encoded columns) and its record number. False
// when it does not parse.
bool ParseIndexEntry(const IndexState& ix, std::string_view entry, std::string_view* key,
                     uint64_t* rec);
// AlreadyExists for a duplicate of `key` (encoded key columns) in unique index `ix`, the key
// printed as its column values (KeyText): "unique index I: table T has duplicate key (c)=(v)".
absl::Status DuplicateKeyError(const IndexState& ix, std::string_view key);

}  // namespace internal
}  // namespace ember
