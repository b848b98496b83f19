// A relation's storage: its pointer pages, data pages and record version chains.
//
// Layout: primary data pages hold the newest version of each record in the record's own line
// (the record number never changes). Older versions ("back versions") go on the same page when
// they fit, else on secondary data pages, which hold only back versions and fragments and are
// skipped by scans. A record too large for its page keeps its first part in the line and the
// rest in a chain of fragments on secondary pages.
//
// Careful write: a back version or fragment is stored (on its page) before the record that
// points at it, and that order is recorded as precedence, so the page holding the pointer never
// reaches disk before the page it points into. A new data page is written before the pointer
// page that lists it.
//
// Latch order: primary data page -> secondary data page -> mu_ (page lists) -> pointer page ->
// PIP. A thread holds at most one primary and one secondary data page latch at a time.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/page/pointer_page.h"
#include "engine/record/record_format.h"
#include "engine/txn/txn_manager.h"
#include "engine/util/mutex.h"

namespace ember::record {

// What a reader sees: its own versions, and versions committed at or before its snapshot.
struct ReadView {
  uint64_t self = 0;  // own transaction (0: none)
  uint64_t snapshot_cn = 0;
  const txn::TxnManager* tm = nullptr;
  bool Visible(uint64_t writer) const {
    if (writer == self) return true;
    const uint64_t cn = tm->StateOf(writer);
    return txn::IsCommittedCn(cn) && cn <= snapshot_cn;
  }
};

struct VisibleVersion {
  bool exists = false;  // false: no visible version, or the visible one is a delete stub
  std::string body;     // raw row encoding
};

// A line that a version chain stopped pointing at: it may be freed only once the page that
// pointed at it (`from`) is on disk without the pointer (careful write), so it is collected
// and freed in a batch by FreeUnlinked.
struct Unlinked {
  page::PageNo from = page::kNoPage;
  page::PageNo page = page::kNoPage;
  uint16_t line = 0;
  bool fragments_only = false;  // free just the fragment chain starting at (page, line)
  // Instead of a line: the stored BLOB with this id (its header record and pages) goes, through
  // the relation's BlobFreer, once `from` and `from2` (when set) are written.
  uint64_t blob = 0;
  page::PageNo from2 = page::kNoPage;
  // The versions of `from` and `from2` that no longer point at it (BufferCache::VersionNow),
  // once FreeUnlinked has had to wait for them; kUnknownVersion before.
  static constexpr uint64_t kUnknownVersion = UINT64_MAX;
  uint64_t from_version = kUnknownVersion;
  uint64_t from2_version = kUnknownVersion;
};

// What garbage collection removed from one record (raw rows, for the index keys to drop).
struct Collected {
  bool changed = false;
  bool record_gone = false;          // the record itself was removed (a stub visible to all)
  bool pending = false;              // versions remain that may become garbage later
  uint64_t versions = 0;             // versions removed
  uint64_t bytes = 0;                // their stored bytes
  std::vector<std::string> going;    // raw rows of removed versions (stubs omitted)
  std::vector<std::string> staying;  // raw rows of the versions kept (stubs omitted)
  // The pages whose writes unlink what went (kNoPage when unused): the record's page when a dead
  // head was backed out or the record went, and the page where the chain was cut.
  page::PageNo backout_page = page::kNoPage;
  page::PageNo cut_page = page::kNoPage;
};

// Per-table version statistics (Validate-style walk).
struct VersionStats {
  uint64_t records = 0;             // primary records
  uint64_t back_versions = 0;       // versions below a head
  uint64_t back_version_bytes = 0;  // their stored bytes
  uint64_t delete_stubs = 0;        // heads that are delete stubs
  uint64_t dead_heads = 0;          // heads written by rolled-back transactions
  uint64_t data_pages = 0;
  uint64_t garbage_pages = 0;  // pages flagged as holding garbage
  uint64_t swept_pages = 0;    // pages flagged swept in their pointer-page slots
};

// Bytes a head version leaves free on its page when it is written: with them, any head can
// later be rewritten as its smallest form (a header with back and fragment pointers and no
// inline body), since record headers are variable length.
constexpr size_t kHeadSlack = 16;

// Room kept free per record on a primary page for its next back version (a small delta), so an
// update usually keeps the old version on the same page (Firebird reserves space the same way).
constexpr uint32_t kReservePerRecord = 16;

// Unlinked lines a relation keeps waiting for their pages' writes (FreeUnlinked's
// `when_written`) before it writes those pages early instead: room they hold is not reused
// until they are freed.
constexpr size_t kMaxWaitingFrees = 8192;

// The most hops a walk along a version chain or a fragment chain takes before it reports the
// chain as looping (damage).
constexpr int kMaxChain = 1 << 20;

// Outcome of an update or delete attempt.
struct WriteOutcome {
  enum Code { kDone, kWaitFor, kConflict, kNotFound } code = kDone;
  uint64_t other_txn = 0;    // kWaitFor / kConflict: the transaction in the way
  std::string old_body;      // kDone: raw body of the version replaced (empty for a stub; over a
                             // rolled-back version, the committed one under it)
  bool old_was_own = false;  // kDone: the replaced version was our own (overwritten in place)
  std::string dead_body;     // kDone over a rolled-back version: its raw body (now gone; the
                             // caller drops index entries only it had)
  // kDone over a fragmented version: its fragments, unreachable now, to be freed by
  // FreeUnlinked once the primary page is on disk (the caller decides when: freeing them at
  // once would force that page out before its transaction commits).
  std::optional<Unlinked> unlinked_fragments;
};

class Relation {
 public:
  // Allocates the first pointer page of a new relation for `txn`.
  static absl::StatusOr<page::PageNo> Create(cache::BufferCache* cache, cache::PageSpace* space,
                                             uint64_t txn, uint32_t relation_id);
  Relation(cache::BufferCache* cache, cache::PageSpace* space, const txn::TxnManager* tm,
           uint32_t relation_id, page::PageNo first_pp);
  // Reads the pointer-page chain into memory. A chain that is damaged (a page failing its
  // checksum, or one that is not the expected pointer page) is DataLoss naming the page; the
  // relation then keeps that error as damage() and holds no page lists.
  absl::Status Load();
  // Load's DataLoss when the chain is damaged, else OK. A damaged relation does not know its
  // pages, so every call that needs them (reads, writes, BLOB header records, collection,
  // sweep flags, statistics, Check) returns this error instead of acting on an empty list:
  // an empty list must never pass for an empty table. Set by Load before the relation is
  // shared, never changed afterwards.
  const absl::Status& damage() const { return damage_; }

