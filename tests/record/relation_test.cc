// Relation storage over a real cache, page space and transaction manager: inserts and reads,
// version chains read through snapshots, delta back versions, records larger than a page, own
// overwrites, dead versions, write conflicts, page reads and record lists, and Check() before and
// after a flush and reopen.
#include "engine/record/relation.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/page/data_page.h"
#include "engine/page/pointer_page.h"
#include "engine/record/record_format.h"
#include "engine/txn/txn_manager.h"
#include "tests/support/engine_util.h"

using namespace ember;
using cache::LatchMode;
using cache::PageRef;
using page::PageNo;
using record::ReadView;
using record::Relation;
using record::WriteOutcome;
using txn::TxnManager;

namespace {

constexpr uint32_t kPs = 4096;
constexpr uint32_t kRelId = 7;

cache::CacheOptions Opts() {
  cache::CacheOptions o;
  o.page_size = kPs;
  o.capacity = 256;
  o.forced_writes = false;
  return o;
}

// A database file with a page space, a transaction manager and one relation.
struct RelEnv {
  RelEnv() : db(Opts()) {
    space = std::make_unique<cache::PageSpace>(&db.cache(), 2);
    tm = NewManager();
    tip = VALUE_OR_FAIL(tm->CreateInitial());
    const uint64_t t = Begin();
    first_pp = VALUE_OR_FAIL(Relation::Create(&db.cache(), space.get(), t, kRelId));
    rel = std::make_unique<Relation>(&db.cache(), space.get(), tm.get(), kRelId, first_pp);
    REQUIRE_OK(rel->Load());
    REQUIRE_OK(tm->Commit(t));
  }
  std::unique_ptr<TxnManager> NewManager() {
    return std::make_unique<TxnManager>(&db.cache(), space.get(),
                                        [](uint64_t) { return absl::OkStatus(); });
  }

  uint64_t Begin() { return VALUE_OR_FAIL(tm->Begin()).id; }
  ReadView Now(uint64_t self = 0) const { return ReadView{self, tm->CurrentCn(), tm.get()}; }
  ReadView At(uint64_t snapshot, uint64_t self = 0) const {
    return ReadView{self, snapshot, tm.get()};
  }

  // The visible body, or nullopt when there is no visible version.
  std::optional<std::string> Get(uint64_t rec, const ReadView& view) {
    absl::StatusOr<record::VisibleVersion> v = rel->Read(rec, view);
    if (!v.ok()) FAIL("Read(" << rec << "): " << v.status().ToString());
    if (!v->exists) return std::nullopt;
    return v->body;
  }

  WriteOutcome Put(uint64_t rec, uint64_t txn, const ReadView& view, const std::string* raw,
                   bool read_committed = false) {
    return VALUE_OR_FAIL(rel->Write(rec, txn, view, read_committed, raw));
  }

  // (txn, deleted, body) of every version, newest first.
  std::vector<std::tuple<uint64_t, bool, std::string>> Versions(uint64_t rec) {
    std::vector<std::tuple<uint64_t, bool, std::string>> out;
    REQUIRE_OK(rel->ForEachVersion(rec, [&](uint64_t t, bool del, std::string_view raw) {
      out.emplace_back(t, del, std::string(raw));
      return true;
    }));
    return out;
  }

  // Runs Check(); returns the errors (empty when clean) and counts records and versions.
  std::vector<std::string> Check(size_t* records = nullptr, uint64_t* versions = nullptr) {
    std::vector<std::string> errors;
    std::vector<PageNo> pages;
    size_t n = 0;
    uint64_t v = 0;
    REQUIRE_OK(rel->Check(
        &errors, &pages, [&](uint64_t) { ++n; }, &v));
    for (PageNo p : pages) {  // (a page may be listed more than once)
      if (p < 2 || p >= space->page_count()) errors.push_back(absl::StrCat("page ", p, "?"));
    }
    if (records) *records = n;
    if (versions) *versions = v;
    for (const std::string& e : errors) UNSCOPED_INFO("Check(): " << e);
    return errors;
  }

  // Flushes everything, drops cache, manager and relation, and opens them again ("restart").
  void Reopen() {
    REQUIRE_OK(db.cache().FlushAll());
    const uint64_t next = tm->next_id();
    const uint32_t page_count = space->page_count();
    rel.reset();
    tm.reset();
    db.Reopen();
    space = std::make_unique<cache::PageSpace>(&db.cache(), page_count);
    tm = NewManager();
    REQUIRE_OK(tm->Load(tip, 1, next));
    rel = std::make_unique<Relation>(&db.cache(), space.get(), tm.get(), kRelId, first_pp);
    REQUIRE_OK(rel->Load());
  }

