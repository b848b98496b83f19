// libFuzzer target: every page decoder on its own, called directly on one page of any bytes,
// thousands of times a second (db_page reaches the same code through a whole database, about
// twenty inputs a second). The first byte picks the page type, the second whether the page
// starts from a real page of that type or from zeros, whether the input overwrites or flips its
// bytes, and whether the page is then sealed (page number and checksum made right, so that what
// a bug or a checksumming device could write gets past VerifyPage) or keeps the checksum it has.
// Then each decoder and accessor the engine runs on a page of that type after VerifyPage: data
// page lines and the record headers and bodies in them, pointer page slots, TIP states, PIP
// searches, the header fields, B-tree headers, entry walks and searches, BLOB page counts,
// doublewrite records. None may read or write outside the page or loop without end; where a
// decoder accepts a page, what it says must hold (a line lies inside the page, a found free
// page is free, a key search agrees with the decoded entries), and the in-place writers the
// engine runs on an accepted page (line insert, replace and delete; B-tree insert, remove and
// tail split) must leave a page the same decoder accepts, with exactly the change made.
#include <algorithm>
#include <cstring>

#include "ember/ember.h"
#include "engine/blob/blob_format.h"
#include "engine/page/blob_page.h"
#include "engine/page/btree_page.h"
#include "engine/page/data_page.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/header_page.h"
#include "engine/page/page.h"
#include "engine/page/pip.h"
#include "engine/page/pointer_page.h"
#include "engine/page/tip.h"
#include "engine/record/record_format.h"
#include "engine/util/coding.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/template_db.h"

using namespace ember;