  uint32_t id() const { return id_; }
  page::PageNo first_pp() const { return first_pp_; }

  // Frees stored BLOBs (engine/blob owns their format); FreeUnlinked hands it the `blob` entries
  // of a batch once the pages that referenced them are written. Set before use; none: kept.
  using BlobFreer = std::function<absl::Status(std::span<const uint64_t> ids, uint64_t mark_txn)>;
  void SetBlobFreer(BlobFreer f) { blob_freer_ = std::move(f); }
  // The data page holding record `rec`'s head.
  absl::StatusOr<page::PageNo> RecordPage(uint64_t rec) const;

  // Stores a new record (raw row encoding) written by `txn`; returns its record number.
  // `links`: pages the record points at (BLOB headers), which must reach disk first.
  absl::StatusOr<uint64_t> Insert(uint64_t txn, std::string_view raw,
                                  std::span<const page::PageNo> links = {});
  // Insert of many records by one caller (a bulk load): the page being filled stays latched
  // from one record to the next, so the caller must hold no other page latch, and must not let
  // anything wait on this relation's pages until it returns. Appends each record number to
  // `recs`; `links` (may be empty) as Insert's, per record. On an error the records before it
  // are stored.
  absl::Status InsertBatch(uint64_t txn, std::span<const std::string> raws,
                           std::span<const std::vector<page::PageNo>> links,
                           std::vector<uint64_t>* recs);
  // The version of `rec` visible to `view`. NotFound for a record number that does not exist.
  absl::StatusOr<VisibleVersion> Read(uint64_t rec, const ReadView& view);
  // Replaces the newest version by `txn`'s (`raw` = nullptr: a delete stub). `view` decides
  // conflicts: a newest version committed after the snapshot (unless read committed) is a
  // conflict; one of another active transaction means wait.
  // `undo`: the caller restores its own earlier version over its own head, even a stub.
  absl::StatusOr<WriteOutcome> Write(uint64_t rec, uint64_t txn, const ReadView& view,
                                     bool read_committed, const std::string* raw,
                                     std::span<const page::PageNo> links = {}, bool undo = false);

