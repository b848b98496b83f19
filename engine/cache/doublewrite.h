// Torn-page protection and the commit record: the doublewrite area's protocol (the layout is in
// engine/page/doublewrite_page.h, the bytes in docs/format.md).
//
// A page write cut by a crash can leave the page half old and half new; its checksum then fails
// and the committed rows on it are gone, with the old content too. So the buffer cache never
// writes a page home before an image of it is durable in the doublewrite area: a flush writes
// its pages' images into a record (one record page listing them, then the images) and syncs
// once; the pages go home later (see the rules below), without a sync of their own. A commit's
// flush puts the TIP
// page, with the commit bits, into the same record as the transaction's pages and names the
// transactions in it: one write and one sync make the commit durable.
//
// The rules that keep the area right (docs/architecture.md says why each holds):
// - Records apply whole and in order. Records get consecutive sequence numbers and are written
//   one at a time in that order (the write is done under the mutex that hands out the number), so
//   a sync that follows a record's write covers every lower record too. At open the records past
//   the highest `retired_through` any valid page declares are applied in sequence order; the
//   walk stops at the first record that is missing or incomplete (a copy whose checksum, seeded
//   with the record's seq and the copy's index, fails): nothing after it was acknowledged, and
//   its pages may depend on the missing one. A record whose write or sync failed is void: every
//   later record page and marker lists it until it is retired, and recovery skips it.
// - Every page the cache writes is in a record. A page written for the first time since its
//   allocation ("fresh": nothing on disk links to it) is written home with the record, before
//   its sync, instead of getting an image; the record names it with its checksum, and recovery
//   counts it present when the page at home has that checksum, or when a later record names the
//   page (that record was written after this one's sync, so the write was durable). An older
//   image of the same page number is not applied over it: its entry, newer, wins. A page goes
//   home this way only when no record recovery could still walk names its page number (from
//   before it was freed); otherwise it gets an image like any page.
// - A record's pages go home lazily. Once its sync returns, the record's images stay in memory
//   (the ring's mirror) as the pages' newest durable versions: a read of such a page is served
//   from its newest image, and a background writer writes the newest image of every such page
//   home, oldest records first, in small rounds that keep about half the ring waiting (or all
//   of them when a commit finds no room, or the
//   database closes). A page written by several records goes home once. No sync is added: the
//   next commit's sync makes those writes durable, and only then may a record page declare the
//   records retired.
// - A record is retired once its pages' home writes are durable; its slots are overwritten only
//   after some durable record page or marker says so (`retired_through`): a record recovery
//   would still apply is never damaged. When no record can declare it in time, a marker does
//   (slots 0 and 1, written alternately, so that a torn marker leaves the previous one).
// Without forced writes nothing is synced, as everywhere else: the area then protects against a
// process crash (the record's write completes before the home writes start), not a power loss.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "engine/io/file.h"
#include "engine/page/doublewrite_page.h"
#include "engine/util/large_alloc.h"
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
  std::vector<uint64_t> committed;  // transactions named by the records applied
  std::vector<uint64_t> dead;       // named by records not applied (void or incomplete)
  uint64_t applied = 0;             // records applied
  uint64_t next_seq = 1;            // for the session's records
  uint64_t declared = 0;            // records up to this are void, durably
  uint32_t next_marker = 0;         // marker slot to write next
  uint64_t marker_serial = 1;       // for the session's next marker
  uint64_t syncs = 0;               // syncs of the file it made (the database counts them)
};

// Reads the area of a database of `page_size`, applies the complete records a crash left (in
// order, up to the first incomplete one), syncs, and voids every record with a marker (synced).
// Errors: the read, write or sync error; DataLoss for a record page that verifies but does not
// decode, and for a record found damaged after it was durable (pages of it or of later records
// reached their homes): applying the walk would undo acknowledged commits.
absl::StatusOr<DwRecovery> RecoverDoublewrite(io::File* file, uint32_t page_size);

// A file to read the area from without writing (a tool's view of a database open elsewhere).
struct DwSource {
  uint64_t size = 0;  // bytes in the file
  std::string path;   // for messages
  std::function<absl::Status(uint64_t offset, uint8_t* buf, size_t n)> read;
};
// What recovery would put home, without writing anything: the newest image of each page in the
// records it would apply (pages whose durable version is still only in the area, since their
// home writes are lazy). The file may be written meanwhile: what was read of a record being
// written is left out. Errors: the read error; DataLoss for a record page that verifies but does
// not decode.
absl::StatusOr<absl::flat_hash_map<PageNo, std::vector<uint8_t>>> ReadDoublewriteImages(
    const DwSource& src, uint32_t page_size);