namespace {

constexpr uint32_t kPs = 4096;
constexpr int kTypes = 10;  // PageType kFree .. kDoublewrite

// A page as a heap block of exactly the page size: ASan reports a byte read past it.
using Page = std::vector<uint8_t>;

struct TemplatePage {
  Page bytes;
  page::PageNo no = 0;
};

// One real page of each type (several B-tree and data pages: leaves and internal nodes,
// primary and secondary data), from a small database made once.
const std::vector<std::vector<TemplatePage>>& Templates() {
  static const std::vector<std::vector<TemplatePage>> pages = [] {
    Options o = fuzz::SmallDbOptions(32);
    o.gc_policy = GcPolicy::kCooperative;
    const std::string file =
        fuzz::MakeTemplateDb(fuzz::ScratchDir() + "/page-template.edb", o, {400, 40, 150});
    std::vector<std::vector<TemplatePage>> out(kTypes);
    for (size_t p = 0; (p + 1) * kPs <= file.size(); ++p) {
      const uint8_t type = static_cast<uint8_t>(file[p * kPs]);
      if (type >= kTypes || out[type].size() >= 4) continue;
      if (type == 0 && file.compare(p * kPs, kPs, std::string(kPs, '\0')) != 0) continue;
      const uint8_t* b = reinterpret_cast<const uint8_t*>(file.data()) + p * kPs;
      // B-tree pages: a leaf and an internal node if there are both.
      if (type == static_cast<uint8_t>(page::PageType::kBtree) && !out[type].empty() &&
          std::any_of(out[type].begin(), out[type].end(),
                      [&](const TemplatePage& t) {
                        return t.bytes[page::bt::kLevel] == b[page::bt::kLevel];
                      }) &&
          out[type].size() >= 2) {
        continue;
      }
      out[type].push_back({Page(b, b + kPs), static_cast<page::PageNo>(p)});
    }
    // Types the file may lack (a clean close leaves no doublewrite record, nothing is typed
    // index_root): made here as the engine makes them.
    if (out[static_cast<int>(page::PageType::kDoublewrite)].empty()) {
      Page pg(kPs);
      page::DwRecord r;
      r.seq = 7;
      r.retired_through = 5;
      for (uint32_t i = 0; i < 20; ++i) r.entries.push_back({100 + i, 3 + i, 0x1234 * i});
      r.voids = {4};
      r.commits = {40, 41};
      page::WriteDwRecord(pg.data(), kPs, page::kDoublewriteFirst + 2, r);
      out[static_cast<int>(page::PageType::kDoublewrite)].push_back(
          {pg, page::kDoublewriteFirst + 2});
    }
    for (int t = 0; t < kTypes; ++t) {
      if (!out[t].empty()) continue;
      Page pg(kPs);
      page::InitPage(pg.data(), kPs, static_cast<page::PageType>(t), 9);
      out[t].push_back({pg, 9});
    }
    return out;
  }();
  return pages;
}

bool InPage(const Page& pg, std::string_view v) {
  const uint8_t* b = reinterpret_cast<const uint8_t*>(v.data());
  return v.empty() || (b >= pg.data() && b + v.size() <= pg.data() + pg.size());
}

// ---------------------------------------------------------------- data pages

// What the record layer does with a line: header, then the body as a BLOB header, a delta or a
// (compressed) row.
void DecodeRecord(std::string_view rec, uint8_t ncols) {
  record::RecordHeader h;
  if (!record::DecodeHeader(rec, &h)) return;
  FUZZ_CHECK(h.size() <= rec.size(), "DecodeHeader accepted a record shorter than its header");
  const std::string_view body = rec.substr(h.size());
  if (h.flags & record::kRecBlob) {
    (void)blob::DecodeBlobHeader(body);
    return;
  }
  if (h.flags & (record::kRecDeleted | record::kRecFragment)) return;
  std::string raw;
  if (h.flags & record::kRecDelta) {
    static const std::string newer = [] {
      std::string s;
      record::EncodeRow(Row{int64_t{1}, std::string("newer"), Value()}, &s);
      return s;
    }();
    if (!record::ApplyDelta(newer, body, &raw).ok()) return;
  } else if (!record::DecompressBody(h.encoding, body, &raw).ok()) {
    return;
  }
  if (h.flags & record::kRecFragmented) return;  // the rest is on other pages
  Row row;
  (void)record::DecodeRow(raw, 1 + ncols % 6, &row);
}

void DataPage(const Page& pg, fuzz::Input& in) {
  const std::string problem = page::DpCheck(pg.data(), kPs);
  const uint16_t lc = page::DpLineCount(pg.data());
  const size_t array_end = page::kDpLinesOffset + page::kDpLineSize * size_t{lc};
  const uint8_t ncols = in.Byte();
  std::vector<uint16_t> live;
  for (uint32_t line = 0; line < std::min<uint32_t>(lc + 2u, 0xFFFF); ++line) {
    std::optional<std::string_view> rec = page::DpGet(pg.data(), kPs, static_cast<uint16_t>(line));
    if (!rec) continue;
    FUZZ_CHECK(line < lc, "DpGet returned a line past line_count");
    FUZZ_CHECK(!rec->empty() && InPage(pg, *rec), "DpGet returned bytes outside the page");
    FUZZ_CHECK(reinterpret_cast<const uint8_t*>(rec->data()) >= pg.data() + array_end,
               "DpGet returned bytes inside the line array");
    live.push_back(static_cast<uint16_t>(line));
    DecodeRecord(*rec, ncols);
  }
  const uint16_t n_live = page::DpLiveLines(pg.data(), kPs);
  const uint32_t free = page::DpFreeSpace(pg.data(), kPs);
  FUZZ_CHECK(free <= kPs, "DpFreeSpace beyond the page size");
  if (problem.empty()) {
    FUZZ_CHECK(n_live == live.size(), "DpLiveLines disagrees with DpGet on a checked page");
  }

  // The in-place writers, on copies. On a page DpCheck accepts, each must keep it acceptable and
  // do exactly what it says; on any page, none may write outside it.
  const uint8_t what = in.Byte();
  const size_t len = 1 + (in.Byte() | size_t{in.Byte()} << 8) % (page::MaxRecordOnPage(kPs) + 50);
  std::string rec(len, '\0');
  for (size_t i = 0; i < len; ++i) rec[i] = static_cast<char>(i * 31 + what);
  const uint16_t target = live.empty() ? 0 : live[in.Byte() % live.size()];
  // Every other line keeps its bytes (compaction may move them).
  auto recheck = [&](const Page& p, const char* op, int changed) {
    if (!problem.empty()) return;
    const std::string after = page::DpCheck(p.data(), kPs);
    FUZZ_CHECK(after.empty(), std::string(op) + " broke a checked page: " + after);
    for (uint16_t l : live) {
      if (l == changed) continue;
      std::optional<std::string_view> a = page::DpGet(p.data(), kPs, l);
      FUZZ_CHECK(a && *a == *page::DpGet(pg.data(), kPs, l),
                 std::string(op) + " changed another line");
    }
  };
  {
    Page p = pg;
    std::optional<uint16_t> line = page::DpInsert(p.data(), kPs, rec);
    if (line) {
      FUZZ_CHECK(page::DpGet(p.data(), kPs, *line) == std::string_view(rec),
                 "DpInsert: other bytes");
      FUZZ_CHECK(std::find(live.begin(), live.end(), *line) == live.end() || !problem.empty(),
                 "DpInsert took a line in use");
    } else if (problem.empty() && rec.size() <= page::MaxRecordOnPage(kPs) &&
               rec.size() + page::kDpLineSize <= free) {
      // Room was promised (free bytes count the line entry too).
      FUZZ_CHECK(false, "DpInsert refused a record DpFreeSpace has room for");
    }
    recheck(p, "DpInsert", -1);
  }
  {
    Page p = pg;
    const uint16_t at = static_cast<uint16_t>(in.Byte() % (lc + 3u));
    if (page::DpInsertAt(p.data(), kPs, at, rec)) {
      FUZZ_CHECK(page::DpGet(p.data(), kPs, at) == std::string_view(rec),
                 "DpInsertAt: other bytes");
    }
    recheck(p, "DpInsertAt", -1);
  }
  if (!live.empty()) {
    Page p = pg;
    if (page::DpReplace(p.data(), kPs, target, rec)) {
      FUZZ_CHECK(page::DpGet(p.data(), kPs, target) == std::string_view(rec),
                 "DpReplace: other bytes");
    }
    recheck(p, "DpReplace", target);
    Page q = pg;
    page::DpDelete(q.data(), kPs, target);
    if (problem.empty()) FUZZ_CHECK(!page::DpGet(q.data(), kPs, target), "DpDelete left the line");
    recheck(q, "DpDelete", target);
  }
}

// ---------------------------------------------------------------- other fixed layouts

void PointerPage(const Page& pg, fuzz::Input& in) {
  const uint32_t n = page::SlotsPerPointerPage(kPs);
  const uint16_t count = page::PpCount(pg.data());
  (void)page::PpRelation(pg.data());
  (void)page::PpSequence(pg.data());
  (void)page::PpNext(pg.data());
  for (uint32_t s = 0; s < n + 3; ++s) {
    const page::PageNo p = page::PpGetSlot(pg.data(), kPs, s);
    const uint8_t f = page::PpGetFlags(pg.data(), kPs, s);
    if (s >= n) FUZZ_CHECK(p == 0 && f == 0, "a slot past the page reads as set");
  }
  Page p = pg;
  const uint32_t slot = (in.Byte() | uint32_t{in.Byte()} << 8) % (n + 4);
  const page::PageNo v = in.U32();
  page::PpSetSlot(p.data(), kPs, slot, v);
  if (slot < n) {
    FUZZ_CHECK(page::PpGetSlot(p.data(), kPs, slot) == v, "PpSetSlot: reads back another page");
    if (v != 0) FUZZ_CHECK(page::PpCount(p.data()) > slot, "PpSetSlot: count not raised");
    if (v == 0 && count <= n) FUZZ_CHECK(page::PpCount(p.data()) <= count, "clearing raised count");
  }
  page::PpSetFlags(p.data(), kPs, slot, 0x0F);
  if (slot < n) FUZZ_CHECK(page::PpGetFlags(p.data(), kPs, slot) == 0x0F, "PpSetFlags");
}

void TipPage(const Page& pg, fuzz::Input& in) {
  const uint64_t first = page::TipFirstTxn(pg.data());
  (void)page::TipNext(pg.data());
  const uint64_t per = page::TxnsPerTip(kPs);
  Page p = pg;
  for (int k = 0; k < 16; ++k) {
    const uint64_t i = (in.U32() | uint64_t{in.Byte()} << 32) % (per + 8);
    const uint64_t txn = first + i;
    if (i >= per || txn < first) {  // outside this page, or past 2^64: callers never ask
      if (txn < first) (void)page::TipGetState(pg.data(), txn);
      continue;
    }
    (void)page::TipGetState(pg.data(), txn);
    const auto st = static_cast<page::TxnState>(in.Byte() & 3);
    page::TipSetState(p.data(), txn, st);
    FUZZ_CHECK(page::TipGetState(p.data(), txn) == st, "TipSetState does not read back");
  }
  if (first > 0) (void)page::TipGetState(pg.data(), first - 1);
}

void PipPage(const Page& pg, fuzz::Input& in) {
  const uint32_t per = page::PagesPerPip(kPs);
  const page::PageNo first = util::Get32(pg.data() + 16);
  // A range past 2^32 (a damaged first_page) wraps page numbers: see below.
  const bool wraps = uint64_t{first} + per > UINT32_MAX;
  for (int k = 0; k < 8; ++k) (void)page::PipIsFree(pg.data(), kPs, in.U32());
  {
    Page p = pg;
    std::optional<page::PageNo> f = page::PipFindFree(p.data(), kPs);
    if (f && !wraps) {
      FUZZ_CHECK(*f - first < per, "PipFindFree: a page outside the PIP's range");
      FUZZ_CHECK(page::PipIsFree(p.data(), kPs, *f), "PipFindFree: a page that is not free");
      page::PipSetFree(p.data(), kPs, *f, false);
      FUZZ_CHECK(!page::PipIsFree(p.data(), kPs, *f), "PipSetFree(false)");
      std::optional<page::PageNo> g = page::PipFindFree(p.data(), kPs);
      FUZZ_CHECK(!g || *g != *f, "PipFindFree: the page just taken");
    }
  }
  for (uint32_t n = 8; n <= 64; n += 8) {
    std::optional<page::PageNo> r = page::PipFindFreeRun(pg.data(), kPs, n);
    if (!r || wraps) continue;
    FUZZ_CHECK((*r - first) % n == 0 && *r - first + n <= per, "PipFindFreeRun: a bad run start");
    for (uint32_t j = 0; j < n; ++j) {
      FUZZ_CHECK(page::PipIsFree(pg.data(), kPs, *r + j), "PipFindFreeRun: a page not free");
    }
  }
  (void)page::PipFindFreeRun(pg.data(), kPs, in.Byte());
  Page p = pg;
  const page::PageNo q = first + in.U32() % (per + 4);
  page::PipSetFree(p.data(), kPs, q, true);
  if (q - first < per) FUZZ_CHECK(page::PipIsFree(p.data(), kPs, q), "PipSetFree(true)");
}

void HeaderPage(const Page& pg, fuzz::Input& in) {
  page::HeaderFields h;
  const bool ok = page::ReadHeader(pg.data(), &h, "fuzz").ok();
  uint32_t ps = 0;
  for (size_t n : {size_t{0}, size_t{95}, size_t{96}, size_t{in.Byte()} * 16, size_t{kPs}}) {
    if (page::PeekPageSize(pg.data(), std::min<size_t>(n, kPs), &ps, "fuzz").ok()) {
      FUZZ_CHECK(page::ValidPageSize(ps), "PeekPageSize accepted an invalid page size");
      FUZZ_CHECK(ok, "PeekPageSize accepted a header ReadHeader refuses");
    }
  }
  if (!ok) return;
  FUZZ_CHECK(page::ValidPageSize(h.page_size), "ReadHeader accepted an invalid page size");
  Page p(kPs);
  page::InitPage(p.data(), kPs, page::PageType::kHeader, 0);
  page::WriteHeader(p.data(), h);
  page::HeaderFields h2;
  FUZZ_CHECK(page::ReadHeader(p.data(), &h2, "fuzz").ok(), "a rewritten header does not read");
  FUZZ_CHECK(
      h2.next_txn == h.next_txn && h2.oit == h.oit && h2.oat == h.oat && h2.ost == h.ost &&
          h2.page_count == h.page_count && h2.first_tip == h.first_tip &&
          h2.catalog_pp == h.catalog_pp && h2.dw_first == h.dw_first && h2.dw_slots == h.dw_slots &&
          h2.sweep_interval == h.sweep_interval && h2.create_time_us == h.create_time_us &&
          h2.page_size == h.page_size &&
          (h2.flags | page::kHeaderFlagSweepInterval) == (h.flags | page::kHeaderFlagSweepInterval),
      "header round trip");
}

void BlobPage(const Page& pg) {
  // As Validate and the BLOB reader do: the count is checked against the capacity first.
  const bool list = page::GetFlags(pg.data()) & page::kBlobListPage;
  const uint32_t used = page::BlobUsed(pg.data());
  (void)page::BlobRelation(pg.data());
  if (list && used <= page::BlobListCapacity(kPs)) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < used; ++i) sum += util::Get32(page::BlobData(pg.data()) + 4 * i);
    (void)sum;
  } else if (!list && used <= page::BlobPageCapacity(kPs)) {
    std::string_view data(reinterpret_cast<const char*>(page::BlobData(pg.data())), used);
    FUZZ_CHECK(InPage(pg, data), "BLOB data outside the page");
  }
}