  // Removes the head version of `rec`, which must have been written by `head_txn` (our own
  // version being undone, or a dead transaction's being backed out): the version below becomes
  // the head again, or the record goes when there is none. Lines on other pages that this
  // unlinks are appended to `unlinked`. Pages are marked for `mark_txn`. Returns the raw row of
  // the removed version (empty for a stub) in `*removed_raw` if given.
  absl::Status Backout(uint64_t rec, uint64_t head_txn, uint64_t mark_txn,
                       std::vector<Unlinked>* unlinked, std::string* removed_raw = nullptr);
  // Garbage collection of one record against `horizon_cn` (every active snapshot sees versions
  // committed at or before it): a dead head is backed out; versions below the newest one
  // committed at or before the horizon go; a delete stub so committed takes the whole record.
  // A record whose head belongs to an active transaction is left alone. `check`, if given, sees
  // the raw row of every version the collection will hand back (in `going` / `staying`), with
  // its page and line, before anything changes: an error it returns stops the collection of
  // this record with the record untouched (a version that does not decode, say).
  using VersionCheck =
      std::function<absl::Status(std::string_view raw, page::PageNo page, uint16_t line)>;
  absl::StatusOr<Collected> Collect(uint64_t rec, uint64_t horizon_cn, uint64_t mark_txn,
                                    std::vector<Unlinked>* unlinked,
                                    const VersionCheck& check = {});
  // Writes the pages the lines were unlinked from, then frees the lines (and their fragments).
  // On an error, `*unlinked` keeps what is still to free and can be passed again (a retry).
  // With `when_written` (a background collector's batch), it writes nothing early: it frees
  // only what the pages it was unlinked from have reached disk without, and keeps the rest for
  // a later collection (FreeLater), unless more than kMaxWaitingFrees wait already.
  absl::Status FreeUnlinked(std::vector<Unlinked>* unlinked, uint64_t mark_txn,
                            bool when_written = false);
  // Lines to free whose referring pages are dirty and that nothing needs freed soon (a
  // rolled-back transaction's): freeing them now would force those pages out. They wait here
  // until a collection frees a batch of this table (TakeLater), whose flush writes them then.
  void FreeLater(std::vector<Unlinked>* unlinked);
  // Appends the lines FreeLater holds to `*unlinked` (a collection's batch).
  void TakeLater(std::vector<Unlinked>* unlinked);
  // Walks every data page counting versions (for Database::TableStats).
  absl::Status GetVersionStats(VersionStats* out);
  // After versions or records of `rec`'s page were removed: the page may take inserts again.
  absl::Status NoteSpaceFreed(uint64_t rec, uint64_t mark_txn);

