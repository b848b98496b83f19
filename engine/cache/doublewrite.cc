// The doublewrite area's protocol: recovery at open and the ring of records written before page
// writes (see doublewrite.h for the rules and why they hold).
#include "engine/cache/doublewrite.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/page/page.h"
#include "engine/util/coding.h"

namespace ember::cache {

namespace {

using page::DwEntry;
using page::DwRecord;

uint32_t StoredChecksum(const uint8_t* p) { return util::Get32(p + page::hdr::kChecksum); }

// The area as read at open: every slot's bytes (zeros past the end of the file).
struct Area {
  uint32_t slots = 0;
  uint32_t ps = 0;
  std::vector<uint8_t> bytes;
  uint8_t* slot(uint32_t i) { return bytes.data() + size_t{i} * ps; }
};

absl::StatusOr<Area> ReadArea(const DwSource& src, uint32_t ps) {
  Area a;
  a.ps = ps;
  a.slots = page::DoublewriteSlots(ps);
  a.bytes.assign(size_t{a.slots} * ps, 0);
  const uint64_t first = uint64_t{page::kDoublewriteFirst} * ps;
  const uint64_t avail = src.size > first ? (src.size - first) / ps : 0;
  const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(avail, a.slots));
  if (n > 0) {
    if (absl::Status s = src.read(first, a.bytes.data(), size_t{n} * ps); !s.ok()) return s;
  }
  return a;
}

// The record page in slot `i`, if the slot holds a valid one (a torn one does not verify).
std::optional<DwRecord> RecordAt(Area& a, uint32_t i) {
  const uint8_t* p = a.slot(i);
  if (page::GetType(p) != page::PageType::kDoublewrite) return std::nullopt;
  if (!page::VerifyPage(p, a.ps, page::kDoublewriteFirst + i, nullptr).ok()) return std::nullopt;
  absl::StatusOr<DwRecord> r = page::ReadDwRecord(p, a.ps);
  if (!r.ok()) return std::nullopt;
  return std::move(*r);
}

// The image the `index`th entry of `rec` names (the `ordinal`th image of the record), if its slot
// holds exactly that copy (written by this record, whole): restores the image's own checksum in
// place and returns it, else null.
uint8_t* CopyOf(Area& a, const DwRecord& rec, uint32_t record_slot, uint32_t index,
                uint32_t ordinal) {
  const DwEntry& e = rec.entries[index];
  if (e.slot != record_slot + 1 + ordinal || e.slot >= a.slots) return nullptr;
  uint8_t* p = a.slot(e.slot);
  if (StoredChecksum(p) != page::CopyChecksum(p, a.ps, rec.seq, index)) return nullptr;
  util::Put32(p + page::hdr::kChecksum, e.checksum);
  if (!page::VerifyPage(p, a.ps, e.page_no, nullptr).ok()) return nullptr;
  return p;
}

// Writes a marker (a record page without entries) into marker slot `slot`.
absl::Status PutMarker(io::File* file, uint32_t ps, uint32_t slot, uint64_t serial,
                       uint64_t through, std::vector<uint64_t> voids) {
  std::vector<uint8_t> p(ps);
  DwRecord r;
  r.seq = serial;
  r.retired_through = through;
  r.voids = std::move(voids);
  const PageNo no = page::kDoublewriteFirst + slot;
  page::WriteDwRecord(p.data(), ps, no, r);
  // Through the batch path, as the records: the same writer (io_uring or pwrite) for every write.
  const io::WriteRequest req{uint64_t{no} * ps, p.data(), ps};
  return file->WriteBatch(std::span<const io::WriteRequest>(&req, 1));
}

struct Found {
  uint32_t slot;
  DwRecord rec;
};

// What the walk over the area's records found: the images it would apply, newest per page (null:
// a fresh page, at home already), pointing into `area`.
struct Walk {
  Area area;
  absl::flat_hash_map<uint64_t, Found> records;  // by seq
  absl::flat_hash_set<uint64_t> voided;
  absl::flat_hash_map<PageNo, const uint8_t*> newest;
  uint64_t void_through = 0;
  uint64_t max_seq = 0;
  DwRecovery out;  // committed, dead, applied, marker state
};

// Reads the area and walks its records (doublewrite.h), writing nothing.
// `live`: the file is being written meanwhile (a tool's read), so what the walk reads of the
// area and of the homes need not agree: no damage is concluded from that.
absl::StatusOr<Walk> WalkRecords(const DwSource& src, uint32_t ps, bool live) {
  Walk w;
  absl::StatusOr<Area> read = ReadArea(src, ps);
  if (!read.ok()) return read.status();
  w.area = std::move(*read);
  Area* area = &w.area;
  auto& records = w.records;
  auto& voided = w.voided;
  auto& newest = w.newest;
  uint64_t& void_through = w.void_through;
  uint64_t& max_seq = w.max_seq;
  uint64_t newest_marker = 0;
  DwRecovery& out = w.out;
  for (uint32_t i = 0; i < area->slots; ++i) {
    std::optional<DwRecord> r = RecordAt(*area, i);
    if (!r) continue;
    // A page that verifies said what it says when it was written: its retirements and voids
    // were true then, whether or not the rest of its record survived.
    void_through = std::max(void_through, r->retired_through);
    voided.insert(r->voids.begin(), r->voids.end());
    if (i < page::kMarkerSlots) {
      if (r->seq >= newest_marker) {
        newest_marker = r->seq;
        out.next_marker = i ^ 1;
      }
    } else {
      max_seq = std::max(max_seq, r->seq);
      const uint64_t seq = r->seq;
      records.insert_or_assign(seq, Found{i, std::move(*r)});
    }
  }
  max_seq = std::max(max_seq, void_through);
  out.marker_serial = newest_marker + 1;

  // The newest record page naming each page (whatever its state): a fresh page's home write is
  // proven by any later record naming the page, since that was written after its sync.
  absl::flat_hash_map<PageNo, uint64_t> named;
  for (const auto& [seq, f] : records) {
    for (const DwEntry& e : f.rec.entries) {
      uint64_t& m = named[e.page_no];
      m = std::max(m, seq);
    }
  }
  // Page `no` as the file has it now (null past its end), in a buffer the next call reuses.
  std::vector<uint8_t> probe(ps);
  auto read_home = [&](PageNo no) -> absl::StatusOr<const uint8_t*> {
    const uint64_t off = uint64_t{no} * ps;
    if (off + ps > src.size) return nullptr;
    if (absl::Status s = src.read(off, probe.data(), ps); !s.ok()) return s;
    return probe.data();
  };
  // Whether the page at home is `img`, byte for byte.
  auto at_home = [&](PageNo no, const uint8_t* img) -> absl::StatusOr<bool> {
    absl::StatusOr<const uint8_t*> home = read_home(no);
    if (!home.ok()) return home.status();
    return *home != nullptr && std::memcmp(*home, img, ps) == 0;
  };
  // Whether the page of entry `e` of record `seq` reached its home whole (a fresh page's home
  // write, or an image's); a fresh page also when a later record names it (that record was
  // formed after this one's sync, so the write was durable).
  auto home_present = [&](const DwEntry& e, uint64_t seq) -> absl::StatusOr<bool> {
    if (e.slot == page::kHomeSlot && named[e.page_no] > seq) return true;
    absl::StatusOr<const uint8_t*> home = read_home(e.page_no);
    if (!home.ok()) return home.status();
    return *home != nullptr && StoredChecksum(*home) == e.checksum &&
           page::VerifyPage(*home, ps, e.page_no, nullptr).ok();
  };

  // The chain: consecutive records past the void ones, each applied whole, up to the first that
  // is missing or incomplete. Each page's newest entry wins: an image, or (null) a fresh page
  // already at home, which no older image may overwrite.
  auto dead = [&](uint64_t s) {
    auto it = records.find(s);
    if (it == records.end()) return;
    out.dead.insert(out.dead.end(), it->second.rec.commits.begin(), it->second.rec.commits.end());
  };
  uint64_t seq = void_through + 1;
  // Where the walk stopped: the page found missing or damaged (unknown: UINT32_MAX), and the
  // images of the stopping record that did pass.
  PageNo bad_page = UINT32_MAX;
  const Found* last_applied = nullptr;
  std::vector<std::pair<PageNo, const uint8_t*>> passed;
  for (; seq <= max_seq; ++seq) {
    auto it = records.find(seq);
    if (voided.contains(seq)) {
      dead(seq);
      continue;
    }
    if (it == records.end()) break;
    const Found& f = it->second;
    std::vector<const uint8_t*> images(f.rec.entries.size());
    bool whole = true;
    std::vector<PageNo> lost_fresh;  // fresh pages not found whole at home
    for (uint32_t k = 0, ordinal = 0; k < images.size() && whole; ++k) {
      const DwEntry& e = f.rec.entries[k];
      if (e.slot == page::kHomeSlot) {
        absl::StatusOr<bool> there = home_present(e, seq);
        if (!there.ok()) return there.status();
        if (!*there) lost_fresh.push_back(e.page_no);
        continue;
      }
      images[k] = CopyOf(*area, f.rec, f.slot, k, ordinal++);
      if (images[k] != nullptr) continue;
      // A damaged image whose page reached home whole (the checksum the record names) is
      // present there.
      absl::StatusOr<bool> there = home_present(e, seq);
      if (!there.ok()) return there.status();
      whole = *there;
      if (!whole) bad_page = page::kDoublewriteFirst + e.slot;
    }
    if (whole && !lost_fresh.empty()) {
      // A crash loses the fresh pages of a record never acknowledged, and such a record's
      // images never went home. One of its images at home says it was durable: the fresh page
      // was damaged since, and stays so (reading it fails with DataLoss) rather than undoing
      // the acknowledged commits from here on.
      bool went_home = false;
      for (uint32_t k = 0; k < images.size() && !went_home; ++k) {
        if (!images[k]) continue;
        absl::StatusOr<bool> there = at_home(f.rec.entries[k].page_no, images[k]);
        if (!there.ok()) return there.status();
        went_home = *there;
      }
      if (!went_home) {
        whole = false;
        bad_page = lost_fresh.front();
      }
    }
    if (!whole) {
      for (uint32_t k = 0; k < images.size(); ++k) {
        if (images[k]) passed.emplace_back(f.rec.entries[k].page_no, images[k]);
      }
      break;
    }
    for (uint32_t k = 0; k < images.size(); ++k) newest[f.rec.entries[k].page_no] = images[k];
    out.committed.insert(out.committed.end(), f.rec.commits.begin(), f.rec.commits.end());
    ++out.applied;
    last_applied = &f;
  }
  // The slot a missing record page would have had: right after the last record applied. Past
  // the last record found, only a slot that holds something and does not verify (torn) counts.
  std::optional<uint32_t> missing_at;
  if (last_applied && (seq > max_seq || records.find(seq) == records.end())) {
    const uint32_t at = last_applied->slot + 1 +
                        static_cast<uint32_t>(std::count_if(
                            last_applied->rec.entries.begin(), last_applied->rec.entries.end(),
                            [](const DwEntry& e) { return e.slot != page::kHomeSlot; }));
    const uint8_t* p = at < area->slots ? area->slot(at) : nullptr;
    if (p && (seq <= max_seq ||
              (std::any_of(p, p + ps, [](uint8_t b) { return b != 0; }) && !RecordAt(*area, at)))) {
      missing_at = at;
      bad_page = page::kDoublewriteFirst + at;
    }
  }
  if (!live && (seq <= max_seq || missing_at)) {
    // A crash only loses records that were never acknowledged, and their pages never go home
    // (they go only after their record is durable, and so every record before it). A page at
    // home that holds the image of a record at or past the stop (and not the same bytes as an
    // image the walk applies) says that the stopping record had been durable and was damaged
    // since: the walk would silently undo acknowledged commits and mix page versions.
    for (uint64_t later = seq + 1; later <= max_seq; ++later) {
      auto it = records.find(later);
      if (it == records.end() || voided.contains(later)) continue;
      const Found& f = it->second;
      for (uint32_t k = 0, ordinal = 0; k < f.rec.entries.size(); ++k) {
        if (f.rec.entries[k].slot == page::kHomeSlot) continue;
        const uint8_t* img = CopyOf(*area, f.rec, f.slot, k, ordinal++);
        if (img) passed.emplace_back(f.rec.entries[k].page_no, img);
      }
    }
    if (missing_at) {
      // Its record page is gone: its images may still follow it, each recognised by its
      // ring checksum (seeded with the record's seq and its entry's index).
      for (uint32_t at = *missing_at + 1, ordinal = 0;
           at < area->slots && ordinal < page::DwMaxEntries(ps, 0); ++at, ++ordinal) {
        uint8_t* img = area->slot(at);
        const PageNo no = page::GetPageNo(img);
        if (no < page::DoublewriteEnd(ps)) continue;
        absl::StatusOr<const uint8_t*> home = read_home(no);
        if (!home.ok()) return home.status();
        // At home (the checksum field aside: the ring's replaced the page's own)?
        constexpr size_t kSum = page::hdr::kChecksum;
        if (*home == nullptr || std::memcmp(*home, img, kSum) != 0 ||
            std::memcmp(*home + kSum + 4, img + kSum + 4, ps - kSum - 4) != 0) {
          continue;
        }
        bool ours = false;
        for (uint32_t k = ordinal; k < ordinal + 256 && !ours; ++k) {
          ours = StoredChecksum(img) == page::CopyChecksum(img, ps, seq, k);
        }
        if (!ours) continue;
        util::Put32(img + kSum, StoredChecksum(*home));  // the page's own, as at home
        passed.emplace_back(no, img);
      }
    }
    for (const auto& [no, img] : passed) {
      auto older = newest.find(no);
      if (older != newest.end() && older->second != nullptr &&
          std::memcmp(older->second, img, ps) == 0) {
        continue;  // the same bytes as an image the walk applies: no telling them apart
      }
      absl::StatusOr<bool> there = at_home(no, img);
      if (!there.ok()) return there.status();
      if (!*there) continue;
      const std::string where = bad_page == UINT32_MAX
                                    ? absl::StrCat("the doublewrite area of ", src.path)
                                    : absl::StrCat("page ", bad_page, " of ", src.path);
      return absl::DataLossError(absl::StrCat(
          where, ": doublewrite record ", seq,
          " is damaged, yet pages of it or of later records reached their homes (page ", no,
          "): commits acknowledged after it cannot be recovered"));
    }
  }
  // Nothing past the stop was acknowledged: what those records commit is dead.
  for (; seq <= max_seq; ++seq) dead(seq);

  return w;
}

}  // namespace

