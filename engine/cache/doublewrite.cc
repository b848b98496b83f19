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

absl::StatusOr<Area> ReadArea(io::File* file, uint32_t ps) {
  Area a;
  a.ps = ps;
  a.slots = page::DoublewriteSlots(ps);
  a.bytes.assign(size_t{a.slots} * ps, 0);
  absl::StatusOr<uint64_t> size = file->Size();
  if (!size.ok()) return size.status();
  const uint64_t first = uint64_t{page::kDoublewriteFirst} * ps;
  const uint64_t avail = *size > first ? (*size - first) / ps : 0;
  const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(avail, a.slots));
  std::vector<uint8_t*> bufs(n);
  for (uint32_t i = 0; i < n; ++i) bufs[i] = a.slot(i);
  if (n > 0) {
    if (absl::Status s = file->ReadBlocks(first, ps, bufs); !s.ok()) return s;
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

}  // namespace

absl::StatusOr<DwRecovery> RecoverDoublewrite(io::File* file, uint32_t ps) {
  absl::StatusOr<Area> area = ReadArea(file, ps);
  if (!area.ok()) return area.status();
  struct Found {
    uint32_t slot;
    DwRecord rec;
  };
  absl::flat_hash_map<uint64_t, Found> records;  // by seq
  absl::flat_hash_set<uint64_t> voided;
  uint64_t void_through = 0, max_seq = 0, newest_marker = 0;
  DwRecovery out;
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
  absl::StatusOr<uint64_t> file_size = file->Size();
  if (!file_size.ok()) return file_size.status();
  std::vector<uint8_t> probe(ps);
  // Whether the fresh page `e` of record `seq` reached the disk whole.
  auto home_present = [&](const DwEntry& e, uint64_t seq) -> absl::StatusOr<bool> {
    if (named[e.page_no] > seq) return true;
    const uint64_t off = uint64_t{e.page_no} * ps;
    if (off + ps > *file_size) return false;
    if (absl::Status s = file->Read(off, probe.data(), ps); !s.ok()) return s;
    return StoredChecksum(probe.data()) == e.checksum &&
           page::VerifyPage(probe.data(), ps, e.page_no, nullptr).ok();
  };

  // The chain: consecutive records past the void ones, each applied whole, up to the first that
  // is missing or incomplete. Each page's newest entry wins: an image, or (null) a fresh page
  // already at home, which no older image may overwrite.
  absl::flat_hash_map<PageNo, const uint8_t*> newest;
  auto dead = [&](uint64_t s) {
    auto it = records.find(s);
    if (it == records.end()) return;
    out.dead.insert(out.dead.end(), it->second.rec.commits.begin(), it->second.rec.commits.end());
  };
  uint64_t seq = void_through + 1;
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
    for (uint32_t k = 0, ordinal = 0; k < images.size() && whole; ++k) {
      if (f.rec.entries[k].slot == page::kHomeSlot) {
        absl::StatusOr<bool> there = home_present(f.rec.entries[k], seq);
        if (!there.ok()) return there.status();
        whole = *there;
        continue;
      }
      images[k] = CopyOf(*area, f.rec, f.slot, k, ordinal++);
      whole = images[k] != nullptr;
    }
    if (!whole) break;
    for (uint32_t k = 0; k < images.size(); ++k) newest[f.rec.entries[k].page_no] = images[k];
    out.committed.insert(out.committed.end(), f.rec.commits.begin(), f.rec.commits.end());
    ++out.applied;
  }
  // Nothing past the stop was acknowledged: what those records commit is dead.
  for (; seq <= max_seq; ++seq) dead(seq);

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
    if (off + ps <= *file_size) {
      if (absl::Status s = file->Read(off, home.data(), ps); !s.ok()) return s;
      if (std::memcmp(home.data(), copy, ps) == 0) continue;
      torn = !page::VerifyPage(home.data(), ps, no, nullptr).ok();
    }
    if (absl::Status s = file->Write(off, copy, ps); !s.ok()) return s;
    out.repaired.push_back({no, torn});
  }
  out.next_seq = max_seq + 1;
  out.declared = void_through;
  if (!records.empty() || !voided.empty()) {
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
      next_seq_(start.next_seq),
      retired_(start.declared),
      declared_(start.declared),
      next_marker_(start.next_marker),
      marker_serial_(start.marker_serial) {}

uint32_t Doublewrite::max_items(size_t commits) const {
  return std::min(page::DwMaxEntries(ps_, static_cast<uint32_t>(commits)), ring_ / 3 - 1);
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
    if (oldest && oldest->failed) {
      // Its pages may be torn at home, and only its copies can repair them until they are
      // written again: the area cannot move past it.
      return absl::Status(oldest->error.code(),
                          absl::StrCat("doublewrite area full behind a failed page write (",
                                       oldest->error.message(),
                                       "); the pages are repaired when the database is opened "
                                       "again"));
    }
    if (oldest && oldest->home_done) {
      uint64_t epoch = 0;
      if (absl::Status s = hooks_.sync(&epoch); !s.ok()) return s;
    } else {
      cv_.Wait(lock);  // another thread's home writes are in flight
    }
  }
}

