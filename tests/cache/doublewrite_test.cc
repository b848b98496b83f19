// Tests for torn-page protection (engine/cache/doublewrite.h): the buffer cache writes copies into
// the doublewrite area, and RecoverDoublewrite repairs torn and lost page writes at open.
#include "engine/cache/doublewrite.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/cache/buffer_cache.h"
#include "engine/page/doublewrite_page.h"
#include "tests/support/engine_util.h"
#include "tests/support/fault_file.h"

namespace ember::cache {
namespace {

constexpr uint32_t kPs = 4096;
constexpr PageNo kFirst = page::DoublewriteEnd(kPs);  // first page outside the area

// A cache with torn-page protection over a FaultFile, as an open database has it.
struct DwDb {
  testing::TempDir dir;
  io::FaultFile* fault = nullptr;
  std::unique_ptr<io::File> file;
  std::unique_ptr<BufferCache> cache;
  bool forced;
  uint32_t capacity;

  explicit DwDb(bool forced_writes = true, uint32_t cache_pages = 16)
      : forced(forced_writes), capacity(cache_pages) {
    io::FileOptions fo;
    fo.mode = io::OpenMode::kCreateNew;
    auto base = VALUE_OR_FAIL(io::OpenPosixFile(dir.File("dw.edb"), fo));
    REQUIRE_OK(base->Allocate(uint64_t{kFirst} * kPs));
    auto f = std::make_unique<io::FaultFile>(std::move(base));
    fault = f.get();
    file = std::move(f);
    REQUIRE_OK(file->Sync());
    Start(DwRecovery{});
  }
  void Start(const DwRecovery& rec) {
    CacheOptions o;
    o.page_size = kPs;
    o.capacity = capacity;
    o.forced_writes = forced;
    cache = std::make_unique<BufferCache>(file.get(), o);
    cache->EnableDoublewrite(rec);
  }
  // The process dies: nothing more is written.
  void Crash() { cache->DiscardAll(); }
  // Page `no` as the file has it (zeros past its end: never written home).
  std::string Page(PageNo no) {
    std::string s(kPs, '\0');
    if (uint64_t{no + 1} * kPs > VALUE_OR_FAIL(file->Size())) return s;
    REQUIRE_OK(file->Read(uint64_t{no} * kPs, s.data(), kPs));
    return s;
  }
  void Put(PageNo no, const std::string& bytes) {
    REQUIRE_OK(file->Write(uint64_t{no} * kPs, bytes.data(), bytes.size()));
  }
};

void Write(BufferCache& c, PageNo no, uint64_t stamp, NewPage kind) {
  PageRef r =
      VALUE_OR_FAIL(kind == NewPage::kUnlinked || stamp == 1 ? c.FetchNew(no, kind)
                                                             : c.Fetch(no, LatchMode::kExclusive));
  testing::FillPage(r.data(), kPs, no, stamp);
  r.Mark(1);
}

uint64_t StampOf(const std::string& page) {
  return testing::GetStamp(reinterpret_cast<const uint8_t*>(page.data()));
}

TEST_CASE("doublewrite: a page torn or lost after its copy was synced comes back at open",
          "[cache][doublewrite]") {
  DwDb db;
  for (PageNo p = kFirst; p < kFirst + 4; ++p) Write(*db.cache, p, 1, NewPage::kPlaced);
  const PageNo all[] = {kFirst, kFirst + 1, kFirst + 2, kFirst + 3};
  REQUIRE_OK(db.cache->FlushPages(all));
  REQUIRE_OK(db.cache->Checkpoint());  // stamp 1 durable at home
  for (PageNo p : all) Write(*db.cache, p, 2, NewPage::kPlaced);
  REQUIRE_OK(db.cache->FlushPages(all));  // durable: the copies are synced
  REQUIRE_OK(db.cache->WriteHomes());     // and written home, not synced
  std::map<PageNo, std::string> written;
  for (PageNo p : all) written[p] = db.Page(p);
  db.Crash();
  // Power loss: the home writes after the copies' sync are lost; then two are torn instead.
  REQUIRE_OK(db.fault->DropUnsynced());
  for (PageNo p : all) REQUIRE(StampOf(db.Page(p)) == 1);
  std::string torn = db.Page(kFirst);  // first 4 KiB... of a 4 KiB page: tear at 512 B
  std::memcpy(torn.data(), written[kFirst].data(), 512);
  db.Put(kFirst, torn);
  std::string torn2 = db.Page(kFirst + 1);
  std::memcpy(torn2.data() + 2048, written[kFirst + 1].data() + 2048, 2048);
  db.Put(kFirst + 1, torn2);
  REQUIRE_FALSE(
      page::VerifyPage(reinterpret_cast<const uint8_t*>(torn.data()), kPs, kFirst, nullptr).ok());

  DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
  for (PageNo p : all) {
    INFO("page " << p);
    const std::string now = db.Page(p);
    CHECK(testing::CheckPage(reinterpret_cast<const uint8_t*>(now.data()), kPs, p, 2) == "");
    CHECK(page::VerifyPage(reinterpret_cast<const uint8_t*>(now.data()), kPs, p, nullptr).ok());
  }
  REQUIRE(rec.repaired.size() == 4);
  size_t torn_count = 0;
  for (const auto& r : rec.repaired) torn_count += r.torn;
  CHECK(torn_count == 2);
  // A second open finds nothing left to do.
  DwRecovery again = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
  CHECK(again.repaired.empty());
}

// A record's pages go home lazily: until they do, the file holds their older versions, and a
// page that left the cache meanwhile must be read back from its record's image (by a Fetch or
// a Prefetch), never from its home.
TEST_CASE("doublewrite: a page evicted before its home write is read back from its record",
          "[cache][doublewrite]") {
  DwDb db(/*forced_writes=*/true, /*cache_pages=*/16);
  constexpr PageNo kPages = 8;
  std::vector<PageNo> ours;
  for (PageNo p = kFirst; p < kFirst + kPages; ++p) {
    Write(*db.cache, p, 1, NewPage::kPlaced);
    ours.push_back(p);
  }
  REQUIRE_OK(db.cache->FlushPages(ours));
  REQUIRE_OK(db.cache->Checkpoint());  // stamp 1 at home
  for (PageNo p : ours) Write(*db.cache, p, 2, NewPage::kPlaced);
  REQUIRE_OK(db.cache->FlushPages(ours));  // stamp 2 durable in a record, not home yet
  for (PageNo p : ours) REQUIRE(StampOf(db.Page(p)) == 1);
  // Other pages push ours out of the 16-frame cache.
  std::vector<PageNo> others;
  for (PageNo p = kFirst + 100; p < kFirst + 140; ++p) {
    Write(*db.cache, p, 1, NewPage::kPlaced);
    others.push_back(p);
    REQUIRE_OK(db.cache->FlushPages(std::vector<PageNo>{p}));
  }
  const uint64_t reads = db.cache->counters().reads;
  db.cache->Prefetch(std::span<const PageNo>(ours).first(kPages / 2));
  for (PageNo p : ours) {
    INFO("page " << p);
    PageRef r = VALUE_OR_FAIL(db.cache->Fetch(p, LatchMode::kShared));
    CHECK(testing::CheckPage(r.data(), kPs, p, 2) == "");
  }
  CHECK(db.cache->counters().reads == reads);  // none of them came from the file
  REQUIRE_OK(db.cache->WriteHomes());
  for (PageNo p : ours) CHECK(StampOf(db.Page(p)) == 2);
}

TEST_CASE("doublewrite: fresh pages a flush writes without a commit go home with no record",
          "[cache][doublewrite]") {
  // New pages nothing on disk links to yet (a growing BLOB, a bulk load evicted): written home
  // directly, as careful write does, with no record page and no sync of their own.
  DwDb db;
  const PageNo fresh[] = {kFirst, kFirst + 1, kFirst + 2, kFirst + 3, kFirst + 4};
  for (PageNo p : fresh) Write(*db.cache, p, 1, NewPage::kUnlinked);
  const util::PageCounters before = db.cache->counters();
  const uint64_t syncs = db.cache->SyncCount();
  REQUIRE_OK(db.cache->FlushPages(fresh));
  const util::PageCounters after = db.cache->counters();
  CHECK(after.dw_writes == before.dw_writes);
  CHECK(after.writes == before.writes + 5);
  CHECK(db.cache->SyncCount() == syncs + 1);  // FlushPages's own, at its end: none per record
  for (PageNo p : fresh) CHECK(StampOf(db.Page(p)) == 1);
  SECTION("a failed home write leaves them dirty, and the next flush writes them") {
    const PageNo more[] = {kFirst + 10, kFirst + 11};
    for (PageNo p : more) Write(*db.cache, p, 1, NewPage::kUnlinked);
    db.fault->FailWriteAfter(2, EIO);
    CHECK_FALSE(db.cache->FlushPages(more).ok());
    REQUIRE_OK(db.cache->FlushPages(more));  // still dirty: written now
    for (PageNo p : more) CHECK(StampOf(db.Page(p)) == 1);
  }
  SECTION("a page number a record recovery may still walk gets a record like any page") {
    const PageNo old = kFirst + 8;
    Write(*db.cache, old, 1, NewPage::kPlaced);  // copied into a record that names it
    REQUIRE_OK(db.cache->FlushPages(std::span<const PageNo>(&old, 1)));
    Write(*db.cache, old, 2, NewPage::kUnlinked);  // freed and allocated again since
    const uint64_t dw_before = db.cache->counters().dw_writes;
    REQUIRE_OK(db.cache->FlushPages(std::span<const PageNo>(&old, 1)));
    CHECK(db.cache->counters().dw_writes > dw_before);
    db.Crash();
    DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
    CHECK(StampOf(db.Page(old)) == 2);
  }
}

TEST_CASE("doublewrite: a page freed and written fresh again is not undone by an older copy",
          "[cache][doublewrite]") {
  DwDb db;
  Write(*db.cache, kFirst, 1, NewPage::kPlaced);
  const PageNo one[] = {kFirst};
  REQUIRE_OK(db.cache->FlushPages(one));
  Write(*db.cache, kFirst, 2, NewPage::kPlaced);
  REQUIRE_OK(db.cache->FlushPages(one));  // a copy of stamp 2 in the area
  REQUIRE_OK(db.cache->WriteHomes());     // and at home, not synced
  // The page is freed and allocated again: fresh, stamp 3. A record recovery would walk still
  // names it, so it is copied too.
  Write(*db.cache, kFirst, 3, NewPage::kUnlinked);
  REQUIRE_OK(db.cache->FlushPages(one));
  db.Crash();
  VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
  CHECK(StampOf(db.Page(kFirst)) == 3);
}

// The protocol driven directly: records written, synced or failed, and no home writes (the
// process dies before them), so that recovery alone decides what the pages hold.
struct Records {
  DwDb& db;
  Doublewrite dw;
  std::vector<std::vector<uint8_t>> images;  // kept alive while written
  explicit Records(DwDb& d) : db(d), dw(d.file.get(), kPs, DwRecovery{}, Hooks(d), true) {
    REQUIRE_OK(d.file->Allocate(uint64_t{kFirst + 8} * kPs));  // the pages read back
  }
  static DwHooks Hooks(DwDb& d) {
    DwHooks h;
    h.sync = [&d](uint64_t* epoch) {
      *epoch = 1;
      return d.file->Sync();
    };
    h.durable = [](uint64_t) { return true; };  // as if a sync followed every home write
    h.write_epoch = []() { return uint64_t{1}; };
    h.wrote_home = [](uint64_t) {};
    return h;
  }
  // Writes a record of `pages` at `stamp`, committing `commits`; `fresh` pages go home with it
  // (no image). Returns its seq.
  uint64_t Write(std::vector<PageNo> pages, uint64_t stamp, std::vector<uint64_t> commits = {},
                 std::vector<PageNo> fresh = {}) {
    std::vector<Doublewrite::Item> items;
    for (PageNo p : pages) {
      images.emplace_back(kPs);
      testing::FillPage(images.back().data(), kPs, p, stamp);
      page::SealPage(images.back().data(), kPs);
      const bool is_fresh = std::find(fresh.begin(), fresh.end(), p) != fresh.end();
      items.push_back({p, images.back().data(), is_fresh});
    }
    uint32_t written = 0;
    return VALUE_OR_FAIL(dw.Write(items, commits, &written));
  }
  void Sync(uint64_t seq) {
    REQUIRE_OK(db.file->Sync());
    REQUIRE_OK(dw.Synced(seq));
  }
  // Write, then Sync: a durable record.
  uint64_t WriteSynced(std::vector<PageNo> pages, uint64_t stamp,
                       std::vector<uint64_t> commits = {}) {
    const uint64_t seq = Write(std::move(pages), stamp, std::move(commits));
    Sync(seq);
    return seq;
  }
};

// The slot the `index`th entry of the only record with sequence number `seq` names (kHomeSlot
// for a page proven at home).
uint32_t EntrySlot(DwDb& db, uint64_t seq, uint32_t index) {
  for (uint32_t i = page::kMarkerSlots; i < page::DoublewriteSlots(kPs); ++i) {
    const std::string p = db.Page(page::kDoublewriteFirst + i);
    const auto* d = reinterpret_cast<const uint8_t*>(p.data());
    if (page::GetType(d) != page::PageType::kDoublewrite) continue;
    absl::StatusOr<page::DwRecord> r = page::ReadDwRecord(d, kPs);
    if (r.ok() && r->seq == seq) return r->entries.at(index).slot;
  }
  FAIL("no record " << seq);
  return 0;
}

// The page of the ring slot of the `index`th image of the only record with sequence number `seq`.
PageNo CopySlot(DwDb& db, uint64_t seq, uint32_t index) {
  return page::kDoublewriteFirst + EntrySlot(db, seq, index);
}

bool IsFree(const std::string& page) {
  return page::GetType(reinterpret_cast<const uint8_t*>(page.data())) == page::PageType::kFree;
}

TEST_CASE("doublewrite: records apply whole and in order, none past an incomplete one",
          "[cache][doublewrite]") {
  DwDb db;
  Records r(db);
  const PageNo a = kFirst, b = kFirst + 1, c = kFirst + 2, d = kFirst + 3;
  r.WriteSynced({a, b}, 1, {101});
  const uint64_t s2 = r.WriteSynced({a, c}, 2, {102});
  r.WriteSynced({d}, 3, {103});
  // The second record's image of c torn after all: the record is incomplete, and the third,
  // whole on disk, depends on it (it was written after it).
  std::string torn = db.Page(CopySlot(db, s2, 1));
  torn[kPs / 2] ^= 0x5a;
  db.Put(CopySlot(db, s2, 1), torn);
  DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
  CHECK(rec.applied == 1);
  CHECK(StampOf(db.Page(a)) == 1);  // not 2: record 2 applies whole or not at all
  CHECK(StampOf(db.Page(b)) == 1);
  CHECK(IsFree(db.Page(c)));
  CHECK(IsFree(db.Page(d)));
  CHECK(rec.committed == std::vector<uint64_t>{101});
  CHECK(rec.dead == std::vector<uint64_t>{102, 103});
  // A second open repeats nothing and loses nothing.
  DwRecovery again = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
  CHECK(again.applied == 0);
  CHECK(StampOf(db.Page(a)) == 1);
}

TEST_CASE("doublewrite: a page written fresh with its record is proven by its checksum at home",
          "[cache][doublewrite]") {
  DwDb db;
  Records r(db);
  const PageNo a = kFirst, f = kFirst + 1, g = kFirst + 2;
  SECTION("its home write lost: the record is incomplete, and so is everything after it") {
    r.Sync(r.Write({f, a}, 1, {401}, /*fresh=*/{f}));
    r.Sync(r.Write({g}, 2, {402}));
    db.Put(f, std::string(kPs, '\0'));  // the write never reached the disk
    DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
    CHECK(rec.applied == 0);
    CHECK(IsFree(db.Page(a)));  // its record never applied
    CHECK(IsFree(db.Page(g)));
    CHECK(rec.dead == std::vector<uint64_t>{401, 402});
  }
  SECTION("at home whole: the record applies") {
    r.Sync(r.Write({f, a}, 1, {401}, /*fresh=*/{f}));
    DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
    CHECK(rec.applied == 1);
    CHECK(StampOf(db.Page(a)) == 1);
    CHECK(StampOf(db.Page(f)) == 1);
    CHECK(rec.repaired.size() == 1);  // a; f was home already
  }
  SECTION("overwritten since by a later record: that record proves it") {
    r.Sync(r.Write({f, a}, 1, {401}, /*fresh=*/{f}));
    r.Sync(r.Write({f}, 2, {402}));
    std::string torn = db.Page(f);  // the later record's home write of f, torn
    torn[kPs - 1] ^= 0x77;
    db.Put(f, torn);
    DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
    CHECK(rec.applied == 2);
    CHECK(StampOf(db.Page(a)) == 1);
    CHECK(StampOf(db.Page(f)) == 2);
    CHECK(rec.committed == std::vector<uint64_t>{401, 402});
  }
  SECTION("a page number a record recovery may walk names gets an image, until it is retired") {
    r.Sync(r.Write({f}, 5, {401}));                   // f, before it was freed
    REQUIRE_OK(r.dw.WriteHomes());                    // its image went home
    const uint64_t s2 = r.Write({f}, 1, {402}, {f});  // allocated again, written fresh
    r.Sync(s2);
    CHECK(EntrySlot(db, s2, 0) != page::kHomeSlot);  // copied: record 1 is not retired yet
    REQUIRE_OK(r.dw.WriteHomes());
    r.Sync(r.Write({a}, 1));  // declares records 1 and 2 retired
    const uint64_t s4 = r.Write({f}, 2, {403}, {f});
    r.Sync(s4);
    CHECK(EntrySlot(db, s4, 0) == page::kHomeSlot);  // no record recovery walks names f
    CHECK(StampOf(db.Page(f)) == 2);
    DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
    CHECK(rec.committed == std::vector<uint64_t>{403});
    CHECK(StampOf(db.Page(f)) == 2);
  }
  SECTION("while an older image of the page waits to go home, a fresh page gets an image too") {
    r.Sync(r.Write({f}, 5, {401}));
    const uint64_t s2 = r.Write({f}, 1, {402}, {f});
    r.Sync(s2);
    CHECK(StampOf(db.Page(CopySlot(db, s2, 0))) == 1);  // copied, not written home
    REQUIRE_OK(r.dw.WriteHomes());  // the newest image goes home, the older one never
    CHECK(StampOf(db.Page(f)) == 1);
    DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
    CHECK(rec.applied == 2);
    CHECK(StampOf(db.Page(f)) == 1);
  }
}

TEST_CASE(
    "doublewrite: a round up to a record leaves a page whose newest image is later to that record",
    "[cache][doublewrite]") {
  DwDb db;
  Records r(db);
  const PageNo a = kFirst, b = kFirst + 1, c = kFirst + 2, d = kFirst + 3;
  const uint64_t s1 = r.WriteSynced({a, b}, 1, {501});
  r.WriteSynced({b, c}, 2, {502});
  REQUIRE_OK(r.dw.WriteHomes(s1));  // the writer's steady round for the oldest record
  CHECK(StampOf(db.Page(a)) == 1);
  CHECK(IsFree(db.Page(b)));  // its newest image is record 2's: not written by this round
  CHECK(IsFree(db.Page(c)));
  // The next record declares record 1 retired (its home writes are durable here): b's only
  // durable version is then record 2's image, which recovery applies.
  r.WriteSynced({d}, 3, {503});
  DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
  CHECK(rec.committed == std::vector<uint64_t>{502, 503});  // record 1 is retired: not walked
  CHECK(StampOf(db.Page(a)) == 1);
  CHECK(StampOf(db.Page(b)) == 2);
  CHECK(StampOf(db.Page(c)) == 2);
  CHECK(StampOf(db.Page(d)) == 3);
}

TEST_CASE("doublewrite: a copy left in its slot by an older record does not pass for a newer one",
          "[cache][doublewrite]") {
  DwDb db;
  Records r(db);
  const PageNo a = kFirst, b = kFirst + 1;
  const uint64_t s1 = r.Write({a}, 7);
  r.Sync(s1);
  const uint64_t s2 = r.Write({a}, 7);  // the same image of a again
  r.Sync(s2);
  const uint64_t s3 = r.Write({b}, 8);
  r.Sync(s3);
  // Record 2's copy never landed; its slot still holds what record 1 wrote in its own slot (the
  // same image, so the same page checksum): only the ring checksum tells them apart.
  db.Put(CopySlot(db, s2, 0), db.Page(CopySlot(db, s1, 0)));
  DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
  CHECK(rec.applied == 1);
  CHECK(StampOf(db.Page(a)) == 7);
  CHECK(IsFree(db.Page(b)));  // record 3 is past the incomplete record 2
}

TEST_CASE("doublewrite: a failed record is void: skipped at recovery, the ones after it applied",
          "[cache][doublewrite]") {
  DwDb db;
  Records r(db);
  const PageNo a = kFirst, b = kFirst + 1;
  SECTION("the failure known before the next record is written") {
    const uint64_t s1 = r.Write({a}, 1, {201});
    r.dw.Failed(s1);  // its sync failed; its bytes may be on disk whole anyway
    const uint64_t s2 = r.Write({b}, 2, {202});
    r.Sync(s2);
  }
  SECTION("the failure known only after the next record was written") {
    const uint64_t s1 = r.Write({a}, 1, {201});
    const uint64_t s2 = r.Write({b}, 2, {202});
    r.dw.Failed(s1);
    // Record 2 does not list record 1 as void: Synced must say so durably before record 2 may
    // be acknowledged, or recovery would stop at record 1 were it incomplete.
    r.Sync(s2);
    std::string torn = db.Page(CopySlot(db, s1, 0));
    torn[100] ^= 1;
    db.Put(CopySlot(db, s1, 0), torn);
  }
  db.Crash();
  DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
  CHECK(IsFree(db.Page(a)));
  CHECK(StampOf(db.Page(b)) == 2);
  // Record 1 is dead: walked over as void, or already retired by record 2 (nothing of it went
  // home, so the TIP at home never says committed).
  CHECK(rec.committed == std::vector<uint64_t>{202});
  CHECK((rec.dead.empty() || rec.dead == std::vector<uint64_t>{201}));
}

// Recovery itself cut (its nth write or sync fails: a crash while it applies records or voids
// them), then a process crash or a power loss, then a second open: the same pages as one
// uninterrupted recovery, and nothing left to apply after it.
TEST_CASE("doublewrite: a recovery cut at any write or sync is finished by the next open",
          "[cache][doublewrite]") {
  const PageNo a = kFirst, b = kFirst + 1, c = kFirst + 2, d = kFirst + 3;
  for (const bool power_loss : {false, true}) {
    for (const bool at_sync : {false, true}) {
      for (uint64_t n = 1; n <= (at_sync ? 3u : 7u); ++n) {
        CAPTURE(power_loss, at_sync, n);
        DwDb db;
        Records r(db);
        r.Sync(r.Write({a, b}, 1, {301}));
        r.Sync(r.Write({b, c}, 2, {302}));
        r.Sync(r.Write({d}, 3, {303}));
        db.Crash();  // no home write happened: recovery has four pages to write
        if (at_sync) db.fault->FailSyncAfter(n, EIO);
        else db.fault->FailWriteAfter(n, EIO);
        const absl::StatusOr<DwRecovery> cut = RecoverDoublewrite(db.file.get(), kPs);
        db.fault->FailWriteAfter(0, 0);
        db.fault->FailSyncAfter(0, 0);
        if (power_loss) REQUIRE_OK(db.fault->DropUnsynced());
        INFO("the cut recovery: " << cut.status().ToString());
        DwRecovery again = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
        // Applied again in full, or (a marker written whose sync failed, after the pages' own
        // sync) already void: the pages are home and synced either way.
        CHECK((again.committed.empty() || again.committed == std::vector<uint64_t>{301, 302, 303}));
        CHECK(StampOf(db.Page(a)) == 1);
        CHECK(StampOf(db.Page(b)) == 2);
        CHECK(StampOf(db.Page(c)) == 2);
        CHECK(StampOf(db.Page(d)) == 3);
        DwRecovery third = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
        CHECK(third.applied == 0);
        CHECK(third.repaired.empty());
      }
    }
  }
}

// A flush of more pages than one record takes goes out as several records, each synced before
// its pages go home. Cut at its nth write or sync, then a process crash (what was written stays)
// or a power loss (what was not synced is lost): after recovery every page holds its old or its
// new content, and the new ones are whole records, a prefix of the flush.
TEST_CASE("doublewrite: a flush of several records cut at any write or sync leaves whole records",
          "[cache][doublewrite]") {
  constexpr PageNo kPages = 800;
  for (const bool power_loss : {false, true}) {
    for (const bool at_sync : {false, true}) {
      for (uint64_t n = 1; n <= (at_sync ? 4u : 820u); n += at_sync ? 1 : 41) {
        CAPTURE(power_loss, at_sync, n);
        DwDb db(/*forced_writes=*/true, /*cache_pages=*/kPages + 64);
        REQUIRE_OK(db.file->Allocate(uint64_t{kFirst + kPages} * kPs));
        std::vector<PageNo> all;
        for (PageNo p = kFirst; p < kFirst + kPages; ++p) {
          Write(*db.cache, p, 1, NewPage::kPlaced);
          all.push_back(p);
        }
        REQUIRE_OK(db.cache->FlushPages(all));
        for (PageNo p : all) Write(*db.cache, p, 2, NewPage::kPlaced);
        if (at_sync) db.fault->FailSyncAfter(n, EIO);
        else db.fault->FailWriteAfter(n, EIO);
        const absl::Status s = db.cache->FlushPages(all);
        db.Crash();
        if (power_loss) REQUIRE_OK(db.fault->DropUnsynced());
        db.fault->FailWriteAfter(0, 0);
        db.fault->FailSyncAfter(0, 0);
        DwRecovery rec = VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
        size_t fresh = 0;
        for (PageNo p : all) {
          const std::string now = db.Page(p);
          const auto* d = reinterpret_cast<const uint8_t*>(now.data());
          INFO("page " << p);
          REQUIRE(page::VerifyPage(d, kPs, p, nullptr).ok());
          const uint64_t got = StampOf(now);
          REQUIRE((got == 1 || got == 2));
          fresh += got == 2;
        }
        const size_t per_record = db.cache->doublewrite_record_pages();
        REQUIRE(per_record * 2 < kPages);
        INFO("flush: " << s.ToString() << "; pages new after recovery: " << fresh);
        if (s.ok()) CHECK(fresh == kPages);
        CHECK((fresh == kPages || fresh % per_record == 0));
      }
    }
  }
}

// Random writes and flushes over many laps of the ring, a power loss at a random point that drops
// every unsynced write and tears some of them; after recovery every page verifies and holds a
// version at least as new as its last flush.
TEST_CASE("doublewrite: power loss with torn writes at random points over many laps of the ring",
          "[cache][doublewrite]") {
  const uint64_t seed = 20261204;
  constexpr int kPages = 40;
  for (int round = 0; round < 12; ++round) {
    CAPTURE(seed, round);
    std::mt19937_64 rng(seed + round);
    DwDb db;
    std::map<PageNo, uint64_t> durable;          // stamp known durable
    std::map<PageNo, std::set<uint64_t>> since;  // stamps written since (maybe on disk)
    std::map<PageNo, uint64_t> stamp;
    const int steps = 200 + static_cast<int>(rng() % 1500);
    for (int i = 0; i < steps; ++i) {
      const PageNo p = kFirst + static_cast<PageNo>(rng() % kPages);
      const uint64_t s = ++stamp[p];
      Write(*db.cache, p, s, NewPage::kPlaced);
      since[p].insert(s);
      if (rng() % 4 == 0) {
        std::vector<PageNo> flush;
        for (const auto& [q, st] : stamp) {
          if (rng() % 2 == 0) flush.push_back(q);
        }
        REQUIRE_OK(db.cache->FlushPages(flush));
        for (PageNo q : flush) {
          durable[q] = stamp[q];
          since[q] = {stamp[q]};
        }
      }
      // The lazy writer's rounds, at random points (it also runs on its own past half the ring).
      if (rng() % 16 == 0) REQUIRE_OK(db.cache->WriteHomes());
    }
    std::map<PageNo, std::string> before;
    for (const auto& [p, st] : stamp) before[p] = db.Page(p);
    db.Crash();
    REQUIRE_OK(db.fault->DropUnsynced());
    for (const auto& [p, st] : stamp) {
      const std::string after = db.Page(p);
      if (after != before[p] && rng() % 2 == 0) {
        std::string torn = after;  // the lost write landed in part
        const size_t cut = 512 * (1 + rng() % 7);
        std::memcpy(torn.data(), before[p].data(), cut);
        db.Put(p, torn);
      }
    }
    VALUE_OR_FAIL(RecoverDoublewrite(db.file.get(), kPs));
    for (const auto& [p, st] : stamp) {
      INFO("page " << p << " durable stamp " << durable[p]);
      const std::string now = db.Page(p);
      const auto* d = reinterpret_cast<const uint8_t*>(now.data());
      if (durable[p] == 0 && page::GetType(d) == page::PageType::kFree) continue;
      REQUIRE(page::VerifyPage(d, kPs, p, nullptr).ok());
      const uint64_t got = StampOf(now);
      CHECK(got >= durable[p]);
      CHECK((since[p].contains(got) || got == durable[p]));
      CHECK(testing::CheckPage(d, kPs, p, got) == "");
    }
  }
}

}  // namespace
}  // namespace ember::cache