void DoublewritePage(const Page& pg) {
  absl::StatusOr<page::DwRecord> r = page::ReadDwRecord(pg.data(), kPs);
  if (!r.ok()) return;
  FUZZ_CHECK(r->entries.size() <= page::DwMaxEntries(kPs, static_cast<uint32_t>(r->commits.size())),
             "ReadDwRecord: too many entries");
  Page p(kPs);
  page::WriteDwRecord(p.data(), kPs, page::GetPageNo(pg.data()), *r);
  FUZZ_CHECK(page::VerifyPage(p.data(), kPs, page::GetPageNo(pg.data()), "fuzz").ok(),
             "a written doublewrite record does not verify");
  absl::StatusOr<page::DwRecord> r2 = page::ReadDwRecord(p.data(), kPs);
  FUZZ_CHECK(r2.ok() && r2->seq == r->seq && r2->retired_through == r->retired_through &&
                 r2->entries.size() == r->entries.size() && r2->voids == r->voids &&
                 r2->commits == r->commits,
             "doublewrite record round trip");
  for (size_t i = 0; i < r->entries.size(); ++i) {
    FUZZ_CHECK(r2->entries[i].page_no == r->entries[i].page_no &&
                   r2->entries[i].slot == r->entries[i].slot &&
                   r2->entries[i].checksum == r->entries[i].checksum,
               "doublewrite entry round trip");
  }
}