  // Counts the lines of every data page of the relation with all of `flags` set.
  size_t CountLines(uint8_t flags) {
    size_t n = 0;
    for (PageNo pp = first_pp; pp != page::kNoPage;) {
      std::vector<PageNo> dps;
      {
        PageRef r = VALUE_OR_FAIL(db.cache().Fetch(pp, LatchMode::kShared));
        for (uint32_t s = 0; s < page::PpCount(r.data()); ++s) {
          dps.push_back(page::PpGetSlot(r.data(), kPs, s));
        }
        pp = page::PpNext(r.data());
      }
      for (PageNo dp : dps) {
        PageRef r = VALUE_OR_FAIL(db.cache().Fetch(dp, LatchMode::kShared));
        for (uint16_t l = 0; l < page::DpLineCount(r.data()); ++l) {
          std::optional<std::string_view> rec = page::DpGet(r.data(), kPs, l);
          record::RecordHeader h;
          if (rec && record::DecodeHeader(*rec, &h) && (h.flags & flags) == flags) ++n;
        }
      }
    }
    return n;
  }

  testing::TestDb db;
  std::unique_ptr<cache::PageSpace> space;
  std::unique_ptr<TxnManager> tm;
  PageNo tip = 0;
  PageNo first_pp = 0;
  std::unique_ptr<Relation> rel;
};

// A row encoding: an id, a version number and a long text that stays the same (delta-friendly).
std::string Body(int64_t id, int64_t version, size_t pad = 200) {
  std::string raw;
  record::EncodeRow(
      {id, version, std::string(pad, static_cast<char>('a' + id % 26)), std::monostate{}}, &raw);
  return raw;
}

std::string RandomBody(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace

TEST_CASE("relation: insert and read, visible to the writer and after commit only", "[relation]") {
  RelEnv env;
  const uint64_t t1 = env.Begin();
  const uint64_t before = env.tm->CurrentCn();
  std::vector<uint64_t> recs;
  for (int i = 0; i < 3; ++i) recs.push_back(VALUE_OR_FAIL(env.rel->Insert(t1, Body(i, 1))));
  CHECK(std::set<uint64_t>(recs.begin(), recs.end()).size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(env.Get(recs[i], env.Now(t1)) == Body(i, 1));  // own versions
    CHECK(env.Get(recs[i], env.Now()) == std::nullopt);  // t1 is still active
  }
  REQUIRE_OK(env.tm->Commit(t1));
  for (int i = 0; i < 3; ++i) {
    CHECK(env.Get(recs[i], env.Now()) == Body(i, 1));
    CHECK(env.Get(recs[i], env.At(before)) == std::nullopt);  // snapshot before the commit
  }
  // Record numbers that do not exist.
  CHECK(absl::IsNotFound(env.rel->Read(page::MakeRecordNo(99, 0), env.Now()).status()));
  CHECK(absl::IsNotFound(env.rel->Read(recs[2] + 1000, env.Now()).status()));
  CHECK(env.Check().empty());
}

TEST_CASE("relation: update chains read correctly through snapshots of each point in time",
          "[relation]") {
  RelEnv env;
  std::vector<uint64_t> snaps{env.tm->CurrentCn()};  // snaps[v]: right after version v
  const uint64_t t1 = env.Begin();
  const uint64_t rec = VALUE_OR_FAIL(env.rel->Insert(t1, Body(1, 1)));
  const uint64_t other = VALUE_OR_FAIL(env.rel->Insert(t1, Body(2, 1)));
  REQUIRE_OK(env.tm->Commit(t1));
  snaps.push_back(env.tm->CurrentCn());
  std::vector<uint64_t> writers{0, t1};
  constexpr int kVersions = 10;
  for (int v = 2; v <= kVersions; ++v) {
    const uint64_t t = env.Begin();
    const std::string body = Body(1, v);
    const WriteOutcome w = env.Put(rec, t, env.Now(t), &body);
    REQUIRE(w.code == WriteOutcome::kDone);
    CHECK(w.old_body == Body(1, v - 1));
    CHECK(!w.old_was_own);
    REQUIRE_OK(env.tm->Commit(t));
    snaps.push_back(env.tm->CurrentCn());
    writers.push_back(t);
  }
  auto check_all = [&] {
    CHECK(env.Get(rec, env.At(snaps[0])) == std::nullopt);
    for (int v = 1; v <= kVersions; ++v) {
      INFO("snapshot after version " << v);
      CHECK(env.Get(rec, env.At(snaps[v])) == Body(1, v));
    }
    CHECK(env.Get(other, env.Now()) == Body(2, 1));
  };
  check_all();
  // Older versions hang behind the newest one as deltas.
  CHECK(env.CountLines(record::kRecBackVersion) == kVersions - 1);
  CHECK(env.CountLines(record::kRecBackVersion | record::kRecDelta) == kVersions - 1);
  const auto versions = env.Versions(rec);
  REQUIRE(versions.size() == kVersions);
  for (int i = 0; i < kVersions; ++i) {
    CHECK(std::get<0>(versions[i]) == writers[kVersions - i]);
    CHECK(!std::get<1>(versions[i]));
    CHECK(std::get<2>(versions[i]) == Body(1, kVersions - i));
  }
  size_t records = 0;
  uint64_t nversions = 0;
  CHECK(env.Check(&records, &nversions).empty());
  CHECK(records == 2);
  CHECK(nversions == kVersions + 1);

  // After a restart every old transaction is committed "before the open": all snapshots see
  // the newest version, and the chain is still there.
  env.Reopen();
  CHECK(env.Get(rec, env.Now()) == Body(1, kVersions));
  CHECK(env.Versions(rec).size() == kVersions);
  CHECK(env.Check().empty());
}

TEST_CASE("relation: back versions that do not fit go to secondary pages", "[relation]") {
  RelEnv env;
  std::mt19937 rng(9);
  // Bodies of ~900 incompressible bytes that share nothing: whole back versions, several pages.
  const uint64_t t1 = env.Begin();
  std::vector<uint64_t> recs;
  std::map<uint64_t, std::vector<std::string>> history;
  for (int i = 0; i < 6; ++i) {
    const std::string b = RandomBody(rng, 900);
    recs.push_back(VALUE_OR_FAIL(env.rel->Insert(t1, b)));
    history[recs.back()].push_back(b);
  }
  REQUIRE_OK(env.tm->Commit(t1));
  std::vector<uint64_t> snaps{env.tm->CurrentCn()};
  for (int round = 0; round < 4; ++round) {
    const uint64_t t = env.Begin();
    for (uint64_t rec : recs) {
      const std::string b = RandomBody(rng, 600 + rng() % 600);
      REQUIRE(env.Put(rec, t, env.Now(t), &b).code == WriteOutcome::kDone);
      history[rec].push_back(b);
    }
    REQUIRE_OK(env.tm->Commit(t));
    snaps.push_back(env.tm->CurrentCn());
  }
  CHECK(env.rel->PageSequences() > 2);
  CHECK(env.CountLines(record::kRecBackVersion) == recs.size() * 4);
  for (size_t s = 0; s < snaps.size(); ++s) {
    for (uint64_t rec : recs) {
      INFO("snapshot " << s << " record " << rec);
      CHECK(env.Get(rec, env.At(snaps[s])) == history[rec][s]);
    }
  }
  CHECK(env.Check().empty());
  env.Reopen();
  for (uint64_t rec : recs) CHECK(env.Versions(rec).size() == 5);
  CHECK(env.Check().empty());
}

TEST_CASE("relation: every record of a page of small ones can grow", "[relation]") {
  // Small records fill pages up to their reserve; then every one grows to hundreds of
  // incompressible bytes. The first updates on a page took all its free space inline, and the
  // later ones could not grow by even a back pointer: Write failed with INTERNAL "new version
  // does not fit after space check". A growing head now leaves the other records' reserve.
  RelEnv env;
  std::mt19937 rng(11);
  const uint64_t t1 = env.Begin();
  std::map<uint64_t, std::string> want;
  for (int i = 0; i < 400; ++i) {
    const std::string b = RandomBody(rng, 8);
    want[VALUE_OR_FAIL(env.rel->Insert(t1, b))] = b;
  }
  REQUIRE_OK(env.tm->Commit(t1));
  for (int round = 0; round < 2; ++round) {
    const uint64_t t = env.Begin();
    for (auto& [rec, body] : want) {
      INFO("round " << round << " record " << rec);
      const std::string b = RandomBody(rng, 300 + rng() % 600);
      REQUIRE(env.Put(rec, t, env.Now(t), &b).code == WriteOutcome::kDone);
      body = b;
    }
    REQUIRE_OK(env.tm->Commit(t));
  }
  for (const auto& [rec, body] : want) {
    INFO("record " << rec);
    CHECK(env.Get(rec, env.Now()) == body);
    CHECK(env.Versions(rec).size() == 3);
  }
  CHECK(env.Check().empty());
}

TEST_CASE("relation: shrinking updates are backed out on a page that other versions filled",
          "[relation]") {
  // A version that shrinks its head (a delete stub, an empty row) with its back version on
  // another page gives room back to the page, and other records' back versions take it.
  // Backing the shrink out restores the head as at least its fragmented header, up to a pointer
  // larger than the small head; once the page had less than that left, the rollback failed
  // with INTERNAL "restored version does not fit". Back versions now move off the page.
  RelEnv env;
  std::mt19937 rng(21);
  const uint64_t t1 = env.Begin();
  std::map<uint64_t, std::string> want;  // the records on the first data page
  for (int i = 0; i < 200; ++i) {
    const std::string b = RandomBody(rng, 40);
    const uint64_t rec = VALUE_OR_FAIL(env.rel->Insert(t1, b));
    if (page::RecordDpSequence(rec) == 0) want[rec] = b;
  }
  REQUIRE_OK(env.tm->Commit(t1));
  REQUIRE(want.size() > 40);
  const PageNo dp = [&] {
    PageRef pp = VALUE_OR_FAIL(env.db.cache().Fetch(env.first_pp, LatchMode::kShared));
    return page::PpGetSlot(pp.data(), kPs, 0);
  }();
  auto free_space = [&] {
    PageRef r = VALUE_OR_FAIL(env.db.cache().Fetch(dp, LatchMode::kShared));
    return page::DpFreeSpace(r.data(), kPs);
  };
  // A committed update of every record: each has a back version (on the page while it has
  // room), so a restored head needs a back pointer as well as its fragment pointer.
  {
    const uint64_t t = env.Begin();
    for (auto& [rec, body] : want) {
      body = RandomBody(rng, 40);
      REQUIRE(env.Put(rec, t, env.Now(t), &body).code == WriteOutcome::kDone);
    }
    REQUIRE_OK(env.tm->Commit(t));
  }
  // Every record becomes an empty row: while the page has room its back version stays there
  // (t3's), and when it has not, the back version goes to a secondary page and the page gains
  // the row's bytes (t2's, a delete every other time).
  const uint64_t t2 = env.Begin();
  const uint64_t t3 = env.Begin();
  std::vector<uint64_t> mine, shrunk;  // t2's records; those whose page gained room
  bool del = false;
  for (auto& [rec, body] : want) {
    const uint32_t before = free_space();
    const std::string empty;
    if (before >= 45) {
      REQUIRE(env.Put(rec, t3, env.Now(t3), &empty).code == WriteOutcome::kDone);
      body = empty;
    } else {
      del = !del;
      REQUIRE(env.Put(rec, t2, env.Now(t2), del ? nullptr : &empty).code == WriteOutcome::kDone);
      mine.push_back(rec);
      if (free_space() > before) shrunk.push_back(rec);
    }
  }
  REQUIRE(shrunk.size() >= 5);
  std::vector<record::Unlinked> unlinked;
  for (uint64_t rec : mine) {
    INFO("record " << rec);
    REQUIRE_OK(env.rel->Backout(rec, t2, t2, &unlinked));
  }
  REQUIRE_OK(env.tm->MarkDead(t2));
  REQUIRE_OK(env.rel->FreeUnlinked(&unlinked, t2));
  REQUIRE_OK(env.tm->Commit(t3));
  auto check_all = [&] {
    for (const auto& [rec, body] : want) {
      INFO("record " << rec);
      CHECK(env.Get(rec, env.Now()) == body);
    }
    CHECK(env.Check().empty());
  };
  check_all();
  env.Reopen();
  check_all();
}

TEST_CASE("relation: records larger than a page round-trip, update and overwrite", "[relation]") {
  RelEnv env;
  std::mt19937 rng(4);
  const std::string big1 = RandomBody(rng, 20000);
  const std::string big2 = RandomBody(rng, 15000);
  const std::string big3 = RandomBody(rng, 9000);
  const std::string small = Body(5, 5);
  const uint64_t t1 = env.Begin();
  const uint64_t rec = VALUE_OR_FAIL(env.rel->Insert(t1, big1));
  const uint64_t neighbour = VALUE_OR_FAIL(env.rel->Insert(t1, small));
  CHECK(env.Get(rec, env.Now(t1)) == big1);
  REQUIRE_OK(env.tm->Commit(t1));
  const uint64_t s1 = env.tm->CurrentCn();
  CHECK(env.Get(rec, env.Now()) == big1);
  CHECK(env.CountLines(record::kRecFragment) >= 4);  // 20 KB over 4 KB pages

  const uint64_t t2 = env.Begin();
  REQUIRE(env.Put(rec, t2, env.Now(t2), &big2).code == WriteOutcome::kDone);
  CHECK(env.Get(rec, env.Now(t2)) == big2);
  // Overwrite our own fragmented version (its fragments are freed) with another big one.
  const WriteOutcome own = env.Put(rec, t2, env.Now(t2), &big3);
  REQUIRE(own.code == WriteOutcome::kDone);
  CHECK(own.old_was_own);
  CHECK(own.old_body == big2);
  CHECK(env.Get(rec, env.Now(t2)) == big3);
  CHECK(env.Get(rec, env.At(s1)) == big1);
  REQUIRE_OK(env.tm->Commit(t2));
  const uint64_t s2 = env.tm->CurrentCn();

  const uint64_t t3 = env.Begin();
  REQUIRE(env.Put(rec, t3, env.Now(t3), &small).code == WriteOutcome::kDone);
  REQUIRE_OK(env.tm->Commit(t3));
  const uint64_t t4 = env.Begin();
  REQUIRE(env.Put(rec, t4, env.Now(t4), &big1).code == WriteOutcome::kDone);
  REQUIRE_OK(env.tm->Commit(t4));

  CHECK(env.Get(rec, env.At(s1)) == big1);
  CHECK(env.Get(rec, env.At(s2)) == big3);
  CHECK(env.Get(rec, env.At(s2 + 1)) == small);
  CHECK(env.Get(rec, env.Now()) == big1);
  CHECK(env.Get(neighbour, env.Now()) == small);
  const auto versions = env.Versions(rec);
  REQUIRE(versions.size() == 4);
  CHECK(std::get<2>(versions[0]) == big1);
  CHECK(std::get<2>(versions[1]) == small);
  CHECK(std::get<2>(versions[2]) == big3);
  CHECK(std::get<2>(versions[3]) == big1);
  CHECK(env.Check().empty());
  env.Reopen();
  CHECK(env.Get(rec, env.Now()) == big1);
  CHECK(env.Versions(rec).size() == 4);
  CHECK(env.Check().empty());
}

TEST_CASE("relation: a transaction overwrites its own version in place", "[relation]") {
  RelEnv env;
  const uint64_t t1 = env.Begin();
  const uint64_t rec = VALUE_OR_FAIL(env.rel->Insert(t1, Body(1, 1)));
  // Own insert, own updates: one version.
  const std::string b2 = Body(1, 2), b3 = Body(1, 3);
  WriteOutcome w = env.Put(rec, t1, env.Now(t1), &b2);
  REQUIRE(w.code == WriteOutcome::kDone);
  CHECK(w.old_was_own);
  CHECK(w.old_body == Body(1, 1));
  REQUIRE_OK(env.tm->Commit(t1));
  CHECK(env.Versions(rec).size() == 1);
  const uint64_t s1 = env.tm->CurrentCn();

  // t2 pushes t1's version down (as a delta against its own), then overwrites its own twice:
  // the delta must be rebuilt, or the old snapshot would read garbage.
  const uint64_t t2 = env.Begin();
  w = env.Put(rec, t2, env.Now(t2), &b3);
  REQUIRE(w.code == WriteOutcome::kDone);
  CHECK(!w.old_was_own);
  CHECK(w.old_body == b2);
  CHECK(env.CountLines(record::kRecBackVersion | record::kRecDelta) == 1);
  const std::string b4 = Body(1, 4, 900), b5 = Body(1, 5, 10);
  w = env.Put(rec, t2, env.Now(t2), &b4);
  REQUIRE(w.code == WriteOutcome::kDone);
  CHECK(w.old_was_own);
  CHECK(w.old_body == b3);
  w = env.Put(rec, t2, env.Now(t2), &b5);
  CHECK(w.old_body == b4);
  CHECK(env.Get(rec, env.Now(t2)) == b5);
  CHECK(env.Get(rec, env.At(s1)) == b2);
  CHECK(env.Get(rec, env.Now()) == b2);
  auto versions = env.Versions(rec);
  REQUIRE(versions.size() == 2);
  CHECK(versions[0] == std::make_tuple(t2, false, b5));
  CHECK(versions[1] == std::make_tuple(t1, false, b2));

  // Own delete, then anything more is NotFound; the reader of the old snapshot is unaffected.
  w = env.Put(rec, t2, env.Now(t2), nullptr);
  REQUIRE(w.code == WriteOutcome::kDone);
  CHECK(w.old_body == b5);
  CHECK(env.Get(rec, env.Now(t2)) == std::nullopt);
  CHECK(env.Put(rec, t2, env.Now(t2), &b3).code == WriteOutcome::kNotFound);
  CHECK(env.Put(rec, t2, env.Now(t2), nullptr).code == WriteOutcome::kNotFound);
  CHECK(env.Get(rec, env.At(s1)) == b2);
  REQUIRE_OK(env.tm->Commit(t2));
  CHECK(env.Get(rec, env.Now()) == std::nullopt);
  CHECK(env.Get(rec, env.At(s1)) == b2);
  versions = env.Versions(rec);
  REQUIRE(versions.size() == 2);
  CHECK(std::get<1>(versions[0]));
  CHECK(env.Check().empty());
}

TEST_CASE("relation: a dead version is skipped by readers and overwritten by the next writer",
          "[relation]") {
  RelEnv env;
  const uint64_t t1 = env.Begin();
  const uint64_t rec = VALUE_OR_FAIL(env.rel->Insert(t1, Body(1, 1)));
  REQUIRE_OK(env.tm->Commit(t1));
  const uint64_t s1 = env.tm->CurrentCn();

  const uint64_t t2 = env.Begin();
  const std::string b2 = Body(1, 2);
  REQUIRE(env.Put(rec, t2, env.Now(t2), &b2).code == WriteOutcome::kDone);
  REQUIRE_OK(env.tm->MarkDead(t2));
  CHECK(env.Get(rec, env.Now()) == Body(1, 1));
  CHECK(env.Get(rec, env.Now(t2)) == b2);  // (only t2 itself would see it)
  auto versions = env.Versions(rec);
  REQUIRE(versions.size() == 2);
  CHECK(std::get<0>(versions[0]) == t2);

  const uint64_t t3 = env.Begin();
  const std::string b3 = Body(1, 3);
  const WriteOutcome w = env.Put(rec, t3, env.Now(t3), &b3);
  REQUIRE(w.code == WriteOutcome::kDone);
  CHECK(!w.old_was_own);
  // What t3 replaced, as far as anyone can see (and what an undo must put back), is t1's version.
  CHECK(w.old_body == Body(1, 1));
  versions = env.Versions(rec);
  REQUIRE(versions.size() == 2);  // the dead version is gone
  CHECK(versions[0] == std::make_tuple(t3, false, b3));
  CHECK(versions[1] == std::make_tuple(t1, false, Body(1, 1)));
  CHECK(env.Get(rec, env.Now()) == Body(1, 1));
  REQUIRE_OK(env.tm->Commit(t3));
  CHECK(env.Get(rec, env.Now()) == b3);
  CHECK(env.Get(rec, env.At(s1)) == Body(1, 1));

  // A dead insert: invisible, and there is nothing to update.
  const uint64_t t4 = env.Begin();
  const uint64_t dead_rec = VALUE_OR_FAIL(env.rel->Insert(t4, Body(9, 1)));
  REQUIRE_OK(env.tm->MarkDead(t4));
  CHECK(env.Get(dead_rec, env.Now()) == std::nullopt);
  const uint64_t t5 = env.Begin();
  CHECK(env.Put(dead_rec, t5, env.Now(t5), &b3).code == WriteOutcome::kNotFound);
  REQUIRE_OK(env.tm->Commit(t5));
  CHECK(env.Check().empty());
  env.Reopen();
  CHECK(env.Get(rec, env.Now()) == b3);
  CHECK(env.Get(dead_rec, env.Now()) == std::nullopt);
  CHECK(env.Check().empty());
}

TEST_CASE("relation: Write reports waits, conflicts and deleted records", "[relation]") {
  RelEnv env;
  const uint64_t t1 = env.Begin();
  const uint64_t rec = VALUE_OR_FAIL(env.rel->Insert(t1, Body(1, 1)));
  REQUIRE_OK(env.tm->Commit(t1));
  const std::string b2 = Body(1, 2), b3 = Body(1, 3), b4 = Body(1, 4);

  // Another active writer: wait for it.
  const uint64_t t2 = env.Begin();
  const uint64_t t3 = env.Begin();
  const ReadView v3 = env.Now(t3);  // t3's snapshot: before t2 commits
  REQUIRE(env.Put(rec, t2, env.Now(t2), &b2).code == WriteOutcome::kDone);
  WriteOutcome w = env.Put(rec, t3, v3, &b3);
  CHECK(w.code == WriteOutcome::kWaitFor);
  CHECK(w.other_txn == t2);
  CHECK(env.Put(rec, t3, v3, &b3, /*read_committed=*/true).code == WriteOutcome::kWaitFor);

  // t2 commits after t3's snapshot: a conflict for a snapshot writer, fine for read committed.
  REQUIRE_OK(env.tm->Commit(t2));
  w = env.Put(rec, t3, v3, &b3);
  CHECK(w.code == WriteOutcome::kConflict);
  CHECK(w.other_txn == t2);
  CHECK(env.Put(rec, t3, v3, nullptr).code == WriteOutcome::kConflict);
  w = env.Put(rec, t3, env.Now(t3), &b3, /*read_committed=*/true);
  CHECK(w.code == WriteOutcome::kDone);
  CHECK(w.old_body == b2);
  REQUIRE_OK(env.tm->Commit(t3));
  CHECK(env.Get(rec, env.Now()) == b3);

  // A conflict seen through a dead version: t5 commits after t4's snapshot, t6 dies on top.
  const uint64_t t4 = env.Begin();
  const ReadView v4 = env.Now(t4);
  const uint64_t t5 = env.Begin();
  REQUIRE(env.Put(rec, t5, env.Now(t5), &b4).code == WriteOutcome::kDone);
  REQUIRE_OK(env.tm->Commit(t5));
  const uint64_t t6 = env.Begin();
  REQUIRE(env.Put(rec, t6, env.Now(t6), &b2).code == WriteOutcome::kDone);
  REQUIRE_OK(env.tm->MarkDead(t6));
  w = env.Put(rec, t4, v4, &b2);
  CHECK(w.code == WriteOutcome::kConflict);
  CHECK(w.other_txn == t5);
  REQUIRE_OK(env.tm->MarkDead(t4));

  // Deleted and committed: NotFound for later writers; an older snapshot still reads it and
  // gets a conflict when it tries to write.
  const uint64_t t7 = env.Begin();
  const uint64_t t8 = env.Begin();
  const ReadView v8 = env.Now(t8);
  REQUIRE(env.Put(rec, t7, env.Now(t7), nullptr).code == WriteOutcome::kDone);
  REQUIRE_OK(env.tm->Commit(t7));
  CHECK(env.Get(rec, env.Now()) == std::nullopt);
  CHECK(env.Get(rec, v8) == b4);
  CHECK(env.Put(rec, t8, v8, &b2).code == WriteOutcome::kConflict);
  const uint64_t t9 = env.Begin();
  CHECK(env.Put(rec, t9, env.Now(t9), &b2).code == WriteOutcome::kNotFound);
  CHECK(env.Put(rec, t9, env.Now(t9), nullptr).code == WriteOutcome::kNotFound);
  CHECK(env.Put(rec, t9, env.Now(t9), &b2, true).code == WriteOutcome::kNotFound);
  // Record numbers that never existed.
  CHECK(env.Put(page::MakeRecordNo(50, 0), t9, env.Now(t9), &b2).code == WriteOutcome::kNotFound);
  CHECK(env.Put(rec + 500, t9, env.Now(t9), &b2).code == WriteOutcome::kNotFound);
  REQUIRE_OK(env.tm->Commit(t9));
  REQUIRE_OK(env.tm->Commit(t8));
  CHECK(env.Check().empty());
}

TEST_CASE("relation: ReadPage and ListRecords over several pages", "[relation]") {
  RelEnv env;
  const uint64_t t1 = env.Begin();
  std::map<uint64_t, std::string> committed;
  for (int i = 0; i < 300; ++i) {
    const std::string b = Body(i, 1, 40 + i % 50);
    committed[VALUE_OR_FAIL(env.rel->Insert(t1, b))] = b;
  }
  REQUIRE_OK(env.tm->Commit(t1));
  // Delete every 7th, update every 5th (back versions), and leave an active insert.
  const uint64_t t2 = env.Begin();
  std::set<uint64_t> deleted;
  int k = 0;
  for (auto& [rec, body] : committed) {
    if (k % 7 == 0) {
      REQUIRE(env.Put(rec, t2, env.Now(t2), nullptr).code == WriteOutcome::kDone);
      deleted.insert(rec);
    } else if (k % 5 == 0) {
      const std::string b = Body(k, 2, 40 + k % 50);
      REQUIRE(env.Put(rec, t2, env.Now(t2), &b).code == WriteOutcome::kDone);
      body = b;
    }
    ++k;
  }
  REQUIRE_OK(env.tm->Commit(t2));
  for (uint64_t d : deleted) committed.erase(d);
  const uint64_t t3 = env.Begin();
  const uint64_t pending = VALUE_OR_FAIL(env.rel->Insert(t3, Body(999, 1)));

  const uint32_t seqs = env.rel->PageSequences();
  CHECK(seqs > 3);
  std::set<uint64_t> listed;
  std::map<uint64_t, std::string> read;
  for (uint32_t s = 0; s < seqs + 2; ++s) {  // past the end: nothing, no error
    std::vector<uint64_t> recs;
    REQUIRE_OK(env.rel->ListRecords(s, &recs));
    for (uint64_t r : recs) {
      CHECK(page::RecordDpSequence(r) == s);
      CHECK(listed.insert(r).second);
    }
    std::vector<std::pair<uint64_t, std::string>> out;
    REQUIRE_OK(env.rel->ReadPage(s, env.Now(), &out));
    for (auto& [r, body] : out) {
      CHECK(page::RecordDpSequence(r) == s);
      CHECK(read.emplace(r, body).second);
    }
  }
  CHECK(read == committed);  // visible rows only, with their newest bodies
  // Every primary record, visible or not: the deleted ones and the pending insert too.
  std::set<uint64_t> expect_listed{pending};
  for (auto& [r, b] : committed) expect_listed.insert(r);
  expect_listed.insert(deleted.begin(), deleted.end());
  CHECK(listed == expect_listed);
  // The pending insert is visible to its own transaction's page reads.
  std::vector<std::pair<uint64_t, std::string>> own;
  REQUIRE_OK(env.rel->ReadPage(page::RecordDpSequence(pending), env.Now(t3), &own));
  bool found = false;
  for (auto& [r, b] : own) found |= (r == pending && b == Body(999, 1));
  CHECK(found);
  size_t records = 0;
  CHECK(env.Check(&records).empty());
  CHECK(records == expect_listed.size());

  // A crash with t3 active: after the reopen t3 is dead, and its record is invisible.
  env.Reopen();
  read.clear();
  for (uint32_t s = 0; s < env.rel->PageSequences(); ++s) {
    std::vector<std::pair<uint64_t, std::string>> out;
    REQUIRE_OK(env.rel->ReadPage(s, env.Now(), &out));
    for (auto& [r, body] : out) read.emplace(r, body);
  }
  CHECK(read == committed);
  CHECK(env.Check(&records).empty());
  CHECK(records == expect_listed.size());
}

TEST_CASE("relation: a mixed workload keeps Check() clean across a reopen", "[relation]") {
  RelEnv env;
  std::mt19937 rng(21);
  std::map<uint64_t, std::optional<std::string>> model;  // committed newest state
  std::vector<uint64_t> recs;
  for (int round = 0; round < 30; ++round) {
    const uint64_t t = env.Begin();
    std::map<uint64_t, std::optional<std::string>> mine;
    const int ops = 1 + rng() % 12;
    for (int i = 0; i < ops; ++i) {
      const int what = static_cast<int>(rng() % 10);
      std::string body;
      const size_t size = rng() % 10 == 0 ? 5000 + rng() % 20000 : 20 + rng() % 400;
      body = rng() % 2 ? RandomBody(rng, size) : Body(rng() % 50, round, size);
      if (what < 4 || recs.empty()) {
        const uint64_t rec = VALUE_OR_FAIL(env.rel->Insert(t, body));
        recs.push_back(rec);
        mine[rec] = body;
      } else {
        const uint64_t rec = recs[rng() % recs.size()];
        const std::string* raw = what == 9 ? nullptr : &body;
        const WriteOutcome w = env.Put(rec, t, env.Now(t), raw);
        if (w.code == WriteOutcome::kDone) {
          mine[rec] = raw ? std::optional<std::string>(body) : std::nullopt;
        } else {
          REQUIRE(w.code == WriteOutcome::kNotFound);  // deleted (by us or before)
        }
      }
    }
    for (auto& [rec, v] : mine) {
      INFO("own view of " << rec);
      CHECK(env.Get(rec, env.Now(t)) == v);
    }
    if (round % 4 == 3) {
      REQUIRE_OK(env.tm->MarkDead(t));
    } else {
      REQUIRE_OK(env.tm->Commit(t));
      for (auto& [rec, v] : mine) model[rec] = v;
    }
    for (uint64_t rec : recs) {
      INFO("round " << round << " record " << rec);
      const auto it = model.find(rec);
      REQUIRE(env.Get(rec, env.Now()) == (it == model.end() ? std::nullopt : it->second));
    }
  }
  std::vector<std::string> errors = env.Check();
  INFO((errors.empty() ? std::string() : errors[0]));
  CHECK(errors.empty());
  env.Reopen();
  for (uint64_t rec : recs) {
    const auto it = model.find(rec);
    CHECK(env.Get(rec, env.Now()) == (it == model.end() ? std::nullopt : it->second));
  }
  errors = env.Check();
  INFO((errors.empty() ? std::string() : errors[0]));
  CHECK(errors.empty());
}

TEST_CASE(
    "relation: a growing table gets its data pages in aligned extents, filled in order, "
    "and the layout survives a reopen",
    "[relation]") {
  RelEnv env;
  // The data pages by sequence, read from the pointer pages, and how many lines each has.
  auto layout = [&](std::vector<PageNo>* pages, std::vector<uint16_t>* lines) {
    pages->clear();
    lines->clear();
    for (PageNo pp = env.first_pp; pp != page::kNoPage;) {
      PageRef r = VALUE_OR_FAIL(env.db.cache().Fetch(pp, LatchMode::kShared));
      for (uint32_t s = 0; s < page::PpCount(r.data()); ++s) {
        REQUIRE_FALSE(page::PpGetFlags(r.data(), kPs, s) & page::kPpSecondary);
        pages->push_back(page::PpGetSlot(r.data(), kPs, s));
      }
      pp = page::PpNext(r.data());
    }
    for (PageNo p : *pages) {
      PageRef r = VALUE_OR_FAIL(env.db.cache().Fetch(p, LatchMode::kShared));
      lines->push_back(page::DpLineCount(r.data()));
    }
  };
  std::mt19937 rng(5);
  std::vector<std::pair<uint64_t, std::string>> rows;
  const uint64_t t = env.Begin();
  for (int i = 0; i < 9000; ++i) {
    std::string body = RandomBody(rng, 200);  // incompressible: about 17 a page
    rows.emplace_back(VALUE_OR_FAIL(env.rel->Insert(t, body)), std::move(body));
    if (i % 40 == 0) {  // an index growing alongside takes single pages
      PageRef other = VALUE_OR_FAIL(env.space->Allocate(t));
      page::InitPage(other.data(), kPs, page::PageType::kBtree, other.page_no());
      other.Mark(t);
    }
  }
  REQUIRE_OK(env.tm->Commit(t));
  std::vector<PageNo> pages;
  std::vector<uint16_t> lines;
  layout(&pages, &lines);
  REQUIRE(pages.size() > 300);
  // From 64 pages on, extents of 8, from 128 of 16, from 256 of 32 (an eighth of the table,
  // at most 32 and at most an eighth of the 256-page cache): contiguous, each starting at a
  // multiple of its length.
  size_t seq = 64;
  uint32_t last = 0;
  while (seq < pages.size()) {
    const uint32_t n = seq >= 256 ? 32 : seq >= 128 ? 16 : 8;
    INFO("extent at sequence " << seq << " of " << n << " pages, first page " << pages[seq]);
    REQUIRE(seq + n <= pages.size());  // an extent is linked whole
    CHECK(pages[seq] % n == 0);
    for (size_t i = 1; i < n; ++i) CHECK(pages[seq + i] == pages[seq] + i);
    last = n;
    seq += n;
  }
  CHECK(seq == pages.size());
  // Filled in order: every page before the last used one has rows, fewer than an extent after.
  size_t used = pages.size();
  while (used > 0 && lines[used - 1] == 0) --used;
  CHECK(std::count(lines.begin(), lines.begin() + used, 0) == 0);
  CHECK(pages.size() - used < last);
  CHECK(env.Check().empty());

  env.Reopen();
  for (const auto& [rec, body] : rows) REQUIRE(env.Get(rec, env.Now()) == body);
  CHECK(env.Check().empty());
  // After the reopen, inserts go on into the extent's empty pages before any new one.
  const size_t before = pages.size();
  const uint64_t t2 = env.Begin();
  for (int i = 0; i < 17; ++i) {
    std::string body = RandomBody(rng, 200);
    rows.emplace_back(VALUE_OR_FAIL(env.rel->Insert(t2, body)), std::move(body));
  }
  REQUIRE_OK(env.tm->Commit(t2));
  layout(&pages, &lines);
  CHECK(pages.size() == before);
  for (const auto& [rec, body] : rows) REQUIRE(env.Get(rec, env.Now()) == body);
  CHECK(env.Check().empty());
}
