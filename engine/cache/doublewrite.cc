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

// The copy an entry names, if its slot still holds exactly that copy (not torn, not replaced).
const uint8_t* CopyOf(Area& a, const DwEntry& e) {
  if (e.slot < page::kMarkerSlots || e.slot >= a.slots) return nullptr;
  const uint8_t* p = a.slot(e.slot);
  if (StoredChecksum(p) != e.checksum) return nullptr;
  if (!page::VerifyPage(p, a.ps, e.page_no, nullptr).ok()) return nullptr;
  return p;
}

// Writes a marker (a record page without entries) into marker slot `slot`.
absl::Status PutMarker(io::File* file, uint32_t ps, uint32_t slot, uint64_t seq, uint64_t through) {
  std::vector<uint8_t> p(ps);
  DwRecord r;
  r.seq = seq;
  r.retired_through = through;
  const PageNo no = page::kDoublewriteFirst + slot;
  page::WriteDwRecord(p.data(), ps, no, r);
  return file->Write(uint64_t{no} * ps, p.data(), ps);
}

}  // namespace

absl::StatusOr<DwRecovery> RecoverDoublewrite(io::File* file, uint32_t ps) {
  absl::StatusOr<Area> area = ReadArea(file, ps);
  if (!area.ok()) return area.status();
  struct Found {
    uint32_t slot;
    DwRecord rec;
  };
  std::vector<Found> records;
  uint64_t void_through = 0, max_seq = 0, newest_marker_seq = 0;
  DwRecovery out;
  for (uint32_t i = 0; i < area->slots; ++i) {
    std::optional<DwRecord> r = RecordAt(*area, i);
    if (!r) continue;
    void_through = std::max(void_through, r->retired_through);
    max_seq = std::max(max_seq, r->seq);
    if (i < page::kMarkerSlots) {
      if (r->seq >= newest_marker_seq) {
        newest_marker_seq = r->seq;
        out.next_marker = i ^ 1;
      }
    } else {
      records.push_back({i, std::move(*r)});
    }
  }
  std::erase_if(records, [&](const Found& f) { return f.rec.seq <= void_through; });
  std::sort(records.begin(), records.end(),
            [](const Found& a, const Found& b) { return a.rec.seq < b.rec.seq; });

  // Each page's newest record decides: its copy, or nothing (a tombstone, or a copy that did not
  // survive: its home write never started, so the page holds what an older record or the disk
  // has).
  absl::flat_hash_map<PageNo, const uint8_t*> newest;
  for (const Found& f : records) {
    for (const DwEntry& e : f.rec.entries) {
      if (e.slot == page::kTombstoneSlot) {
        newest[e.page_no] = nullptr;
      } else if (const uint8_t* copy = CopyOf(*area, e)) {
        newest[e.page_no] = copy;
      }
    }
  }
  std::vector<PageNo> order;
  for (const auto& [no, copy] : newest) {
    if (copy) order.push_back(no);
  }
  std::sort(order.begin(), order.end());
  absl::StatusOr<uint64_t> size = file->Size();
  if (!size.ok()) return size.status();
  std::vector<uint8_t> home(ps);
  for (PageNo no : order) {
    const uint8_t* copy = newest[no];
    const uint64_t off = uint64_t{no} * ps;
    bool torn = true;  // missing from the file counts as torn: the write never landed
    if (off + ps <= *size) {
      if (absl::Status s = file->Read(off, home.data(), ps); !s.ok()) return s;
      if (std::memcmp(home.data(), copy, ps) == 0) continue;
      torn = !page::VerifyPage(home.data(), ps, no, nullptr).ok();
    }
    if (absl::Status s = file->Write(off, copy, ps); !s.ok()) return s;
    out.repaired.push_back({no, torn});
  }
  out.next_seq = max_seq + 1;
  out.declared = void_through;
  if (!records.empty()) {
    // Every record is applied: void them all, so that the session may reuse their slots and a
    // fresh page needs no tombstone against them.
    if (!out.repaired.empty()) {
      if (absl::Status s = file->Sync(); !s.ok()) return s;
    }
    const uint64_t seq = out.next_seq++;
    if (absl::Status s = PutMarker(file, ps, out.next_marker, seq, seq); !s.ok()) return s;
    if (absl::Status s = file->Sync(); !s.ok()) return s;
    out.next_marker ^= 1;
    out.declared = seq;
  }
  return out;
}

