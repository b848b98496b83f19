// Torn pages through the whole engine: a power loss drops every write not yet synced and tears
// some of them (part new, part old, cut at a 512-byte boundary); the reopened database must hold
// exactly the committed rows, at every page size. With the doublewrite area turned off the same
// tears must be found as damage, which shows the test reaches the pages that matter.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/db/database_impl.h"
#include "tests/support/db_util.h"
#include "tests/support/fault_file.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::TempDb;

struct Outcome {
  bool damaged = false;        // the reopened database reported DataLoss somewhere
  uint64_t repaired = 0;       // pages the open rewrote from their copies
  uint64_t torn_repaired = 0;  // of them, torn ones
  uint64_t tears = 0;          // pages this round tore
};

// Reads every committed row back; any error is returned (DataLoss when a page is damaged).
absl::Status CheckRows(Database* db, const std::map<int64_t, std::string>& model) {
  absl::StatusOr<Table> t = db->GetTable("t");
  if (!t.ok()) return t.status();
  absl::StatusOr<Index> ix = db->GetIndex("t_id");
  if (!ix.ok()) return ix.status();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = db->Begin();
  if (!tx.ok()) return tx.status();
  absl::StatusOr<std::vector<std::pair<RecordId, Row>>> rows = testing::ScanAll(tx->get(), *t);
  if (!rows.ok()) return rows.status();
  std::map<int64_t, std::string> seen;
  for (const auto& [rid, row] : *rows)
    seen[std::get<int64_t>(row[0])] = std::get<std::string>(row[2]);
  if (seen != model) {
    return absl::InternalError(absl::StrCat("scan: ", seen.size(), " rows, ", model.size(),
                                            " committed, or different values"));
  }
  for (const auto& [id, v] : model) {
    absl::StatusOr<std::optional<std::pair<RecordId, Row>>> hit = (*tx)->Lookup(*ix, {id});
    if (!hit.ok()) return hit.status();
    if (!hit->has_value() || std::get<std::string>((*hit)->second[2]) != v) {
      return absl::InternalError(absl::StrCat("lookup of id ", id, " does not find its row"));
    }
  }
  return (*tx)->Commit();
}