// ---------------------------------------------------------------- B-tree pages

bool SameEntries(const std::vector<page::BtreeEntry>& a, const std::vector<page::BtreeEntry>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
           return x.key == y.key && x.value == y.value;
         });
}

void BtreePage(const Page& pg, page::PageNo no, fuzz::Input& in) {
  page::BtreeHeader h;
  if (!page::ReadBtreeHeader(pg.data(), kPs, no, &h).ok()) return;
  FUZZ_CHECK(h.data_end >= page::kBtreeHeaderSize && h.restarts_at(kPs) >= h.data_end &&
                 h.restarts_at(kPs) <= kPs,
             "ReadBtreeHeader accepted offsets outside the page");
  const std::string_view fence = page::BtreeFence(pg.data(), kPs, h);
  FUZZ_CHECK(InPage(pg, fence), "BtreeFence outside the page");
  if (std::optional<std::string_view> k = page::BtreeFirstKey(pg.data(), h)) {
    FUZZ_CHECK(InPage(pg, *k), "BtreeFirstKey outside the page");
  }
  // The entry walk, which stops at the end or at the first bad entry.
  page::BtreeEntryReader r(pg.data(), kPs, no);
  size_t walked = 0;
  while (r.Next()) {
    FUZZ_CHECK(++walked <= h.count, "the entry walk passed count");
    FUZZ_CHECK(r.end_offset() <= h.data_end, "an entry past data_end");
  }
  page::BtreeNode node;
  const bool decoded = page::DecodeBtreePage(pg.data(), kPs, no, &node).ok();
  if (decoded) {
    FUZZ_CHECK(r.status().ok() && walked == node.entries.size() && walked == h.count,
               "the entry walk and DecodeBtreePage disagree");
    Page e(kPs);
    page::InitPage(e.data(), kPs, page::PageType::kBtree, no);
    // (Encoding may not fit: it places restarts every kBtreeRestartInterval entries, where
    // in-place inserts may have left fewer, so its prefix compression can be worse.)
    if (page::EncodeBtreePage(node, e.data(), kPs)) {
      page::BtreeNode again;
      FUZZ_CHECK(page::DecodeBtreePage(e.data(), kPs, no, &again).ok() &&
                     SameEntries(again.entries, node.entries) && again.fence == node.fence,
                 "B-tree node round trip");
    }
  }

  // Searches: for every key the page holds and for keys from the input.
  std::vector<std::string> keys;
  if (decoded) {
    for (size_t i = 0; i < node.entries.size(); i += 1 + node.entries.size() / 16) {
      keys.push_back(node.entries[i].key);
    }
  }
  keys.push_back("");
  const uint32_t max_key = page::BtreeMaxKeySize(kPs);
  std::string probe(in.Bytes(in.Byte() % 40));
  keys.push_back(probe);
  if (decoded && !node.entries.empty()) {
    keys.push_back(node.entries[in.Byte() % node.entries.size()].key + probe);
  }
  for (const std::string& key : keys) {
    page::BtreeSlot slot;
    if (!page::BtreeLowerBound(pg.data(), kPs, no, h, key, &slot).ok()) {
      FUZZ_CHECK(!decoded, "BtreeLowerBound failed on a page DecodeBtreePage accepts");
      continue;
    }
    FUZZ_CHECK(slot.offset >= page::kBtreeHeaderSize && slot.offset <= h.data_end,
               "BtreeLowerBound: a slot outside the entries");
    if (!decoded) continue;
    const auto it =
        std::lower_bound(node.entries.begin(), node.entries.end(), key,
                         [](const page::BtreeEntry& e, const std::string& k) { return e.key < k; });
    const bool at_end = it == node.entries.end();
    FUZZ_CHECK(at_end == (slot.offset == h.data_end), "BtreeLowerBound: end of entries");
    FUZZ_CHECK(slot.equal == (!at_end && it->key == key), "BtreeLowerBound: equal");
    if (!at_end) FUZZ_CHECK(slot.value == it->value, "BtreeLowerBound: value");
    FUZZ_CHECK(slot.has_prev() == (it != node.entries.begin()), "BtreeLowerBound: previous entry");
    if (slot.has_prev())
      FUZZ_CHECK(slot.prev_value == (it - 1)->value, "BtreeLowerBound: previous value");
    page::BtreeEntryReader from(pg.data(), kPs, no);
    from.StartAt(slot, key);
    for (auto j = it; j != node.entries.end(); ++j) {
      FUZZ_CHECK(from.Next() && from.key() == j->key && from.value() == j->value,
                 "a walk from BtreeLowerBound's slot gives other entries");
    }
    FUZZ_CHECK(!from.Next() && from.status().ok(), "a walk from the slot does not end cleanly");
  }

  // The in-place writers, as the tree runs them: on any page whose header reads, after a search
  // that succeeded. (Their REQUIREs: a key within the maximum and below the fence.)
  const uint64_t value = h.leaf() ? in.Byte() : 1 + in.U32() % 1000;
  std::string key = probe.size() > max_key ? probe.substr(0, max_key) : probe;
  if (h.has_fence() && !(key < fence)) key.clear();
  page::BtreeSlot slot;
  if (page::BtreeLowerBound(pg.data(), kPs, no, h, key, &slot).ok() && !slot.equal) {
    Page p = pg;
    page::BtreeHeader ph = h;
    if (page::BtreeInsertAt(p.data(), kPs, &ph, slot, key, value) && decoded) {
      page::BtreeNode after;
      FUZZ_CHECK(page::DecodeBtreePage(p.data(), kPs, no, &after).ok(),
                 "BtreeInsertAt left a page that does not decode: " +
                     std::string(page::DecodeBtreePage(p.data(), kPs, no, &after).message()));
      std::vector<page::BtreeEntry> want = node.entries;
      want.insert(std::lower_bound(
                      want.begin(), want.end(), key,
                      [](const page::BtreeEntry& e, const std::string& k) { return e.key < k; }),
                  page::BtreeEntry{key, value});
      FUZZ_CHECK(SameEntries(after.entries, want), "BtreeInsertAt: other entries");
      page::BtreeHeader ah;
      FUZZ_CHECK(page::ReadBtreeHeader(p.data(), kPs, no, &ah).ok() && ah.count == ph.count &&
                     ah.data_end == ph.data_end && ah.restart_count == ph.restart_count,
                 "BtreeInsertAt: the header it returned is not the page's");
    } else if (decoded && page::BtreeInsertRoom(key.size()) <= h.free_space(kPs) &&
               h.count < 0xFFFF) {
      FUZZ_CHECK(false, "BtreeInsertAt refused an entry with BtreeInsertRoom free");
    }
  }
  std::string victim =
      decoded && !node.entries.empty() ? node.entries[in.Byte() % node.entries.size()].key : probe;
  if (page::BtreeLowerBound(pg.data(), kPs, no, h, victim, &slot).ok() && slot.equal) {
    Page p = pg;
    page::BtreeHeader ph = h;
    const bool removed = page::BtreeRemoveAt(p.data(), kPs, &ph, slot, victim);
    if (decoded) {
      FUZZ_CHECK(removed, "BtreeRemoveAt refused an entry of a page that decodes");
      page::BtreeNode after;
      FUZZ_CHECK(page::DecodeBtreePage(p.data(), kPs, no, &after).ok(),
                 "BtreeRemoveAt left a page that does not decode");
      std::vector<page::BtreeEntry> want = node.entries;
      want.erase(
          std::find_if(want.begin(), want.end(), [&](const auto& e) { return e.key == victim; }));
      FUZZ_CHECK(SameEntries(after.entries, want), "BtreeRemoveAt: other entries");
    }
  }
  // A tail split for a key above the last one.
  std::string above =
      decoded && !node.entries.empty() ? node.entries.back().key + probe + "\xff" : probe;
  if (above.size() > max_key) above.resize(max_key);
  page::BtreeTailSplit plan;
  absl::StatusOr<bool> planned =
      page::BtreePlanTailSplit(pg.data(), kPs, no, h, above, value, &plan);
  if (planned.ok() && *planned) {
    Page p = pg;
    page::BtreeHeader ph = h;
    page::BtreeApplyTailSplit(p.data(), kPs, &ph, plan, 12345);
    if (decoded) {
      page::BtreeNode left;
      FUZZ_CHECK(page::DecodeBtreePage(p.data(), kPs, no, &left).ok(),
                 "a tail split left a page that does not decode");
      FUZZ_CHECK(left.entries.size() == plan.keep_count && left.fence == plan.separator,
                 "a tail split kept other entries or another fence");
      std::vector<page::BtreeEntry> all = left.entries;
      all.insert(all.end(), plan.right.begin(), plan.right.end());
      std::vector<page::BtreeEntry> want = node.entries;
      want.push_back({above, value});
      FUZZ_CHECK(SameEntries(all, want), "a tail split lost or added entries");
      FUZZ_CHECK(plan.right.front().key >= plan.separator &&
                     (left.entries.empty() || left.entries.back().key < plan.separator),
                 "a tail split's separator does not separate");
    }
  } else if (!planned.ok()) {
    FUZZ_CHECK(!decoded, "BtreePlanTailSplit failed on a page that decodes");
  }
}

