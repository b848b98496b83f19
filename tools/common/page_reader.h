// Read-only access to the pages of a database file for the tools that inspect it without
// opening it as a database (ember-stat): no owner lock (engine/io/owner_lock.h), no cache, no
// doublewrite recovery written, never a write. The file may be open in another process
// meanwhile.
//
// What such a reader sees of a database another process has open: a commit's pages are durable
// in the doublewrite area's records and go home lazily (engine/cache/doublewrite.h), so Open
// reads the records recovery would apply and ReadPage serves their pages from there: the
// database as of the records at Open, as far as they reach. Pages the owner changed in its
// cache and has not written yet are seen in their older state, and the header page (written
// only now and then) may be behind on its counters. A page being written while it is read can
// come back torn (old and new halves), which its checksum catches: ReadPage reads it again a
// few times, and only a page that still fails is reported as unreadable (DataLoss naming the
// page and the file). A torn page left by a crash and not in a record stays unreadable here
// until the next Database::Open repairs it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/page/header_page.h"
#include "engine/page/page.h"

namespace ember::tools {

class PageReader {
 public:
  // Opens `path` read-only and reads its header page. Errors name the path: NotFound,
  // PermissionDenied, InvalidArgument ("not an EmberDB database"), FailedPrecondition (format
  // version), DataLoss (a damaged header page).
  static absl::StatusOr<std::unique_ptr<PageReader>> Open(const std::string& path, int retries = 5);
  ~PageReader();

  const page::HeaderFields& header() const { return header_; }
  uint32_t page_size() const { return header_.page_size; }
  // Pages in the file now (it may grow while we read).
  uint64_t FilePages() const;
  const std::string& path() const { return path_; }

  // Reads and verifies page `no` into `buf` (page_size bytes). A page that fails its check is
  // read again up to `retries` times (a write in flight); then DataLoss "page N of FILE: ...".
  // A page past the end of the file is OutOfRange.
  absl::Status ReadPage(page::PageNo no, uint8_t* buf);
  uint64_t pages_read() const { return pages_read_; }
  uint64_t pages_from_area() const { return overlay_.size(); }  // pages the records hold
  uint64_t rereads() const { return rereads_; }  // reads repeated because a check failed

 private:
  PageReader(int fd, std::string path, int retries)
      : fd_(fd), path_(std::move(path)), retries_(retries) {}
  int fd_;
  std::string path_;
  int retries_;
  page::HeaderFields header_;
  absl::flat_hash_map<page::PageNo, std::vector<uint8_t>> overlay_;  // from the area's records
  uint64_t pages_read_ = 0, rereads_ = 0;
};

}  // namespace ember::tools