// What the protocol needs from the buffer cache's write epochs (buffer_cache.h).
struct DwHooks {
  // Syncs the file; on success, *epoch is a write epoch every write completed before the call
  // belongs to, and it is durable now.
  std::function<absl::Status(uint64_t* epoch)> sync;
  std::function<bool(uint64_t epoch)> durable;     // writes of this epoch are durable
  std::function<uint64_t()> write_epoch;           // the epoch of a write completed now
  std::function<void(uint64_t pages)> wrote_home;  // the lazy writer wrote these pages home
};

class Doublewrite {
 public:
  Doublewrite(io::File* file, uint32_t page_size, const DwRecovery& start, DwHooks hooks,
              bool forced_writes);
  ~Doublewrite();  // stops the home writer; what it has not written stays in the ring
  Doublewrite(const Doublewrite&) = delete;
  Doublewrite& operator=(const Doublewrite&) = delete;

  // One page of a record: its sealed image. Write copies it into the ring's mirror, with the
  // ring's checksum for the copy's write (the caller's bytes are not changed). A `fresh`
  // page (written for the first time since its allocation: nothing on disk links to it) gets no
  // image: Write writes it home with the record, and the record proves it by its checksum.
  struct Item {
    PageNo no;
    uint8_t* bytes;
    bool fresh = false;
  };
  // Pages one record takes next to `commits` committed transactions, whether or not they get
  // images (a flush's batch).
  uint32_t max_items(size_t commits) const;
  // Entries one record page holds next to `commits` committed transactions.
  uint32_t max_entries(size_t commits) const;
  // Ring slots one record may take (its page and its images), and that the records one thread
  // has written and not synced yet may take together: a third of the ring, so that they never
  // wait for room that only their own sync can free.
  uint32_t max_slots() const { return ring_ / 3; }

  // Whether every item is fresh and may go home without a record: no record recovery could
  // still walk names its page number. (A flush that commits nothing writes such a batch home
  // directly, as careful write does: nothing on disk links to those pages, and a page written
  // later that links to one is held back until its write is durable.)
  bool AllGoHomeFresh(std::span<const Item> items);
  // Writes one record: `items` and the transactions it commits, without a sync. Waits, syncs or
  // writes a marker first when the ring has no room (see the rules above). A fresh item whose
  // page number a record recovery could still walk names gets an image too (see the rules
  // above). With `taken`, the record takes the longest prefix of `items` (at most max_entries)
  // whose record page and images fit in `slot_budget` slots (0: max_slots), sets *taken to its
  // length and names `commits` only if it took every item; without, it takes every item (at
  // most max_items). InternalError when not even one item fits. Returns the record's sequence
  // number and sets *pages to the pages written into the area (record page and images); the caller
  // syncs and then calls Synced (in sequence order), or Failed when the sync failed. On error the
  // record is void already.
  absl::StatusOr<uint64_t> Write(std::span<const Item> items, std::span<const uint64_t> commits,
                                 uint32_t* pages, uint32_t slot_budget = 0,
                                 size_t* taken = nullptr);
  // The sync after the record's write succeeded (or, without forced writes, the write did): the
  // record is durable, and its images are now its pages' newest versions until they go home. An
  // error means an earlier failed record could not be declared void durably, so this record
  // must not be acknowledged: recovery might stop before it.
  absl::Status Synced(uint64_t seq);
  // The sync after the record's write failed: the record is void (never applied, its home
  // writes never made); later record pages and markers say so.
  void Failed(uint64_t seq);
  // If page `no` has an image not yet written home, copies the newest one to `out` and returns
  // true; otherwise the file holds the page's newest durable version. REQUIRES: the caller owns
  // the page's frame (no record can take the page meanwhile).
  bool ReadPending(PageNo no, uint8_t* out);
  // Writes home, in one batch, the newest image of every page waiting to go home whose newest
  // image is in a record up to `through` (all of them by default: Close's last round), and
  // counts the synced records up to `through` as home. A page of such a record whose newest
  // image is in a later record is left to that record, which stays until its own pages are
  // home. Without a sync: the next sync makes the writes durable. Errors: the write's; the
  // images stay and the next round writes them again.
  absl::Status WriteHomes(uint64_t through = UINT64_MAX);
  // Voids every record. REQUIRES: WriteHomes done after the last record, and the file synced
  // (a clean close).
  absl::Status RetireAll();
  // Stops the home writer without writing anything more (a simulated crash, a close that
  // failed): the records keep what it did not write.
  void StopWriter();
  // Records that waited for the home writer because the ring was full.
  uint64_t stalls() const { return stalls_.load(std::memory_order_relaxed); }