  // BLOB header records (engine/blob) live on secondary pages: `body` is stored after the
  // pages in `links` (the BLOB's data or list pages) in careful-write order.
  absl::StatusOr<std::pair<page::PageNo, uint16_t>> StoreBlobRecord(
      uint64_t txn, std::string_view body, std::span<const page::PageNo> links);
  absl::StatusOr<std::string> ReadBlobRecord(page::PageNo p, uint16_t line);
  // Deletes the BLOB header record at (p, line) for `mark_txn`; DataLoss if it is not one.
  absl::Status DeleteBlobRecord(page::PageNo p, uint16_t line, uint64_t mark_txn);
  // Visits the versions of a record, newest first (raw bodies; stubs give deleted = true),
  // while `fn` returns true, with the record's page latched (`fn` must not touch pages).
  // NotFound when `rec` names no record (an empty line, or one holding a back version, fragment
  // or BLOB header since the record went). `at`, if given, holds the page and line of the
  // version last passed to `fn` (so a caller that stops on a version it cannot decode can name
  // it).
  using VersionFn = std::function<bool(uint64_t txn, bool deleted, std::string_view raw)>;
  absl::Status ForEachVersion(uint64_t rec, const VersionFn& fn,
                              std::pair<page::PageNo, uint16_t>* at = nullptr);
  // ForEachVersion for every record whose head is on data page sequence `seq` (none for a
  // secondary page), with the page latched once: fn(rec, ...) returning false stops the walk.
  using PageVersionFn =
      std::function<bool(uint64_t rec, uint64_t txn, bool deleted, std::string_view raw)>;
  absl::Status ForEachVersionOnPage(uint32_t seq, const PageVersionFn& fn,
                                    std::pair<page::PageNo, uint16_t>* at = nullptr);

  // Swept flags (kPpSwept, docs/format.md; relation_swept.cc), in two steps. MarkSwept flags
  // primary data page `seq` itself when every line on it is a primary version every snapshot
  // sees (committed at or before `horizon_cn`, no older version, not a delete stub) or a
  // fragment of one, and returns whether it did. FlagSweptSlots, for pages so flagged, sets the
  // flag in their pointer-page slots too, once the flagged page is on disk (a crash may lose a
  // flag, never leave one on a page holding something else); `*flagged` counts the slots set.
  // Any later change to the page clears both (Unsweep).
  absl::StatusOr<bool> MarkSwept(uint32_t seq, uint64_t horizon_cn);
  absl::Status FlagSweptSlots(std::span<const uint32_t> seqs, uint32_t* flagged = nullptr);
  // Whether the pointer page flags data page `seq` swept (its copy in memory: no page read).
  bool IsSwept(uint32_t seq) const {
    return (static_cast<uint8_t>(FastEntry(seq) >> 32) & page::kPpSwept) != 0;
  }
  // Whether data page `seq` is a secondary one (back versions and fragments only).
  bool IsSecondary(uint32_t seq) const {
    return (static_cast<uint8_t>(FastEntry(seq) >> 32) & page::kPpSecondary) != 0;
  }

  // Number of data page sequences (primary and secondary); 0 for a damaged relation, so a
  // caller that walks the pages checks damage() first.
  uint32_t PageSequences() const;
  // The visible records of data page sequence `seq` (none for a secondary page).
  // With `garbage` given, also lists records on the page whose chains hold versions older than
  // one committed at or before `horizon_cn`, or whose head is dead (cheap check of the head only).
  absl::Status ReadPage(uint32_t seq, const ReadView& view,
                        std::vector<std::pair<uint64_t, std::string>>* out,
                        std::vector<uint64_t>* garbage = nullptr, uint64_t horizon_cn = 0);
  // As ReadPage, but hands each visible record's raw body to `fn` while the page is latched
  // (valid only during the call; most bodies are read in place, uncopied). `fn` must not touch
  // other pages. An error from `fn` stops the walk and is returned.
  using RecordFn = absl::FunctionRef<absl::Status(uint64_t rec, std::string_view raw)>;
  absl::Status VisitPage(uint32_t seq, const ReadView& view, RecordFn fn,
                         std::vector<uint64_t>* garbage = nullptr, uint64_t horizon_cn = 0);

