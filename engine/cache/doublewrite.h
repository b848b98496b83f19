// Torn-page protection: the doublewrite area's protocol (the layout is in
// engine/page/doublewrite_page.h, the bytes in docs/format.md).
//
// A page write cut by a crash can leave the page half old and half new; its checksum then fails
// and the committed rows on it are gone, with the old content too. So before the buffer cache
// overwrites a page in place, it writes a copy of the new content into the doublewrite area,
// inside a record that lists what it holds, and (with forced writes) syncs; only then does it
// write the page home. At open, `RecoverDoublewrite` rewrites from the area every page whose
// last record holds a copy that differs from the page on disk: a torn page gets its new content
// back, and so does a page whose home write was lost.
//
// Why the copy, not just the old content, is what a crash may leave: the cache writes a page only
// once every page it depends on is durable (careful write), so a page's new content is always a
// state the database may be in; applying it is the same as its write having completed. That is
// also what lets the copy, once synced, count as the page being durable: a commit needs no sync
// between its pages' home writes and its TIP write, so protection adds no sync to a commit.
//
// The rules that keep the area right:
// - Records get increasing sequence numbers; at open the records newer than the highest
//   `retired_through` any valid record page declares are applied, in sequence order, so a page's
//   newest record wins.
// - A page written for the first time since its allocation ("fresh": nothing on disk links to it)
//   gets no copy: a crash before it is durable cannot matter. But if the area holds an older copy
//   of that page number (from before it was freed), its record gets a tombstone entry, so that
//   the old copy is not applied over the new content.
// - A record's slots are overwritten only after the record is retired (its pages' home writes
//   are durable) and some durable record page says so (`retired_through`): a record that recovery
//   would still apply is never damaged. When no record can declare it in time, a marker does
//   (slots 0 and 1, written alternately so that a torn marker leaves the previous one).
// Without forced writes nothing is synced, as everywhere else: the area then protects against a
// process crash (the copy's write completes before the home write starts), not a power loss.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "engine/io/file.h"
#include "engine/page/doublewrite_page.h"
#include "engine/util/mutex.h"

namespace ember::cache {

using page::PageNo;

// What an open found in the area and did with it.
struct DwRecovery {
  struct Repaired {
    PageNo page;
    bool torn;  // the page on disk failed its check (else: valid, but older than its copy)
  };
  std::vector<Repaired> repaired;
  uint64_t next_seq = 1;     // for the session's records
  uint64_t declared = 0;     // records up to this are void, durably
  uint32_t next_marker = 0;  // marker slot to write next
};

// Reads the area of a database of `page_size`, applies what a crash left, syncs, and voids the
// applied records with a marker (synced). Errors: the read, write or sync error; DataLoss for a
// record page that verifies but does not decode.
absl::StatusOr<DwRecovery> RecoverDoublewrite(io::File* file, uint32_t page_size);

// What the protocol needs from the buffer cache's write epochs (buffer_cache.h).
struct DwHooks {
  // Syncs the file; on success, *epoch is a write epoch every write completed before the call
  // belongs to, and it is durable now.
  std::function<absl::Status(uint64_t* epoch)> sync;
  std::function<bool(uint64_t epoch)> durable;  // writes of this epoch are durable
};

class Doublewrite {
 public:
  Doublewrite(io::File* file, uint32_t page_size, const DwRecovery& start, DwHooks hooks,
              bool forced_writes);
  Doublewrite(const Doublewrite&) = delete;
  Doublewrite& operator=(const Doublewrite&) = delete;

  // One page of a chunk: `bytes` is the sealed copy about to be written home, or null for a
  // tombstone (a fresh page that HasRecord).
  struct Item {
    PageNo no;
    const uint8_t* bytes;
  };
  // Items one Protect call takes.
  uint32_t max_items() const { return max_items_; }
  // Whether the area may hold a record of `no` that recovery would apply.
  bool HasRecord(PageNo no);

  // Writes the record for `items` and their copies, and with forced writes and at least one
  // copy, syncs. On success returns the record's sequence number, to pass to HomeWritten once the
  // home writes are done, and sets *durable_epoch to an epoch that is durable now (0 when
  // nothing was synced). Waits or syncs first when the ring has no room (see the rules above).
  // On error the record is settled already (no HomeWritten).
  absl::StatusOr<uint64_t> Protect(std::span<const Item> items, uint64_t* durable_epoch);
  // The record's home writes completed at write epoch `epoch`, or failed with `result`.
  // `copied`: the pages the record holds copies of. A failed record stays until every one of
  // them is written again by a later record.
  void HomeWritten(uint64_t seq, uint64_t epoch, const absl::Status& result,
                   std::span<const PageNo> copied);
  // Voids every record. REQUIRES: every home write is done and the file synced (clean close).
  absl::Status RetireAll();

 private:
  struct Flight {
    uint64_t seq;
    uint32_t first;  // ring index
    uint32_t n;
    bool home_done = false;
    uint64_t home_epoch = 0;
    bool failed = false;                  // its home write failed
    absl::Status error;                   // why
    absl::flat_hash_set<PageNo> pending;  // failed: pages not written again since
  };
  // A ring range [start, start + n) for a record: waits, syncs or writes a marker until the
  // records there are void. `lock` holds mu_ (waits go through it).
  absl::StatusOr<uint32_t> MakeRoom(uint32_t n, util::MutexLock& lock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves retired_ over flights whose home writes are durable.
  void AdvanceRetired() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Declares records up to `through` void with a marker, synced.
  absl::Status WriteMarker(uint64_t through) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops flights and window entries of void records.
  void Declared(uint64_t through) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PageNo SlotPage(uint32_t ring_index) const {
    return page::kDoublewriteFirst + page::kMarkerSlots + ring_index;
  }

  io::File* const file_;
  const uint32_t ps_;
  const uint32_t ring_;  // ring slots (the area minus the markers)
  const uint32_t max_items_;
  const DwHooks hooks_;
  const bool forced_;

  util::Mutex mu_;
  util::CondVar cv_;                                 // a flight's home writes completed
  std::deque<Flight> flights_ ABSL_GUARDED_BY(mu_);  // records not declared void, in seq order
  uint32_t pos_ ABSL_GUARDED_BY(mu_) = 0;            // next ring index
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_);
  uint64_t retired_ ABSL_GUARDED_BY(mu_);   // records up to this have durable homes
  uint64_t declared_ ABSL_GUARDED_BY(mu_);  // records up to this are void, durably
  uint32_t next_marker_ ABSL_GUARDED_BY(mu_);
  // page -> seq of its newest record not declared void
  absl::flat_hash_map<PageNo, uint64_t> window_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::cache