absl::StatusOr<DwRecovery> RecoverDoublewrite(io::File* file, uint32_t ps) {
  absl::StatusOr<uint64_t> size = file->Size();
  if (!size.ok()) return size.status();
  DwSource src;
  src.size = *size;
  src.path = file->path();
  src.read = [file](uint64_t off, uint8_t* buf, size_t n) { return file->Read(off, buf, n); };
  absl::StatusOr<Walk> walk = WalkRecords(src, ps, /*live=*/false);
  if (!walk.ok()) return walk.status();
  DwRecovery& out = walk->out;
  auto& newest = walk->newest;
  const uint64_t max_seq = walk->max_seq;
  std::vector<PageNo> order;
  order.reserve(newest.size());
  for (const auto& [no, copy] : newest) {
    if (copy) order.push_back(no);
  }
  std::sort(order.begin(), order.end());
  std::vector<uint8_t> home(ps);
  for (PageNo no : order) {
    const uint8_t* copy = newest[no];
    const uint64_t off = uint64_t{no} * ps;
    bool torn = true;  // missing from the file counts as torn: the write never landed
    if (off + ps <= src.size) {
      if (absl::Status s = file->Read(off, home.data(), ps); !s.ok()) return s;
      if (std::memcmp(home.data(), copy, ps) == 0) continue;
      torn = !page::VerifyPage(home.data(), ps, no, nullptr).ok();
    }
    if (absl::Status s = file->Write(off, copy, ps); !s.ok()) return s;
    out.repaired.push_back({no, torn});
  }
  out.next_seq = max_seq + 1;
  out.declared = walk->void_through;
  if (!walk->records.empty() || !walk->voided.empty()) {
    // Every record is applied or dead: void them all, so that the session may reuse their slots.
    if (!out.repaired.empty()) {
      ++out.syncs;
      if (absl::Status s = file->Sync(); !s.ok()) return s;
    }
    if (absl::Status s = PutMarker(file, ps, out.next_marker, out.marker_serial++, max_seq, {});
        !s.ok()) {
      return s;
    }
    ++out.syncs;
    if (absl::Status s = file->Sync(); !s.ok()) return s;
    out.next_marker ^= 1;
    out.declared = max_seq;
  }
  return std::move(out);
}