 private:
  struct Flight {
    uint64_t seq;
    uint32_t first;  // ring index
    uint32_t n;
    bool synced = false;     // durable: its images are pending (Synced), or it is void
    bool home_done = false;  // its pages' versions are at home (written at home_epoch)
    uint64_t home_epoch = 0;
    uint64_t declares = 0;                            // its page's retired_through
    std::vector<uint64_t> listed_voids;               // the void records its page lists
    std::vector<std::pair<PageNo, uint32_t>> images;  // page, ring index of its image
  };
  // The newest durable image of a page not yet written home.
  struct Pending {
    uint64_t seq;
    uint32_t index;  // ring index
  };
  struct Void {
    uint64_t seq;
    bool durable;  // a synced page lists it
  };
  // A ring range [start, start + n) for a record: waits, syncs or writes a marker until the
  // records there are void. `lock` holds mu_ (waits go through it).
  absl::StatusOr<uint32_t> MakeRoom(uint32_t n, util::MutexLock& lock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves retired_ over flights whose home writes are durable.
  void AdvanceRetired() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Declares records up to `through` void with a marker, synced; the marker lists the void
  // records too.
  absl::Status WriteMarker(uint64_t through) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops flights, void records and window entries up to `through`.
  void Declared(uint64_t through) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailedLocked(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<uint64_t> VoidSeqs() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `item` must be copied into a record rather than go home fresh (see the rules above).
  bool NeedsImage(const Item& item) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps about half the ring waiting to go home: when more waits, asks the writer for the
  // oldest records' pages, a few each time a record is synced. Small steady rounds spread the
  // writeback over the commits' syncs instead of loading one sync with a burst; the half that
  // waits lets a page written again and again go home once per lap of the ring.
  void AskSteadyRound() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The lazy writer's thread: a WriteHomes round whenever one is asked for.
  void WriterLoop();
  uint8_t* Mirror(uint32_t ring_index) const { return mirror_.get() + size_t{ring_index} * ps_; }
  PageNo SlotPage(uint32_t ring_index) const {
    return page::kDoublewriteFirst + page::kMarkerSlots + ring_index;
  }

  io::File* const file_;
  const uint32_t ps_;
  const uint32_t ring_;  // ring slots (the area minus the markers)
  const DwHooks hooks_;
  const bool forced_;

  // The ring's mirror: each slot's image as written, with the page's own checksum. An image is
  // read (by WriteHomes and ReadPending, without mu_) only while pending_ names it, and its slot
  // is rewritten only after its record is declared void, which needs it written home first.
  util::PageBlock mirror_;

  util::Mutex home_mu_;  // one WriteHomes at a time (lock order: home_mu_, mu_, pend_mu_)
  util::Mutex mu_;
  util::CondVar cv_;                                 // a flight was synced, failed or went home
  std::deque<Flight> flights_ ABSL_GUARDED_BY(mu_);  // records not declared void, in seq order
  std::vector<Void> voids_ ABSL_GUARDED_BY(mu_);     // failed records not declared void yet
  uint32_t pos_ ABSL_GUARDED_BY(mu_) = 0;            // next ring index
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_);
  uint64_t retired_ ABSL_GUARDED_BY(mu_);   // records up to this have durable homes
  uint64_t declared_ ABSL_GUARDED_BY(mu_);  // records up to this are void, durably
  uint32_t next_marker_ ABSL_GUARDED_BY(mu_);
  uint64_t marker_serial_ ABSL_GUARDED_BY(mu_);
  // The newest record naming each page number (entries up to declared_ may be dropped).
  absl::flat_hash_map<PageNo, uint64_t> named_ ABSL_GUARDED_BY(mu_);
  uint32_t unhomed_ ABSL_GUARDED_BY(mu_) = 0;  // slots of synced flights not home yet
  // The writer is asked for a round up to this record (0: none asked; UINT64_MAX: every page).
  uint64_t want_through_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t home_rounds_ ABSL_GUARDED_BY(mu_) = 0;  // WriteHomes rounds finished
  absl::Status home_error_ ABSL_GUARDED_BY(mu_);   // the last round's
  util::CondVar writer_cv_;                        // wakes the writer
  std::thread writer_;
  std::atomic<uint64_t> stalls_{0};

  util::Mutex pend_mu_;
  absl::flat_hash_map<PageNo, Pending> pending_ ABSL_GUARDED_BY(pend_mu_);
};

}  // namespace ember::cache