  // Read-ahead of the primary data pages of sequences [first, first + n) (a scan about to
  // visit them): consecutive pages come in one read. Best effort. `skip_swept`: not the pages
  // flagged swept (a sweep skips them).
  void PrefetchPages(uint32_t first, uint32_t n, bool skip_swept = false) const;
  // Every primary record number on data page sequence `seq`, visible or not.
  absl::Status ListRecords(uint32_t seq, std::vector<uint64_t>* out);
  // The records of `seq` that may hold garbage now or later: a dead or deleted head, or one
  // with a back version (the collector need not look at a record that is one live version).
  absl::Status ListCollectable(uint32_t seq, std::vector<uint64_t>* out);

  // For Validate(): checks pointer pages and data pages (page types, relation ids, sequences,
  // flag agreement, line structure, version chains and fragments); calls `on_record` for each
  // primary record number, `on_version` with the raw row of each version (stubs omitted) and
  // `on_blob` with the place, writer and body of each BLOB header record; adds every page to
  // `pages`.
  using BlobVisitor = std::function<void(page::PageNo p, uint16_t line, uint64_t txn,
                                         std::string_view blob_header)>;
  absl::Status Check(std::vector<std::string>* errors, std::vector<page::PageNo>* pages,
                     const std::function<void(uint64_t rec)>& on_record, uint64_t* versions,
                     const BlobVisitor& on_blob = {},
                     const std::function<absl::Status(std::string_view raw)>& on_version = {});

 private:
  struct PageInfo {
    page::PageNo page;
    uint8_t flags;  // PpFlag bits (mirror of the pointer page)
    // MarkSwept flagged the data page, its slot is not flagged yet; Unsweep clears it, so the
    // slot is flagged only if no change came between (relation_swept.cc).
    bool sweep_pending = false;
  };

