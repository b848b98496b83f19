// Streaming access to BLOBs. A BLOB written through a BlobWriter, or made by Concat, is a
// temporary BLOB of its transaction until it is assigned to a BLOB field of a row (Insert or
// Update), which stores it; temporary BLOBs vanish when the transaction ends.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/schema.h"

namespace ember {

class BlobWriter {
 public:
  virtual ~BlobWriter() = default;
  // Appends a segment of any size.
  virtual absl::Status Write(std::string_view bytes) = 0;
  // The temporary BLOB written so far; the writer can go on appending to it.
  virtual BlobId id() const = 0;
};

class BlobReader {
 public:
  virtual ~BlobReader() = default;
  // Reads up to `n` bytes at the current position; 0 at the end.
  virtual absl::StatusOr<size_t> Read(void* buf, size_t n) = 0;
  // Moves the position (0..size()); OutOfRange past the end.
  virtual absl::Status Seek(uint64_t pos) = 0;
  virtual uint64_t size() const = 0;
  virtual uint64_t position() const = 0;
};

}  // namespace ember