absl::StatusOr<absl::flat_hash_map<PageNo, std::vector<uint8_t>>> ReadDoublewriteImages(
    const DwSource& src, uint32_t page_size) {
  absl::StatusOr<Walk> walk = WalkRecords(src, page_size, /*live=*/true);
  if (!walk.ok()) return walk.status();
  absl::flat_hash_map<PageNo, std::vector<uint8_t>> out;
  for (const auto& [no, img] : walk->newest) {
    if (img) out[no].assign(img, img + page_size);
  }
  return out;
}

// ---------------------------------------------------------------- Doublewrite

Doublewrite::Doublewrite(io::File* file, uint32_t page_size, const DwRecovery& start, DwHooks hooks,
                         bool forced_writes)
    : file_(file),
      ps_(page_size),
      ring_(page::DoublewriteSlots(page_size) - page::kMarkerSlots),
      hooks_(std::move(hooks)),
      forced_(forced_writes),
      mirror_(util::AllocPageBlock(size_t{ring_} * ps_)),
      next_seq_(start.next_seq),
      retired_(start.declared),
      declared_(start.declared),
      next_marker_(start.next_marker),
      marker_serial_(start.marker_serial) {
  writer_ = std::thread([this] { WriterLoop(); });
}

Doublewrite::~Doublewrite() { StopWriter(); }

