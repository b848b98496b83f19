// Page 0: the database header. Written at create, on clean close and when the transaction-id
// reservation block is used up (never once per transaction start, see architecture.md).
//
//   offset size field
//   0      16   page header (type kHeader)
//   16     8    magic "EMBERDB\0"
//   24     4    format_version (kFormatVersion)
//   28     4    page_size
//   32     8    next_txn        no transaction id at or above this was handed out
//   40     8    oit             oldest interesting (oldest not committed) transaction
//   48     8    oat             oldest active transaction
//   56     8    ost             oldest snapshot transaction
//   64     4    page_count      pages allocated in the file (file size / page_size)
//   68     4    first_tip       first TIP page
//   72     4    catalog_pp      first pointer page of the catalog relation
//   76     4    flags           bit 0: clean shutdown
//   80     8    create_time_us  microseconds since the epoch
//   88     4    dw_first        first page of the doublewrite area (doublewrite_page.h)
//   92     4    dw_slots        pages in the doublewrite area
//   96     8    sweep_interval  automatic sweep interval (0: none); valid only with flags bit 1
//   104         (end of used area)
//
// sweep_interval came after format 6 was released without a version bump: a file written
// before it has zeros from offset 96 and flags bit 1 clear, and reads as kDefaultSweepInterval.
// An older build that rewrites the header leaves the bytes and clears the bit (it writes flags
// whole), so the file then reads as the default again rather than as a wrong value.
#pragma once
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "engine/page/page.h"

namespace ember::page {

// 2: B-tree pages gained the restart array. 3: variable-length record headers. 4: varint B-tree
// entries. 5: index entries end with a variable-length record number, and leaves store value 0.
// 6: the doublewrite area after PIP 0 (torn-page protection), named in the header. 7: the
// doublewrite record is the commit record (applied whole and in order; void and commit lists).
constexpr uint32_t kFormatVersion = 7;
constexpr std::string_view kMagic{"EMBERDB\0", 8};
constexpr uint64_t kDefaultSweepInterval = 20000;

struct HeaderFields {
  uint32_t format_version = kFormatVersion;
  uint32_t page_size = kDefaultPageSize;
  uint64_t next_txn = 1;
  uint64_t oit = 1, oat = 1, ost = 1;
  uint32_t page_count = 0;
  PageNo first_tip = kNoPage;
  PageNo catalog_pp = kNoPage;
  uint32_t flags = 0;
  uint64_t create_time_us = 0;
  PageNo dw_first = 0;
  uint32_t dw_slots = 0;
  uint64_t sweep_interval = kDefaultSweepInterval;  // Firebird's default at create
};
constexpr uint32_t kHeaderFlagCleanShutdown = 1;
// The sweep_interval field holds a value (set by every WriteHeader of this build).
constexpr uint32_t kHeaderFlagSweepInterval = 2;

void WriteHeader(uint8_t* page, const HeaderFields& h);  // page already InitPage'd as kHeader
// Reads and checks the fields (magic, version, page size): InvalidArgument "not an EmberDB
// database" / FailedPrecondition "format version N not supported" naming `file_for_errors`.
absl::Status ReadHeader(const uint8_t* page, HeaderFields* h, const char* file_for_errors);
// Peeks at the page size of a header page read with kMinPageSize bytes (before the real size
// is known). Same errors as ReadHeader.
absl::Status PeekPageSize(const uint8_t* first_bytes, size_t n, uint32_t* page_size,
                          const char* file_for_errors);

}  // namespace ember::page