  absl::StatusOr<page::PageNo> PageOf(uint32_t seq) const;
  // Insert's work: the record onto the page `*held` (data page `*held_seq`) if it fits there,
  // else onto the `stripe`-th page with room (the held one released and flagged full), which is
  // then left latched in `*held` for the next record. `*dirty`: the held page has records not
  // marked yet; the caller marks it (for `txn`) before releasing it.
  absl::StatusOr<uint64_t> InsertOnto(uint64_t txn, std::string_view raw,
                                      std::span<const page::PageNo> links, uint32_t stripe,
                                      cache::PageRef* held, uint32_t* held_seq, bool* dirty);
  // Free space on secondary pages (relation_space.cc). The page for the next back version,
  // fragment or BLOB header: the current one, else the first secondary page not flagged full,
  // else a new one.
  absl::StatusOr<uint32_t> SecondaryForStore(uint64_t txn);
  // Secondary page `seq` had no room for `need` bytes: flags it full (no longer current).
  absl::Status SecondaryIsFull(uint32_t seq, size_t need, uint64_t txn);
  // Secondary page `seq` (page `p`) has `free` bytes free after lines went: with enough of
  // them, it is no longer flagged full. Nothing for a primary page.
  absl::Status NoteSecondaryRoom(uint32_t seq, page::PageNo p, uint32_t free, uint64_t mark_txn);
  // Deletes line `line` of the latched page `r` (whatever pointed at it is on disk already),
  // releases the page and notes the room made.
  absl::Status RemoveLine(cache::PageRef* r, uint16_t line, uint64_t mark_txn);
  // Calls `fn` for each primary record line of data page `seq` (none for a secondary page),
  // with the page latched shared and the line's decoded header; a corrupt record header is
  // DataLoss.
  using PrimaryLineFn =
      std::function<absl::Status(const cache::PageRef&, uint16_t, const RecordHeader&)>;
  absl::Status VisitPrimaryLines(uint32_t seq, const PrimaryLineFn& fn);
  // Allocates and links a new data page (primary or secondary); returns its sequence. Primary
  // pages of a larger relation come as an extent (ExtentPages): all its pages are linked, empty,
  // and the first is returned.
  absl::StatusOr<uint32_t> AddDataPage(uint64_t txn, bool secondary);
  uint32_t ExtentPages(size_t pages) const;
  // Puts data page `dp_no` in pointer page slot `seq` (the next one), adding a pointer page
  // when the last is full.
  absl::Status LinkDataPage(uint64_t txn, uint32_t seq, page::PageNo dp_no, uint8_t flags)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);
  absl::Status SetPageFlags(uint32_t seq, uint8_t set, uint8_t clear, uint64_t txn);
  // Every change to a data page goes through one of these two before the page's bytes change:
  // a page flagged swept loses its flag, the pointer-page slot first, and the page may reach
  // disk only after the slot without the flag (precedence), so that neither copy on disk says
  // swept once the page holds something new.
  absl::StatusOr<cache::PageRef> FetchForChange(page::PageNo p);
  // Whether a line with header `h` may be on a page flagged swept: a fragment, or a primary
  // version every snapshot sees (committed at or before `horizon_cn`, nothing below it, not a
  // delete stub).
  bool SweptLine(const RecordHeader& h, uint64_t horizon_cn) const;
  absl::Status Unsweep(cache::PageRef& P);
  // Frees one unlinked line or fragment chain (its `from` page is on disk already).
  absl::Status FreeLine(const Unlinked& u, uint64_t mark_txn);
  // Collect's steps (relation_gc.cc), in order, passing what they learn along in a
  // CollectState.
  struct CollectState;
  // Latches record `rec`'s page exclusively and backs out the dead heads on top of the chain.
  // Returns whether a committed head is left (then chain[0]); false ends the collection with
  // `out` as it is (no such record, or an active head left alone).
  absl::StatusOr<bool> BackOutDeadHeads(uint64_t rec, uint64_t mark_txn,
                                        std::vector<Unlinked>* unlinked, const VersionCheck& check,
                                        CollectState* c);
  // Reads the chain below the head with its raw bodies, to its end, and finds the first version
  // committed at or before `horizon_cn` (the newest one every snapshot sees: `keep`).
  absl::Status ReadChainToHorizon(uint64_t horizon_cn, const VersionCheck& check, CollectState* c);
  // Cuts the chain below chain[keep] (`whole`: removes the record, a delete stub every snapshot
  // sees): the versions on the cut's page go at once, the others are unlinked.
  absl::Status CutChain(bool whole, uint64_t mark_txn, std::vector<Unlinked>* unlinked,
                        CollectState* c);
  // Backout with the primary page latched (Collect and Backout share it).
  absl::Status BackoutLatched(cache::PageRef& P, page::PageNo pno, uint16_t line, uint64_t mark_txn,
                              std::vector<Unlinked>* unlinked, std::string* removed_raw);
  // Stores `rec_bytes` on a secondary page (or on `same_page` if given and it fits).
  absl::StatusOr<std::pair<page::PageNo, uint16_t>> StoreSecondary(
      uint64_t txn, std::string_view rec_bytes, cache::PageRef* primary,
      std::span<const page::PageNo> extra_links = {});
  // Write's steps (relation_write.cc), in order, passing what they learn along in a
  // WriteState. A step returning an outcome other than kDone ends the write with it.
  struct WriteState;
  // Latches record `rec`'s page exclusively and decodes its head (kNotFound: no such record).
  absl::StatusOr<WriteOutcome> LatchHead(uint64_t rec, WriteState* w);
  // Whose head it is decides: `txn`'s own or a rolled-back one (then the version below decides
  // conflicts) is overwritten in place, a committed one is pushed down as a back version; one
  // of an active transaction means waiting; a conflict or a delete stub ends the write.
  absl::StatusOr<WriteOutcome> DecideOverwrite(uint64_t txn, const ReadView& view,
                                               bool read_committed, bool undo, WriteState* w);
  // The raw bodies of the head and, over a rolled-back head, of the version below it.
  absl::Status ReadReplacedBodies(WriteState* w);
  // Overwriting: the version below the head, if a delta against it, is rewritten whole (in its
  // line when it fits, else as a copy on a secondary page) and becomes the new head's back
  // version.
  absl::Status MakeBackVersionWhole(uint64_t txn, const std::string* raw, WriteState* w);
  // Pushing down: the committed head is stored as a back version (a delta against `raw` when
  // smaller), on the record's page when the new head still fits, else on a secondary page.
  absl::Status PushDownHead(uint64_t txn, const std::string* raw, WriteState* w);
  // Builds the new head and puts it in the record's line (the page still latched): inline as
  // far as the page has room, else fragmented, and as a last resort after MakeRoomForHead.
  absl::Status PlaceNewHead(uint64_t txn, std::span<const page::PageNo> links, WriteState* w);
  // Last resort of Write when the new head `nrec` does not fit on the full primary page P even
  // fragmented: moves back versions stored on P to secondary pages, repointing everything that
  // points at each (lines of P, versions on secondary pages, the new head), until it fits.
  // Returns whether the head was placed at `line`.
  absl::StatusOr<bool> MakeRoomForHead(cache::PageRef& P, page::PageNo pno, uint16_t line,
                                       uint64_t txn, RecordHeader* nh, std::string* nrec);
  // Stores body bytes as a fragment chain on secondary pages; returns the first fragment.
  absl::StatusOr<std::pair<page::PageNo, uint16_t>> StoreFragments(uint64_t txn,
                                                                   std::string_view bytes,
                                                                   cache::PageRef* primary);
  // The inline limit for a head of `full` bytes replacing one of `head_size` bytes on primary
  // page `page`, whose room is its free space once the old head goes (for a head that grows,
  // less kReservePerRecord for each other record): all of it when it fits with kHeadSlack to
  // spare, else at most a quarter page, and never less than a fragmented header with some body.
  size_t HeadInlineLimit(const uint8_t* page, size_t head_size, size_t full) const;
  // Builds a version record (header + stored body), fragmenting past `inline_limit` bytes.
  absl::StatusOr<std::string> BuildVersion(uint64_t txn, RecordHeader h, std::string_view stored,
                                           size_t inline_limit, cache::PageRef* primary);
  // The stored (possibly compressed) body of a version: its inline part plus its fragments.
  absl::StatusOr<std::string> StoredBody(const RecordHeader& h, std::string_view rec);
  // Raw body of a version given the raw body of the next newer version (for deltas).
  absl::StatusOr<std::string> RawBody(const RecordHeader& h, std::string_view rec,
                                      const std::string& newer_raw);
  // A copy of line `line` of page `p`: from the latched page `P` (number `pno`) when p == pno,
  // else through ReadLine (a back version on a secondary page).
  // ForEachVersion's walk from the head `first` (header `h`) at line `line` of the latched
  // page `r`; `*stopped` set when fn returned false.
  absl::Status WalkChain(const cache::PageRef& r, page::PageNo p, uint16_t line,
                         std::string_view first, RecordHeader h, const VersionFn& fn,
                         std::pair<page::PageNo, uint16_t>* at, bool* stopped);
  absl::StatusOr<std::string> LineAt(const cache::PageRef& P, page::PageNo pno, page::PageNo p,
                                     uint16_t line);
  // Reads a record line from another page (secondary), copying it.
  absl::StatusOr<std::string> ReadLine(page::PageNo p, uint16_t line);
  absl::StatusOr<VisibleVersion> ReadChain(page::PageNo primary_no, const uint8_t* page,
                                           uint16_t line, const ReadView& view);
  // ReadChain without copying when it can: returns whether a version is visible, with `*body`
  // pointing into `page` (a plain head stored whole) or into `*scratch`.
  absl::StatusOr<bool> ReadChainView(page::PageNo primary_no, const uint8_t* page, uint16_t line,
                                     const ReadView& view, std::string* scratch,
                                     std::string_view* body);