// ---------------------------------------------------------------- Doublewrite

Doublewrite::Doublewrite(io::File* file, uint32_t page_size, const DwRecovery& start, DwHooks hooks,
                         bool forced_writes)
    : file_(file),
      ps_(page_size),
      ring_(page::DoublewriteSlots(page_size) - page::kMarkerSlots),
      max_items_(std::min(page::DwMaxEntries(page_size), ring_ / 3 - 1)),
      hooks_(std::move(hooks)),
      forced_(forced_writes),
      next_seq_(start.next_seq),
      retired_(start.declared),
      declared_(start.declared),
      next_marker_(start.next_marker) {}

bool Doublewrite::HasRecord(PageNo no) {
  util::MutexLock g(mu_);
  return window_.contains(no);
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
  absl::erase_if(window_, [&](const auto& kv) { return kv.second <= through; });
}

absl::Status Doublewrite::WriteMarker(uint64_t through) {
  const uint64_t seq = next_seq_++;
  if (absl::Status s = PutMarker(file_, ps_, next_marker_, seq, through); !s.ok()) return s;
  next_marker_ ^= 1;
  uint64_t epoch = 0;
  if (forced_) {
    if (absl::Status s = hooks_.sync(&epoch); !s.ok()) return s;
  }
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
    if (!block) return start;
    const uint64_t need = block->seq;
    AdvanceRetired();
    if (retired_ >= need) {
      // Their pages are durable at home, but no durable record page says so yet.
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

absl::StatusOr<uint64_t> Doublewrite::Protect(std::span<const Item> items,
                                              uint64_t* durable_epoch) {
  *durable_epoch = 0;
  uint32_t copies = 0;
  for (const Item& it : items) copies += it.bytes != nullptr;
  const uint32_t n = 1 + copies;
  DwRecord rec;
  uint32_t first = 0;
  {
    util::MutexLock lock(mu_);
    absl::StatusOr<uint32_t> start = MakeRoom(n, lock);
    if (!start.ok()) return start.status();
    first = *start;
    AdvanceRetired();
    rec.seq = next_seq_++;
    rec.retired_through = retired_;
    flights_.push_back({rec.seq, first, n});
    pos_ = first + n == ring_ ? 0 : first + n;
    uint32_t slot = page::kMarkerSlots + first + 1;
    for (const Item& it : items) {
      DwEntry e;
      e.page_no = it.no;
      if (it.bytes) {
        e.slot = slot++;
        e.checksum = StoredChecksum(it.bytes);
      }
      rec.entries.push_back(e);
      window_[it.no] = rec.seq;
    }
  }
  // WriteDwRecord formats the whole page: no need to zero it first (one per flush).
  const std::unique_ptr<uint8_t[]> head = std::make_unique_for_overwrite<uint8_t[]>(ps_);
  page::WriteDwRecord(head.get(), ps_, SlotPage(first), rec);
  std::vector<io::WriteRequest> reqs;
  reqs.reserve(n);
  reqs.push_back({uint64_t{SlotPage(first)} * ps_, head.get(), ps_});
  uint32_t at = first + 1;
  for (const Item& it : items) {
    if (it.bytes) reqs.push_back({uint64_t{SlotPage(at++)} * ps_, it.bytes, ps_});
  }
  absl::Status s = file_->WriteBatch(reqs);
  if (s.ok() && forced_ && copies > 0) s = hooks_.sync(durable_epoch);
  if (!s.ok()) {
    // No home write follows. The record may still be applied at recovery, which is what a
    // completed write would have left (the pages' prerequisites are durable), so it retires at
    // once.
    HomeWritten(rec.seq, 0, absl::OkStatus(), {});
    *durable_epoch = 0;
    return s;
  }
  if (!forced_ || copies > 0) {
    util::MutexLock g(mu_);
    Declared(rec.retired_through);  // this record page is durable (or, unforced, written)
  }
  return rec.seq;
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
  if (flights_.empty()) return absl::OkStatus();
  return WriteMarker(next_seq_);  // the marker's own seq: every record before it
}

}  // namespace ember::cache