Outcome Round(uint32_t ps, bool doublewrite, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TempDb tmp;
  Options o = CreateOptions(ps, 16);  // a small cache: pages are also written by eviction
  o.doublewrite = doublewrite;
  o.use_io_uring = false;
  o.gc_policy = GcPolicy::kCooperative;
  std::map<int64_t, std::string> model;
  std::optional<std::map<int64_t, std::string>> in_doubt;  // the other possible outcome
  std::string before;                                      // the file as the crash found it
  {
    io::FileOptions fo;
    fo.mode = io::OpenMode::kCreateNew;
    auto fault = std::make_unique<io::FaultFile>(VALUE_OR_FAIL(io::OpenPosixFile(tmp.path(), fo)));
    io::FaultFile* ff = fault.get();
    std::unique_ptr<db::DatabaseImpl> d =
        VALUE_OR_FAIL(db::DatabaseImpl::OpenFile(std::move(fault), o, /*create=*/true));
    Table t = VALUE_OR_FAIL(d->CreateTable({"t",
                                            {{"id", ColumnType::kInt64, false},
                                             {"k", ColumnType::kInt64},
                                             {"v", ColumnType::kString}}}));
    VALUE_OR_FAIL(d->CreateIndex({"t_id", "t", {"id"}, true}));
    Index ix = VALUE_OR_FAIL(d->GetIndex("t_id"));
    // The crash comes at the k-th sync from now: it fails, the call that made it fails, and the
    // power goes. That is the moment pages are being written: a commit's or an eviction's home
    // writes since the last sync are not durable, and may be torn.
    // (A failure an eviction retried past is not seen by any call: the sync count tells.)
    const uint64_t fail_at = ff->syncs() + 1 + rng() % 80;
    ff->FailSyncAfter(fail_at - ff->syncs(), EIO, /*sticky=*/true);
    int64_t next_id = 1;
    bool failed = false;
    auto ok = [&](const absl::Status& s) {
      if (!s.ok() || ff->syncs() >= fail_at) failed = true;
      return s.ok();
    };
    while (!failed) {
      std::unique_ptr<Transaction> tx = VALUE_OR_FAIL(d->Begin(TransactionOptions{}));
      std::map<int64_t, std::string> view = model;
      const int ops = 1 + static_cast<int>(rng() % 150);
      for (int k = 0; k < ops && !failed; ++k) {
        // Up to a third of a page: long values go out of line (BLOB pages).
        const std::string v(20 + rng() % (ps / 3), static_cast<char>('a' + rng() % 26));
        if (view.empty() || rng() % 3 == 0) {
          if (ok(tx->Insert(t, Row{next_id, int64_t(k), v}).status())) view[next_id++] = v;
          continue;
        }
        auto it = view.begin();
        std::advance(it, static_cast<long>(rng() % view.size()));
        auto hit = tx->Lookup(ix, {it->first});
        if (!ok(hit.status())) break;
        REQUIRE(hit->has_value());
        if (rng() % 4 == 0) {
          if (ok(tx->Delete(t, (*hit)->first))) view.erase(it);
        } else if (ok(tx->Update(t, (*hit)->first, Row{it->first, int64_t(k), v}))) {
          it->second = v;
        }
      }
      if (failed) break;
      const absl::Status c = tx->Commit();
      if (c.ok()) model = view;  // committed, even if the failure came after its TIP write
      // A commit whose TIP sync failed is in doubt: either outcome may come back.
      if (absl::IsUnknown(c)) in_doubt = view;
      if (!ok(c)) break;
    }
    before = testing::ReadFileBytes(tmp.path());
    d->TEST_SimulateCrash();
    ff->FailSyncAfter(0, 0);
    REQUIRE_OK(ff->DropUnsynced());
    d.reset();
  }
  // The lost writes: tear about half of them instead (part new, part old, either way round).
  Outcome out;
  std::string after = testing::ReadFileBytes(tmp.path());
  for (size_t off = 0; off + ps <= std::min(before.size(), after.size()); off += ps) {
    if (before.compare(off, ps, after, off, ps) == 0) continue;
    if (rng() % 2 == 0) continue;
    // A cut at a sector boundary with changed bytes on both sides (else the "torn" page would
    // be one of the two versions whole).
    size_t first = 0, last = ps - 1;
    while (before[off + first] == after[off + first]) ++first;
    while (before[off + last] == after[off + last]) --last;
    const size_t lo = first / 512 + 1, hi = last / 512;  // cuts at lo*512 .. hi*512
    if (lo > hi) continue;
    const size_t cut = 512 * (lo + rng() % (hi - lo + 1));
    if (rng() % 2 == 0) {
      after.replace(off, cut, before, off, cut);  // the first part landed
    } else {
      after.replace(off + cut, ps - cut, before, off + cut, ps - cut);  // the last part landed
    }
    ++out.tears;
  }
  testing::WriteFileBytes(tmp.path(), after);

  Options reopen = o;
  reopen.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(tmp.path(), reopen);
  if (!db.ok()) {
    INFO("open: " << db.status().ToString());
    REQUIRE(absl::IsDataLoss(db.status()));
    out.damaged = true;
    return out;
  }
  const DatabaseStats st = (*db)->stats();
  out.repaired = st.pages_repaired_at_open;
  out.torn_repaired = st.torn_pages_repaired_at_open;
  absl::StatusOr<ValidationReport> rep = (*db)->Validate(ValidateOptions{});
  REQUIRE_OK(rep.status());
  CHECK(rep->repaired_pages.size() == out.repaired);
  absl::Status rows = CheckRows(db->get(), model);
  if (!rows.ok() && in_doubt) rows = CheckRows(db->get(), *in_doubt);
  if (!rep->ok() || !rows.ok()) {
    INFO("validate: " << (rep->ok() ? std::string("ok") : rep->errors.front()));
    INFO("rows: " << rows.ToString());
    // Without protection, a torn page is damage found by a checksum: DataLoss, never a wrong row.
    REQUIRE_FALSE(doublewrite);
    REQUIRE((rep->ok() || absl::IsDataLoss(rows) || !rows.ok()));
    out.damaged = true;
  }
  (void)(*db)->Close();
  return out;
}

TEST_CASE(
    "torn pages: a power loss that tears the pages being written loses no committed row, "
    "at every page size",
    "[exhaustive][crash][doublewrite]") {
  const uint64_t seed = 0x70726e;
  uint64_t tears = 0, repaired = 0, torn_repaired = 0;
  for (uint32_t ps : {4096u, 8192u, 16384u, 32768u}) {
    for (int round = 0; round < 6; ++round) {
      CAPTURE(seed, ps, round);
      const Outcome o = Round(ps, /*doublewrite=*/true, seed + ps + round);
      CHECK_FALSE(o.damaged);
      tears += o.tears;
      repaired += o.repaired;
      torn_repaired += o.torn_repaired;
    }
  }
  INFO(tears << " pages torn, " << repaired << " repaired (" << torn_repaired << " torn)");
  CHECK(tears > 0);
  CHECK(torn_repaired > 0);
  CHECK(repaired >= torn_repaired);
}

TEST_CASE("torn pages: without the doublewrite area the same tears are damage",
          "[crash][doublewrite]") {
  const uint64_t seed = 0x70726e;
  int damaged = 0;
  for (int round = 0; round < 6; ++round) {
    CAPTURE(seed, round);
    damaged += Round(8192, /*doublewrite=*/false, seed + 8192 + round).damaged;
  }
  CHECK(damaged > 0);
}

}  // namespace
}  // namespace ember