  cache::BufferCache* cache_;
  cache::PageSpace* space_;
  const txn::TxnManager* tm_;
  const uint32_t id_;
  const page::PageNo first_pp_;
  const uint32_t ps_;
  const uint32_t slots_per_pp_;
  absl::Status damage_;  // see damage()

  // The data page numbers by sequence again, readable without mu_ (every record access looks
  // one up, and a shared lock per lookup showed in mass updates). Written under mu_ held
  // exclusively, where pages_ changes; an array that grows is copied, and the old one is kept
  // until the relation goes, so a reader never sees freed memory.
  // An entry is the page number in the low 32 bits and its PpFlag bits above.
  uint64_t FastEntry(uint32_t seq) const {
    if (seq >= fast_count_.load(std::memory_order_acquire)) return page::kNoPage;
    return fast_pages_.load(std::memory_order_acquire)[seq].load(std::memory_order_relaxed);
  }
  page::PageNo FastPage(uint32_t seq) const {
    return static_cast<page::PageNo>(FastEntry(seq) & 0xFFFFFFFFu);
  }
  void SetFastPage(uint32_t seq, page::PageNo p, uint8_t flags) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::atomic<const std::atomic<uint64_t>*> fast_pages_{nullptr};
  std::atomic<uint32_t> fast_count_{0};
  std::vector<std::unique_ptr<std::atomic<uint64_t>[]>> fast_arrays_ ABSL_GUARDED_BY(mu_);
  uint32_t fast_capacity_ ABSL_GUARDED_BY(mu_) = 0;