void Doublewrite::StopWriter() {
  {
    util::MutexLock g(mu_);
    stop_ = true;
  }
  writer_cv_.NotifyAll();
  cv_.NotifyAll();
  if (writer_.joinable()) writer_.join();
}

void Doublewrite::WriterLoop() {
  for (;;) {
    uint64_t through = 0;
    {
      util::MutexLock g(mu_);
      writer_cv_.Wait(
          g, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || want_through_ != 0; });
      if (stop_) return;
      through = want_through_;
      want_through_ = 0;
    }
    (void)WriteHomes(through);  // an error stays in home_error_: a commit that needs room hears it
  }
}

uint32_t Doublewrite::max_items(size_t commits) const {
  return std::min(max_entries(commits), max_slots() - 1);
}

uint32_t Doublewrite::max_entries(size_t commits) const {
  return page::DwMaxEntries(ps_, static_cast<uint32_t>(commits));
}

void Doublewrite::AdvanceRetired() {
  for (const Flight& f : flights_) {
    if (f.seq <= retired_) continue;
    if (!f.home_done || !hooks_.durable(f.home_epoch)) break;
    retired_ = f.seq;
  }
}

void Doublewrite::Declared(uint64_t through) {
  if (through <= declared_) return;
  declared_ = through;
  while (!flights_.empty() && flights_.front().seq <= declared_) flights_.pop_front();
  if (named_.size() > 2 * size_t{ring_}) {
    absl::erase_if(named_, [through](const auto& e) { return e.second <= through; });
  }
  std::erase_if(voids_, [&](const Void& v) { return v.seq <= through; });
}