// ---------------------------------------------------------------- the target

std::vector<std::string> Seeds() {
  // Each template page whole, sealed, over a zero page (so the mutations work on the page's own
  // bytes), and the same page unchanged as the base.
  std::vector<std::string> out;
  const auto& t = Templates();
  for (int type = 0; type < kTypes; ++type) {
    for (size_t k = 0; k < t[type].size(); ++k) {
      std::string s;
      s += static_cast<char>(type);
      s += static_cast<char>(0x01 | static_cast<int>(k) << 4);  // sealed, overwrite, zero base
      s += std::string(2, '\0');                                // at offset 0
      s += std::string(reinterpret_cast<const char*>(t[type][k].bytes.data()), kPs);
      out.push_back(s);
      if (k == 0) {
        std::string base;
        base += static_cast<char>(type);
        base += static_cast<char>(0x01 | 0x04);  // sealed, the template as the base
        base += std::string(2, '\0');
        out.push_back(base);
      }
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (std::getenv("EMBER_FUZZ_MAKE_SEEDS") != nullptr) fuzz::MaybeWriteSeeds(Seeds());
  (void)Templates();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const int type = in.Byte() % kTypes;
  const uint8_t flags = in.Byte();
  const bool seal = flags & 0x01, flip = flags & 0x02, from_template = flags & 0x04,
             keep_type = flags & 0x08;
  const auto& choices = Templates()[type];
  const TemplatePage& tp = choices[(flags >> 4) % choices.size()];
  const uint32_t off = (in.Byte() | uint32_t{in.Byte()} << 8) % kPs;
  // The page bytes come first (up to the page's end), then what the decoders take.
  const std::string_view bytes = in.Bytes(kPs - off);
  Page pg = from_template || flip ? tp.bytes : Page(kPs);
  for (size_t i = 0; i < bytes.size(); ++i) {
    pg[off + i] =
        flip ? pg[off + i] ^ static_cast<uint8_t>(bytes[i]) : static_cast<uint8_t>(bytes[i]);
  }
  if (!keep_type) pg[0] = static_cast<uint8_t>(type);
  const page::PageNo no = tp.no;
  if (seal) {
    util::Put32(pg.data() + page::hdr::kPageNo, no);
    util::Put32(pg.data() + page::hdr::kChecksum, page::ComputeChecksum(pg.data(), kPs));
  }
  const absl::Status v = page::VerifyPage(pg.data(), kPs, no, "fuzz");
  if (seal)
    FUZZ_CHECK(v.ok() || pg[0] >= kTypes, "a sealed page fails VerifyPage: " + v.ToString());
  if (v.ok() && util::Get32(pg.data() + page::hdr::kChecksum) != 0) {
    FUZZ_CHECK(
        page::ComputeChecksum(pg.data(), kPs) == util::Get32(pg.data() + page::hdr::kChecksum) &&
            page::GetPageNo(pg.data()) == no,
        "VerifyPage passed a page whose checksum or number is wrong");
  }
  switch (static_cast<page::PageType>(type)) {
    case page::PageType::kData: DataPage(pg, in); break;
    case page::PageType::kPointer: PointerPage(pg, in); break;
    case page::PageType::kTip: TipPage(pg, in); break;
    case page::PageType::kPip: PipPage(pg, in); break;
    case page::PageType::kHeader: HeaderPage(pg, in); break;
    case page::PageType::kBlob: BlobPage(pg); break;
    case page::PageType::kDoublewrite: DoublewritePage(pg); break;
    case page::PageType::kBtree: BtreePage(pg, no, in); break;
    case page::PageType::kFree:
    case page::PageType::kIndexRoot:
      // No decoder of their own: every decoder above must refuse such a page by its type.
      if (pg[0] != type) break;
      FUZZ_CHECK(page::DpCheck(pg.data(), kPs) != "", "DpCheck accepted a page of another type");
      {
        page::BtreeHeader h;
        FUZZ_CHECK(!page::ReadBtreeHeader(pg.data(), kPs, no, &h).ok(),
                   "ReadBtreeHeader: another type");
        FUZZ_CHECK(!page::ReadDwRecord(pg.data(), kPs).ok(), "ReadDwRecord: another type");
      }
      break;
  }
  return 0;
}