absl::StatusOr<uint64_t> Doublewrite::Write(std::span<const Item> items,
                                            std::span<const uint64_t> commits) {
  uint32_t images = 0;
  for (const Item& it : items) images += !it.fresh;
  const uint32_t n = 1 + images;
  DwRecord rec;
  // The number is handed out and the record written under one lock, so records reach the file
  // in sequence order: a sync after this write covers every lower record.
  util::MutexLock lock(mu_);
  absl::StatusOr<uint32_t> start = MakeRoom(n, lock);
  if (!start.ok()) return start.status();
  const uint32_t first = *start;
  AdvanceRetired();
  rec.seq = next_seq_++;
  rec.retired_through = retired_;
  rec.voids = VoidSeqs();
  rec.commits.assign(commits.begin(), commits.end());
  flights_.push_back({rec.seq, first, n});
  flights_.back().declares = rec.retired_through;
  flights_.back().listed_voids = rec.voids;
  pos_ = first + n == ring_ ? 0 : first + n;
  rec.entries.reserve(items.size());
  uint32_t slot = page::kMarkerSlots + first + 1;
  for (uint32_t k = 0; k < items.size(); ++k) {
    uint8_t* img = items[k].bytes;
    const uint32_t own = StoredChecksum(img);
    rec.entries.push_back({items[k].no, items[k].fresh ? page::kHomeSlot : slot++, own});
    if (!items[k].fresh) {
      util::Put32(img + page::hdr::kChecksum, page::CopyChecksum(img, ps_, rec.seq, k));
    }
  }
  // WriteDwRecord formats the whole page: no need to zero it first (one per flush).
  const std::unique_ptr<uint8_t[]> head = std::make_unique_for_overwrite<uint8_t[]>(ps_);
  page::WriteDwRecord(head.get(), ps_, SlotPage(first), rec);
  std::vector<io::WriteRequest> reqs;
  reqs.reserve(1 + items.size());
  reqs.push_back({uint64_t{SlotPage(first)} * ps_, head.get(), ps_});
  for (uint32_t k = 0; k < items.size(); ++k) {
    const uint64_t at = items[k].fresh
                            ? uint64_t{items[k].no} * ps_
                            : uint64_t{page::kDoublewriteFirst + rec.entries[k].slot} * ps_;
    reqs.push_back({at, items[k].bytes, ps_});
  }
  absl::Status s = file_->WriteBatch(reqs);
  for (uint32_t k = 0; k < items.size(); ++k) {
    util::Put32(items[k].bytes + page::hdr::kChecksum, rec.entries[k].checksum);
  }
  if (!s.ok()) {
    FailedLocked(rec.seq);
    return s;
  }
  return rec.seq;
}

absl::Status Doublewrite::Synced(uint64_t seq) {
  util::MutexLock g(mu_);
  uint64_t declares = 0;
  for (const Flight& f : flights_) {
    if (f.seq != seq) continue;
    declares = f.declares;
    for (Void& v : voids_) {
      if (std::find(f.listed_voids.begin(), f.listed_voids.end(), v.seq) != f.listed_voids.end()) {
        v.durable = true;
      }
    }
    break;
  }
  Declared(declares);  // the record page is durable: so is what it declared
  // A lower record that failed after this one was written is not listed by it: until some
  // durable page lists it, recovery would stop there, before this record.
  const bool undeclared = std::any_of(voids_.begin(), voids_.end(),
                                      [&](const Void& v) { return v.seq < seq && !v.durable; });
  if (undeclared) return WriteMarker(declared_);
  return absl::OkStatus();
}

void Doublewrite::FailedLocked(uint64_t seq) {
  voids_.push_back({seq, false});
  for (Flight& f : flights_) {
    if (f.seq == seq) {
      // Void: nothing of it goes home, so nothing holds its slots back once it is declared.
      f.home_done = true;
      f.home_epoch = 0;
      break;
    }
  }
  cv_.NotifyAll();
}

void Doublewrite::Failed(uint64_t seq) {
  util::MutexLock g(mu_);
  FailedLocked(seq);
}

void Doublewrite::HomeWritten(uint64_t seq, uint64_t epoch, const absl::Status& result,
                              std::span<const PageNo> copied) {
  {
    util::MutexLock g(mu_);
    for (Flight& f : flights_) {
      if (f.seq < seq && f.failed && result.ok()) {
        // Pages an earlier failed write may have torn are whole at home again once this write
        // is durable.
        for (PageNo no : copied) f.pending.erase(no);
        f.home_epoch = std::max(f.home_epoch, epoch);
        if (f.pending.empty()) {
          f.failed = false;
          f.home_done = true;
        }
      } else if (f.seq == seq) {
        if (result.ok()) {
          f.home_done = true;
          f.home_epoch = epoch;
        } else {
          f.failed = true;
          f.error = result;
          f.pending.insert(copied.begin(), copied.end());
        }
        break;
      }
    }
  }
  cv_.NotifyAll();
}

absl::Status Doublewrite::RetireAll() {
  util::MutexLock g(mu_);
  if (flights_.empty() && voids_.empty()) return absl::OkStatus();
  return WriteMarker(next_seq_ - 1);  // every record so far
}

}  // namespace ember::cache