std::vector<uint64_t> Doublewrite::VoidSeqs() const {
  std::vector<uint64_t> out;
  out.reserve(voids_.size());
  for (const Void& v : voids_) out.push_back(v.seq);
  return out;
}

absl::Status Doublewrite::WriteMarker(uint64_t through) {
  std::vector<uint64_t> listed = VoidSeqs();
  if (absl::Status s =
          PutMarker(file_, ps_, next_marker_, marker_serial_++, through, std::move(listed));
      !s.ok()) {
    return s;
  }
  next_marker_ ^= 1;
  uint64_t epoch = 0;
  if (forced_) {
    if (absl::Status s = hooks_.sync(&epoch); !s.ok()) return s;
  }
  for (Void& v : voids_) v.durable = true;
  Declared(through);
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Doublewrite::MakeRoom(uint32_t n, util::MutexLock& lock) {
  bool stalled = false;
  for (;;) {
    const uint32_t start = pos_ + n <= ring_ ? pos_ : 0;
    const Flight* block = nullptr;  // the newest record in the way
    for (const Flight& f : flights_) {
      if (f.first < start + n && start < f.first + f.n) block = &f;
    }
    if (!block && voids_.size() < page::kDwMaxVoids) return start;
    const uint64_t need = block ? block->seq : voids_.back().seq;
    AdvanceRetired();
    if (retired_ >= need) {
      // Their pages are durable at home (or they are void), but no durable page says so yet.
      if (absl::Status s = WriteMarker(retired_); !s.ok()) return s;
      continue;
    }
    const Flight* oldest = nullptr;
    for (const Flight& f : flights_) {
      if (f.seq > retired_) {
        oldest = &f;
        break;
      }
    }
    if (stop_) return absl::FailedPreconditionError("doublewrite area: the database is closing");
    if (oldest && !oldest->synced) {
      cv_.Wait(lock);  // its writer is syncing it
      continue;
    }
    if (oldest && oldest->home_done) {
      uint64_t epoch = 0;  // written home, not durable yet
      if (absl::Status s = hooks_.sync(&epoch); !s.ok()) return s;
      continue;
    }
    // Its images wait for the home writer: ask for a round now, and wait for it.
    if (!stalled) stalls_.fetch_add(1, std::memory_order_relaxed);
    stalled = true;
    const uint64_t round = home_rounds_;
    want_through_ = UINT64_MAX;
    writer_cv_.NotifyOne();
    cv_.Wait(lock,
             [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return home_rounds_ != round || stop_; });
    if (!home_error_.ok()) {
      return absl::Status(home_error_.code(),
                          absl::StrCat("doublewrite area full: pages could not be written home (",
                                       home_error_.message(),
                                       "); the area holds them, and the next open writes them"));
    }
  }
}

bool Doublewrite::NeedsImage(const Item& item) const {
  // A fresh page goes home directly only if no record recovery may still walk names its page
  // number (from before it was freed): a home write torn by a crash, in a record that then
  // fails, would make that record look incomplete; and an older image not yet home could
  // overwrite it. Otherwise it is copied like any page.
  if (!item.fresh) return true;
  auto it = named_.find(item.no);
  return it != named_.end() && it->second > declared_;
}

bool Doublewrite::AllGoHomeFresh(std::span<const Item> items) {
  util::MutexLock lock(mu_);
  return std::none_of(items.begin(), items.end(), [&](const Item& item) {
    mu_.AssertHeld();
    return NeedsImage(item);
  });
}

absl::StatusOr<uint64_t> Doublewrite::Write(std::span<const Item> items,
                                            std::span<const uint64_t> commits, uint32_t* pages,
                                            uint32_t slot_budget, size_t* taken) {
  DwRecord rec;
  const uint32_t budget = slot_budget == 0 ? max_slots() : std::min(slot_budget, max_slots());
  const size_t offered = items.size();
  items = items.first(std::min<size_t>(offered, max_entries(commits.size())));
  // The number is handed out and the record written under one lock, so records reach the file
  // in sequence order: a sync after this write covers every lower record.
  util::MutexLock lock(mu_);
  std::vector<bool> image(items.size());
  uint32_t images = 0;
  size_t take = 0;
  for (; take < items.size(); ++take) {
    const bool img = NeedsImage(items[take]);
    if (1 + images + img > budget) break;
    image[take] = img;
    images += img;
  }
  if (take == 0 || (taken == nullptr && take < offered)) {
    return absl::InternalError("doublewrite: a record asked for more than the ring gives it");
  }
  if (take < offered) commits = {};  // the record that takes the last items names them
  items = items.first(take);
  if (taken) *taken = take;
  const uint32_t n = 1 + images;
  absl::StatusOr<uint32_t> start = MakeRoom(n, lock);
  if (!start.ok()) return start.status();
  const uint32_t first = *start;
  AdvanceRetired();
  rec.seq = next_seq_++;
  rec.retired_through = retired_;
  rec.voids = VoidSeqs();
  rec.commits.assign(commits.begin(), commits.end());
  flights_.push_back({rec.seq, first, n});
  Flight& flight = flights_.back();
  flight.declares = rec.retired_through;
  flight.listed_voids = rec.voids;
  flight.images.reserve(images);
  pos_ = first + n == ring_ ? 0 : first + n;
  rec.entries.reserve(items.size());
  std::vector<io::WriteRequest> reqs;
  reqs.reserve(1 + items.size());
  reqs.push_back({uint64_t{SlotPage(first)} * ps_, Mirror(first), ps_});
  uint32_t index = first + 1;
  for (uint32_t k = 0; k < items.size(); ++k) {
    named_[items[k].no] = rec.seq;
    const uint32_t own = StoredChecksum(items[k].bytes);
    if (!image[k]) {
      rec.entries.push_back({items[k].no, page::kHomeSlot, own});
      reqs.push_back({uint64_t{items[k].no} * ps_, items[k].bytes, ps_});
      continue;
    }
    uint8_t* img = Mirror(index);
    std::memcpy(img, items[k].bytes, ps_);
    util::Put32(img + page::hdr::kChecksum, page::CopyChecksum(img, ps_, rec.seq, k));
    rec.entries.push_back({items[k].no, page::kMarkerSlots + index, own});
    reqs.push_back({uint64_t{SlotPage(index)} * ps_, img, ps_});
    flight.images.emplace_back(items[k].no, index);
    ++index;
  }
  // The record page lives in its slot's mirror too (never read back: it is not an image).
  page::WriteDwRecord(Mirror(first), ps_, SlotPage(first), rec);
  absl::Status s = file_->WriteBatch(reqs);
  // The mirror keeps each image as the page has it at home.
  for (uint32_t k = 0, at = first + 1; k < items.size(); ++k) {
    if (image[k]) util::Put32(Mirror(at++) + page::hdr::kChecksum, rec.entries[k].checksum);
  }
  if (!s.ok()) {
    FailedLocked(rec.seq);
    return s;
  }
  *pages = n;
  return rec.seq;
}

absl::Status Doublewrite::Synced(uint64_t seq) {
  util::MutexLock g(mu_);
  Flight* flight = nullptr;
  for (Flight& f : flights_) {
    if (f.seq != seq) continue;
    flight = &f;
    for (Void& v : voids_) {
      if (std::find(f.listed_voids.begin(), f.listed_voids.end(), v.seq) != f.listed_voids.end()) {
        v.durable = true;
      }
    }
    break;
  }
  if (flight == nullptr) return absl::InternalError("doublewrite: unknown record synced");
  Declared(flight->declares);  // the record page is durable: so is what it declared (not itself)
  // A lower record that failed after this one was written is not listed by it: until some
  // durable page lists it, recovery would stop there, before this record.
  const bool undeclared = std::any_of(voids_.begin(), voids_.end(),
                                      [&](const Void& v) { return v.seq < seq && !v.durable; });
  if (undeclared) {
    if (absl::Status s = WriteMarker(declared_); !s.ok()) return s;  // the caller voids it
  }
  flight->synced = true;
  if (flight->images.empty()) {
    flight->home_done = true;  // its fresh pages went home with it
  } else {
    // Its images are now their pages' newest durable versions, until they go home.
    unhomed_ += flight->n;
    util::MutexLock p(pend_mu_);
    for (const auto& [no, index] : flight->images) {
      Pending& e = pending_[no];
      if (e.seq < seq) e = {seq, index};
    }
  }
  cv_.NotifyAll();
  AskSteadyRound();
  return absl::OkStatus();
}

void Doublewrite::FailedLocked(uint64_t seq) {
  voids_.push_back({seq, false});
  for (Flight& f : flights_) {
    if (f.seq == seq) {
      // Void: nothing of it goes home, so nothing holds its slots back once it is declared.
      f.synced = true;
      f.home_done = true;
      f.home_epoch = 0;
      f.images.clear();
      break;
    }
  }
  cv_.NotifyAll();
}

void Doublewrite::Failed(uint64_t seq) {
  util::MutexLock g(mu_);
  FailedLocked(seq);
}

bool Doublewrite::ReadPending(PageNo no, uint8_t* out) {
  util::MutexLock p(pend_mu_);
  auto it = pending_.find(no);
  if (it == pending_.end()) return false;
  std::memcpy(out, Mirror(it->second.index), ps_);
  return true;
}

void Doublewrite::AskSteadyRound() {
  const uint32_t high = ring_ / 2;
  if (unhomed_ <= high) return;
  uint32_t left = unhomed_;
  uint64_t through = 0;
  for (const Flight& f : flights_) {
    if (left <= high) break;
    if (!f.synced || f.home_done) continue;
    left -= f.n;
    through = f.seq;
  }
  if (through > want_through_) {
    want_through_ = through;
    writer_cv_.NotifyOne();
  }
}

absl::Status Doublewrite::WriteHomes(uint64_t through) {
  util::MutexLock h(home_mu_);
  struct Out {
    PageNo no;
    uint64_t seq;
    uint32_t index;
  };
  std::vector<Out> out;
  std::vector<uint64_t> covered;  // synced records whose every image is among `out`
  {
    util::MutexLock g(mu_);
    for (const Flight& f : flights_) {
      if (f.seq > through) break;
      if (f.synced && !f.home_done) covered.push_back(f.seq);
    }
    util::MutexLock p(pend_mu_);
    out.reserve(pending_.size());
    for (const auto& [no, e] : pending_) {
      if (e.seq <= through) out.push_back({no, e.seq, e.index});
    }
  }
  if (out.empty() && covered.empty()) return absl::OkStatus();
  std::sort(out.begin(), out.end(), [](const Out& a, const Out& b) { return a.no < b.no; });
  std::vector<io::WriteRequest> reqs;
  reqs.reserve(out.size());
  for (const Out& o : out) reqs.push_back({uint64_t{o.no} * ps_, Mirror(o.index), ps_});
  absl::Status s = out.empty() ? absl::OkStatus() : file_->WriteBatch(reqs);
  const uint64_t epoch = hooks_.write_epoch();  // after the writes completed
  if (s.ok() && !out.empty()) hooks_.wrote_home(out.size());
  {
    util::MutexLock g(mu_);
    if (s.ok()) {
      for (Flight& f : flights_) {
        if (!std::binary_search(covered.begin(), covered.end(), f.seq)) continue;
        f.home_done = true;
        f.home_epoch = epoch;
        unhomed_ -= f.n;
      }
      util::MutexLock p(pend_mu_);
      for (const Out& o : out) {
        auto it = pending_.find(o.no);
        if (it != pending_.end() && it->second.seq == o.seq) pending_.erase(it);
      }
    }
    home_error_ = s;
    ++home_rounds_;
  }
  cv_.NotifyAll();
  return s;
}

absl::Status Doublewrite::RetireAll() {
  util::MutexLock g(mu_);
  if (flights_.empty() && voids_.empty()) return absl::OkStatus();
  AdvanceRetired();
  return WriteMarker(retired_);  // every record whose pages are durable at home
}

}  // namespace ember::cache