  mutable util::SharedMutex mu_;
  std::vector<page::PageNo> pps_ ABSL_GUARDED_BY(mu_);
  std::vector<PageInfo> pages_ ABSL_GUARDED_BY(mu_);  // by data page sequence
  uint32_t insert_seq_ ABSL_GUARDED_BY(mu_) = 0;      // first primary page that may have room
  // Inserts in flight (Insert spreads them over pages with room, one page each).
  std::atomic<uint32_t> inserters_{0};
  class InsertStripe {
   public:
    explicit InsertStripe(std::atomic<uint32_t>* n)
        : n_(n), index_(std::min<uint32_t>(n->fetch_add(1, std::memory_order_relaxed), 7)) {}
    ~InsertStripe() { n_->fetch_sub(1, std::memory_order_relaxed); }
    uint32_t index() const { return index_; }

   private:
    std::atomic<uint32_t>* n_;
    uint32_t index_;
  };
  int32_t secondary_seq_ ABSL_GUARDED_BY(mu_) = -1;  // current page for back versions
  // Every secondary page below this sequence is flagged kPpFull (where the search for a
  // secondary page with room starts; lowered when a page's flag is cleared).
  uint32_t sec_space_ ABSL_GUARDED_BY(mu_) = 0;
  BlobFreer blob_freer_;
  util::Mutex alloc_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // serialises page additions

  // Back versions that garbage collection or a backout unlinked and FreeUnlinked has not freed
  // yet, by the location they were unlinked at ((page << 16) | line), with where each is now.
  // Write, making room on a full page, may move such a line to a secondary page (a chain of
  // garbage versions still points through it); FreeLine must then free the moved copy, not the
  // line it left, which may hold a new version by then (freeing that one breaks a chain or
  // makes it cyclic under concurrent writers, rollbacks and collection). Noted under the page's
  // latch before the unlinking operation lets it go; moved under the page's latch; dropped by
  // FreeLine.
  void NotePendingFree(page::PageNo page, uint16_t line);
  void MovePendingFree(page::PageNo from_page, uint16_t from_line, page::PageNo to_page,
                       uint16_t to_line);
  util::Mutex later_mu_;
  std::vector<Unlinked> later_ ABSL_GUARDED_BY(later_mu_);  // see FreeLater
  mutable util::Mutex pending_mu_;
  absl::flat_hash_map<uint64_t, uint64_t> pending_free_ ABSL_GUARDED_BY(pending_mu_);  // key -> now
  absl::flat_hash_map<uint64_t, uint64_t> pending_at_ ABSL_GUARDED_BY(pending_mu_);    // now -> key
};

}  // namespace ember::record
