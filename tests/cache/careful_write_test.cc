// Careful write through the buffer cache under simulated crashes, and the rules that make it
// cheap: fresh pages (FetchNew(kUnlinked)) share their prerequisites' batch, sync epochs tell a
// durable prerequisite from one only written, evictions clean a quarter of the cache at once.
//
// The randomized tests grow a forest of pages linked parent -> child through a tiny cache. Every
// link records the child's version (its stamp) when the link was made; the page that links
// records precedence on the child first, as the engine does. After every step the disk is
// checked against a crash model:
// - power loss (forced writes): every page written since the last sync may hold its synced bytes
//   or any version written since, independently of the others (a disk reorders unsynced
//   writes). The check covers every such image at once, exactly: a page is reachable in some
//   image when some version of a reachable page links to it, and each link must hold for every
//   version its child may have.
// - power loss with the fault-injecting file (io::FaultFile): the writes fail from a random
//   point on (a dead disk), then DropUnsynced() leaves what the last sync made durable.
// - process crash (SIGKILL, no forced writes): every completed write is on disk, nothing else.
// In every image, no page reachable from the root may link to a child version that is not there.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/page/page.h"
#include "engine/util/coding.h"
#include "tests/support/cache_util.h"
#include "tests/support/engine_util.h"
#include "tests/support/fault_file.h"
#include "tests/support/temp_dir.h"

using namespace ember;
using cache::BufferCache;
using cache::LatchMode;
using cache::NewPage;
using cache::PageRef;
using page::PageNo;
using testing::CheckBefore;
using testing::FillPage;
using testing::kPs;
using testing::kTsan;
using testing::MakePage;
using testing::Opts;
using testing::Syncs;
using testing::TestDb;
using testing::WritesOf;

namespace {

constexpr PageNo kRoot = 2;
constexpr size_t kMaxLinks = 8;

int StepOf(const std::vector<testing::IoEvent>& ev, PageNo p) {
  const int i = testing::FirstWrite(ev, p);
  return i < 0 ? -1 : ev[i].step;
}

// ---------------------------------------------------------------- linked test pages

// A test page: a kData page with a stamp (version) and up to kMaxLinks links (child, child stamp).
struct Node {
  uint64_t stamp = 1;
  std::vector<std::pair<PageNo, uint64_t>> links;
};

constexpr size_t kLinksAt = testing::kStampOffset + 8;

void Encode(const Node& n, PageNo no, uint8_t* data) {
  page::InitPage(data, kPs, page::PageType::kData, no);
  testing::SetStamp(data, n.stamp);
  util::Put32(data + kLinksAt, static_cast<uint32_t>(n.links.size()));
  for (size_t i = 0; i < n.links.size(); ++i) {
    util::Put32(data + kLinksAt + 4 + 12 * i, n.links[i].first);
    util::Put64(data + kLinksAt + 8 + 12 * i, n.links[i].second);
  }
}

// The node a page image holds, or nullopt when it is not a valid page `no` (zeros, torn, other).
std::optional<Node> Decode(const std::string& bytes, PageNo no) {
  const auto* d = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() != kPs || !page::VerifyPage(d, kPs, no, "test").ok()) return std::nullopt;
  if (page::GetType(d) != page::PageType::kData || page::GetPageNo(d) != no) return std::nullopt;
  Node n;
  n.stamp = testing::GetStamp(d);
  const uint32_t count = util::Get32(d + kLinksAt);
  if (count > kMaxLinks) return std::nullopt;
  for (uint32_t i = 0; i < count; ++i) {
    n.links.emplace_back(util::Get32(d + kLinksAt + 4 + 12 * i),
                         util::Get64(d + kLinksAt + 8 + 12 * i));
  }
  return n;
}

// Every image page `no` may hold after a crash.
using Versions = std::function<std::vector<std::string>(PageNo)>;

// "" when, in every image `versions` allows, every page reachable from the root links only to
// child versions that are on disk; otherwise the first broken link.
std::string CheckImages(const Versions& versions) {
  std::set<PageNo> seen;
  std::vector<PageNo> todo{kRoot};
  while (!todo.empty()) {
    const PageNo p = todo.back();
    todo.pop_back();
    if (!seen.insert(p).second) continue;
    for (const std::string& v : versions(p)) {
      std::optional<Node> n = Decode(v, p);
      if (!n) {
        if (p == kRoot) return "the root page is not valid on disk";
        continue;  // a missing child is reported by the link to it
      }
      for (auto [child, stamp] : n->links) {
        for (const std::string& w : versions(child)) {
          std::optional<Node> c = Decode(w, child);
          if (!c || c->stamp < stamp) {
            return absl::StrCat("page ", p, " (stamp ", n->stamp, ") links page ", child,
                                " at stamp ", stamp, ", but page ", child, " may hold ",
                                c ? absl::StrCat("stamp ", c->stamp) : std::string("no page"));
          }
        }
        todo.push_back(child);
      }
    }
  }
  return "";
}

// A File that remembers, per page, the synced bytes and every version written since the last
// Sync(): the images a power loss may leave (see the file comment). Writes go through to `base`.
// FailSyncs(n) makes the next n syncs fail with EIO (and make nothing durable).
class VersionsFile : public io::File {
 public:
  explicit VersionsFile(std::unique_ptr<io::File> base) : base_(std::move(base)) {}

  std::vector<std::string> Versions(PageNo no) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = pending_.find(no);
    if (it != pending_.end()) return it->second;  // [0] = synced, then each unsynced version
    std::string cur(kPs, '\0');
    if (uint64_t{no + 1} * kPs <= synced_size_) {
      if (!base_->Read(uint64_t{no} * kPs, cur.data(), kPs).ok()) cur.assign(kPs, '\0');
    }
    return {cur};
  }
  uint64_t syncs() const { return syncs_; }
  void FailSyncs(int n) {
    std::lock_guard<std::mutex> g(mu_);
    fail_syncs_ = n;
  }

  absl::Status Read(uint64_t offset, void* buf, size_t len) override {
    return base_->Read(offset, buf, len);
  }
  absl::Status Write(uint64_t offset, const void* data, size_t len) override {
    std::lock_guard<std::mutex> g(mu_);
    if (offset % kPs != 0 || len != kPs) return absl::InternalError("test: not a page write");
    const PageNo no = static_cast<PageNo>(offset / kPs);
    auto [it, first] = pending_.try_emplace(no);
    if (first) {
      std::string synced(kPs, '\0');
      if (offset + kPs <= synced_size_) {
        if (absl::Status s = base_->Read(offset, synced.data(), kPs); !s.ok()) return s;
      }
      it->second.push_back(std::move(synced));
    }
    it->second.emplace_back(static_cast<const char*>(data), len);
    return base_->Write(offset, data, len);
  }
  absl::Status WriteBatch(std::span<const io::WriteRequest> reqs) override {
    for (const io::WriteRequest& r : reqs) {
      if (absl::Status s = Write(r.offset, r.data, r.len); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    std::lock_guard<std::mutex> g(mu_);
    if (fail_syncs_ > 0) {
      --fail_syncs_;
      return io::ErrnoStatus(EIO, "fdatasync", base_->path());
    }
    pending_.clear();
    ++syncs_;
    absl::StatusOr<uint64_t> size = base_->Size();
    if (!size.ok()) return size.status();
    synced_size_ = *size;
    return absl::OkStatus();  // durability is what this file says, not the disk
  }
  absl::Status Allocate(uint64_t size) override { return base_->Allocate(size); }
  absl::Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  absl::StatusOr<uint64_t> Size() override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  std::unique_ptr<io::File> base_;
  std::mutex mu_;
  std::map<PageNo, std::vector<std::string>> pending_;  // guarded by mu_
  uint64_t synced_size_ = 0;                            // guarded by mu_
  uint64_t syncs_ = 0;                                  // guarded by mu_
  int fail_syncs_ = 0;                                  // guarded by mu_
};

std::unique_ptr<io::File> NewFile(const testing::TempDir& dir, const char* name) {
  io::FileOptions fo;
  fo.mode = io::OpenMode::kCreateNew;
  auto f = io::OpenPosixFile(dir.File(name), fo);
  REQUIRE(f.ok());
  return std::move(*f);
}

// Grows and changes a forest of linked pages through `c` at random; `model` is what the cache
// holds. Each step returns the cache's error, if any. Now and then it keeps a changed page latched
// exclusively for a few steps (as a transaction holds latches while evictions run), so that
// evictions meet prerequisites they cannot write.
class Forest {
 public:
  Forest(BufferCache* c, uint32_t seed) : c_(c), rng_(seed) {}

  absl::Status Create() {
    model_.clear();
    next_ = kRoot + 1;
    if (absl::Status s = Write(kRoot, NewPage::kPlaced, Node{}); !s.ok()) return s;
    return c_->FlushAll();
  }

  absl::Status Step() {
    if (held_ && --hold_steps_ <= 0) Unhold();
    const int op = static_cast<int>(rng_() % 100);
    if (op < 40) return Grow();
    if (op < 55) return Bump();
    if (op < 75) return Relink();
    if (op < 88) return Chain();
    if (op < 92) return kTsan ? Bump() : Hold();
    Unhold();  // a flush waits for latches: never for our own
    if (op < 96) return c_->FlushAll();
    std::vector<PageNo> some{Pick()};
    return c_->FlushPages(some);
  }

  const std::map<PageNo, Node>& model() const { return model_; }
  void Unhold() {
    held_.reset();
    held_no_ = 0;
  }

 private:
  PageNo Pick() {
    for (;;) {
      auto it = model_.begin();
      std::advance(it, static_cast<long>(rng_() % model_.size()));
      if (it->first != held_no_ || model_.size() == 1) return it->first;
    }
  }
  // Changes a page and keeps it latched for a few steps.
  absl::Status Hold() {
    Unhold();
    const PageNo p = Pick();
    if (p == kRoot) return Bump();
    absl::StatusOr<PageRef> r = c_->Fetch(p, LatchMode::kExclusive);
    if (!r.ok()) return r.status();
    model_[p].stamp++;
    Encode(model_[p], p, r->data());
    r->Mark(1);
    held_ = std::move(*r);
    held_no_ = p;
    hold_steps_ = 3 + static_cast<int>(rng_() % 20);
    return absl::OkStatus();
  }
  // (Re)writes page `no` as `n`, fetched new (`kind`) or existing. The model changes only with
  // the page (a step that fails leaves both as they were).
  absl::Status Write(PageNo no, std::optional<NewPage> kind, const Node& n) {
    absl::StatusOr<PageRef> r =
        kind ? c_->FetchNew(no, *kind) : c_->Fetch(no, LatchMode::kExclusive);
    if (!r.ok()) return r.status();
    Encode(n, no, r->data());
    r->Mark(1 + rng_() % 3);
    model_[no] = n;
    return absl::OkStatus();
  }
  // A new child (fresh, most of the time) of `parent`, linked after it is complete.
  absl::Status AddChild(PageNo parent, PageNo* child) {
    const PageNo x = next_++;
    const NewPage kind = rng_() % 5 == 0 ? NewPage::kPlaced : NewPage::kUnlinked;
    if (absl::Status s = Write(x, kind, Node{}); !s.ok()) return s;
    if (absl::Status s = Link(parent, x); !s.ok()) return s;
    *child = x;
    return absl::OkStatus();
  }
  // Parent links (or relinks) `child` at its current stamp: precedence first, then the change.
  absl::Status Link(PageNo parent, PageNo child) {
    absl::StatusOr<PageRef> p = c_->Fetch(parent, LatchMode::kExclusive);
    if (!p.ok()) return p.status();
    if (absl::Status s = c_->AddPrecedence(*p, child); !s.ok()) return s;
    Node n = model_[parent];
    auto it = std::find_if(n.links.begin(), n.links.end(),
                           [&](const auto& l) { return l.first == child; });
    if (it == n.links.end()) n.links.emplace_back(child, model_[child].stamp);
    else it->second = model_[child].stamp;
    n.stamp++;
    Encode(n, parent, p->data());
    p->Mark(1 + rng_() % 3);
    model_[parent] = n;
    return absl::OkStatus();
  }
  absl::Status Grow() {
    const PageNo p = Pick();
    if (model_[p].links.size() >= kMaxLinks) return Bump();
    PageNo x;
    return AddChild(p, &x);
  }
  absl::Status Bump(PageNo p) {
    Node n = model_[p];
    n.stamp++;
    return Write(p, std::nullopt, n);
  }
  absl::Status Bump() { return Bump(Pick()); }
  absl::Status Relink() {
    const PageNo p = Pick();
    if (model_[p].links.empty()) return Grow();
    const PageNo child = model_[p].links[rng_() % model_[p].links.size()].first;
    if (child == held_no_) return Bump();
    if (absl::Status s = Bump(child); !s.ok()) return s;
    return Link(p, child);
  }
  // A B-tree split chain: each new page is linked from the one made before it.
  absl::Status Chain() {
    PageNo p = Pick();
    if (model_[p].links.size() >= kMaxLinks) return Bump();
    for (int i = 0, n = 2 + static_cast<int>(rng_() % 5); i < n; ++i) {
      PageNo x;
      if (absl::Status s = AddChild(p, &x); !s.ok()) return s;
      p = x;
    }
    return absl::OkStatus();
  }

  BufferCache* c_;
  std::mt19937 rng_;
  std::map<PageNo, Node> model_;
  PageNo next_ = kRoot + 1;
  std::optional<PageRef> held_;  // declared after nothing it needs: released before c_ dies
  PageNo held_no_ = 0;
  int hold_steps_ = 0;
};

// After FlushAll and a reopen, every page holds what the model says.
std::string CheckModel(io::File* file, const std::map<PageNo, Node>& model) {
  for (const auto& [no, n] : model) {
    std::string bytes(kPs, '\0');
    if (!file->Read(uint64_t{no} * kPs, bytes.data(), kPs).ok()) return absl::StrCat("read ", no);
    std::optional<Node> d = Decode(bytes, no);
    if (!d || d->stamp != n.stamp || d->links != n.links) {
      return absl::StrCat("page ", no, " does not hold its last version");
    }
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------- the rules, one at a time

TEST_CASE(
    "careful write: a fresh page shares its prerequisite's batch, the page linking to it "
    "follows both after a sync",
    "[cache]") {
  for (bool forced : {false, true}) {
    INFO("forced_writes " << forced);
    TestDb db(Opts(64, forced), /*init_pip=*/false);
    BufferCache& c = db.cache();
    constexpr PageNo kA = 10, kF = 11, kL = 12;  // A: a PIP, say; F: allocated; L: links F
    MakePage(c, kA, 1);
    MakePage(c, kL, 1);
    REQUIRE_OK(c.FlushAll());  // A and L are on disk
    db.file().ClearEvents();
    {
      PageRef a = VALUE_OR_FAIL(c.Fetch(kA, LatchMode::kExclusive));
      testing::SetStamp(a.data(), 2);
      a.Mark(1);
    }
    {
      PageRef f = VALUE_OR_FAIL(c.FetchNew(kF, NewPage::kUnlinked));
      FillPage(f.data(), kPs, kF, 1);
      REQUIRE_OK(c.AddPrecedence(f, kA));
      f.Mark(1);
    }
    {
      PageRef l = VALUE_OR_FAIL(c.Fetch(kL, LatchMode::kExclusive));
      REQUIRE_OK(c.AddPrecedence(l, kF));
      testing::SetStamp(l.data(), 2);
      l.Mark(1);
    }
    const uint64_t syncs_before = c.SyncCount();
    REQUIRE_OK(c.FlushAll());
    const std::vector<testing::IoEvent> ev = db.file().events();
    INFO(testing::Describe(ev));
    CHECK(StepOf(ev, kA) == StepOf(ev, kF));  // one batch, no sync between
    CHECK(CheckBefore(ev, kF, kL, forced) == "");
    CHECK(CheckBefore(ev, kA, kL, forced) == "");
    // With forced writes: one sync before L, one at the end; without: none at all.
    CHECK(Syncs(ev) == (forced ? 2u : 0u));
    CHECK(c.SyncCount() - syncs_before == Syncs(ev));
  }
}

TEST_CASE(
    "careful write: a page made by FetchNew(kPlaced) is not fresh: its prerequisite goes "
    "out first, synced",
    "[cache]") {
  TestDb db(Opts(64, /*forced=*/true), /*init_pip=*/false);
  BufferCache& c = db.cache();
  MakePage(c, 10, 1);
  REQUIRE_OK(c.FlushAll());
  db.file().ClearEvents();
  {
    PageRef a = VALUE_OR_FAIL(c.Fetch(10, LatchMode::kExclusive));
    a.Mark(1);
  }
  {
    PageRef p = VALUE_OR_FAIL(c.FetchNew(11));  // a new PIP, say: found by its place on disk
    FillPage(p.data(), kPs, 11, 1);
    REQUIRE_OK(c.AddPrecedence(p, 10));
    p.Mark(1);
  }
  REQUIRE_OK(c.FlushAll());
  const std::vector<testing::IoEvent> ev = db.file().events();
  INFO(testing::Describe(ev));
  CHECK(CheckBefore(ev, 10, 11, /*need_sync=*/true) == "");
}

TEST_CASE("careful write: a split chain of fresh pages costs a few syncs, not one per page",
          "[cache]") {
  // As a B-tree's right edge splits during a bulk insert: each new right page R(i+1) must reach
  // disk before R(i) (which now points at it), and all of them before the old leaf N and the
  // parent P, which are on disk. Before fresh pages, every link of the chain was a sync.
  TestDb db(Opts(256, /*forced=*/true), /*init_pip=*/false);
  BufferCache& c = db.cache();
  constexpr PageNo kN = 10, kP = 11, kFirst = 100, kCount = 60;
  MakePage(c, kN, 1);
  MakePage(c, kP, 1);
  REQUIRE_OK(c.FlushAll());
  db.file().ClearEvents();
  PageNo left = kN;
  for (PageNo r = kFirst; r < kFirst + kCount; ++r) {
    {
      PageRef rr = VALUE_OR_FAIL(c.FetchNew(r, NewPage::kUnlinked));
      FillPage(rr.data(), kPs, r, 1);
      rr.Mark(5);
    }
    {
      PageRef l = VALUE_OR_FAIL(c.Fetch(left, LatchMode::kExclusive));
      REQUIRE_OK(c.AddPrecedence(l, r));
      l.Mark(5);
    }
    {
      PageRef p = VALUE_OR_FAIL(c.Fetch(kP, LatchMode::kExclusive));
      REQUIRE_OK(c.AddPrecedence(p, r));
      REQUIRE_OK(c.AddPrecedence(p, left));
      p.Mark(5);
    }
    left = r;
  }
  REQUIRE_OK(c.FlushTxns(std::vector<uint64_t>{5}));
  const std::vector<testing::IoEvent> ev = db.file().events();
  INFO(testing::Describe(ev));
  for (PageNo r = kFirst; r < kFirst + kCount; ++r) {
    INFO("page " << r);
    CHECK(WritesOf(ev, r) == 1);
    // Fresh: never after the page it points to... (the chain shares one batch)
    if (r + 1 < kFirst + kCount) CHECK(StepOf(ev, r + 1) <= StepOf(ev, r));
    CHECK(CheckBefore(ev, r, kP, true) == "");
  }
  CHECK(CheckBefore(ev, kFirst, kN, true) == "");
  CHECK(CheckBefore(ev, kN, kP, true) == "");
  CHECK(Syncs(ev) <= 3);  // before N, before P, at the end
}

TEST_CASE("careful write: an edge to a page written by an eviction but not yet synced is kept",
          "[cache]") {
  // AddPrecedence must keep the edge although `first` is clean: A's eviction write is not
  // synced yet, and B must not follow it to disk without a sync between.
  TestDb db(Opts(16, /*forced=*/true), /*init_pip=*/false);
  BufferCache& c = db.cache();
  constexpr PageNo kA = 2, kB = 3;
  MakePage(c, kB, 1);
  REQUIRE_OK(c.FlushAll());  // B is on disk: it is not fresh
  db.file().ClearEvents();
  MakePage(c, kA, 1);
  {
    PageRef b = VALUE_OR_FAIL(c.Fetch(kB, LatchMode::kShared));  // keep B resident
    for (PageNo p = 100; p < 140; ++p) MakePage(c, p, p);        // A (oldest) is evicted
  }
  std::vector<testing::IoEvent> ev = db.file().events();
  REQUIRE(WritesOf(ev, kA) == 1);
  const size_t syncs = Syncs(ev);
  {
    PageRef b = VALUE_OR_FAIL(c.Fetch(kB, LatchMode::kExclusive));
    REQUIRE_OK(c.AddPrecedence(b, kA));  // A is clean, but not durable
    testing::SetStamp(b.data(), 2);
    b.Mark(1);
  }
  REQUIRE_OK(c.FlushPages(std::vector<PageNo>{kB}));
  ev = db.file().events();
  INFO(testing::Describe(ev));
  CHECK(Syncs(ev) > syncs);
  CHECK(CheckBefore(ev, kA, kB, /*need_sync=*/true) == "");
}

TEST_CASE(
    "careful write: sync epochs: a prerequisite another flush already synced costs no "
    "second sync",
    "[cache]") {
  TestDb db(Opts(16, /*forced=*/true), /*init_pip=*/false);
  BufferCache& c = db.cache();
  constexpr PageNo kA = 2, kB = 3, kZ = 4;
  MakePage(c, kB, 1);
  REQUIRE_OK(c.FlushAll());
  MakePage(c, kA, 1);
  {
    PageRef b = VALUE_OR_FAIL(c.Fetch(kB, LatchMode::kExclusive));
    REQUIRE_OK(c.AddPrecedence(b, kA));  // A is dirty: the edge asks for this version of A
    testing::SetStamp(b.data(), 2);
    b.Mark(1);
    // While B is pinned, evictions write A (the oldest dirty page): written, not synced.
    for (PageNo p = 100; p < 140; ++p) MakePage(c, p, p);
  }
  REQUIRE(WritesOf(db.file().events(), kA) == 1);
  // An unrelated flush syncs: A's write is durable now.
  MakePage(c, kZ, 1);
  REQUIRE_OK(c.FlushPages(std::vector<PageNo>{kZ}));
  db.file().ClearEvents();
  REQUIRE_OK(c.FlushPages(std::vector<PageNo>{kB}));
  const std::vector<testing::IoEvent> ev = db.file().events();
  INFO(testing::Describe(ev));
  REQUIRE(WritesOf(ev, kB) == 1);
  CHECK(Syncs(ev) == 1);  // only the one that makes B durable
  CHECK(ev.back().sync);
  CHECK(!ev.front().sync);  // no sync before B's write
}

TEST_CASE("careful write: without forced writes the cache never syncs", "[cache]") {
  TestDb db(Opts(16, /*forced=*/false), /*init_pip=*/false);
  BufferCache& c = db.cache();
  Forest forest(&c, 11);
  REQUIRE_OK(forest.Create());
  for (int i = 0; i < 400; ++i) REQUIRE_OK(forest.Step());
  forest.Unhold();
  REQUIRE_OK(c.FlushAll());
  CHECK(c.SyncCount() == 0);
  CHECK(Syncs(db.file().events()) == 0);
  CHECK(db.file().events().size() > 100);  // evictions and flushes did write
}

TEST_CASE("careful write: eviction writes a quarter of the cache per round, and syncs rarely",
          "[cache]") {
  // A bulk load through a full cache: before, every victim was written alone and every written
  // page with prerequisites cost a sync.
  TestDb db(Opts(64, /*forced=*/true), /*init_pip=*/false);
  BufferCache& c = db.cache();
  Forest forest(&c, 5);
  REQUIRE_OK(forest.Create());
  for (int i = 0; i < 2000; ++i) REQUIRE_OK(forest.Step());
  const std::vector<testing::IoEvent> ev = db.file().events();
  size_t writes = 0;
  for (const testing::IoEvent& e : ev) writes += e.sync ? 0 : 1;
  INFO(writes << " page writes, " << Syncs(ev) << " syncs");
  CHECK(writes > 500);
  CHECK(Syncs(ev) * 4 < writes);
}

// ---------------------------------------------------------------- crashes

TEST_CASE(
    "careful write: after a power loss no reachable page links to a page version that is "
    "not on disk (every reordering of unsynced writes)",
    "[exhaustive][cache]") {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    testing::TempDir dir;
    REQUIRE(dir.ok());
    auto vf = std::make_unique<VersionsFile>(NewFile(dir, "db.edb"));
    VersionsFile* file = vf.get();
    BufferCache c(file, Opts(16 + 8 * (seed % 3), /*forced=*/true));
    Forest forest(&c, seed);
    REQUIRE_OK(forest.Create());
    const Versions versions = [&](PageNo p) { return file->Versions(p); };
    int errors = 0;
    for (int i = 0; i < 600; ++i) {
      if (i % 41 == 7) file->FailSyncs(1 + i % 2);  // a failed sync makes nothing durable
      if (!forest.Step().ok()) ++errors;            // reported; the engine goes on
      const std::string broken = CheckImages(versions);
      if (!broken.empty()) FAIL("after step " << i << ": " << broken);
    }
    INFO(errors << " steps saw a failed sync");
    forest.Unhold();
    file->FailSyncs(0);
    REQUIRE_OK(c.FlushAll());
    CHECK(file->Versions(kRoot).size() == 1);  // everything synced
    CHECK(CheckModel(file, forest.model()) == "");
    CHECK(file->syncs() < 600);
  }
}

TEST_CASE(
    "careful write: after failed writes and syncs and a disk that dies mid-flush, "
    "DropUnsynced leaves no reachable page linking to a missing page version (FaultFile)",
    "[cache]") {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 40; ++trial) {
    INFO("trial " << trial);
    testing::TempDir dir;
    REQUIRE(dir.ok());
    auto ff = std::make_unique<io::FaultFile>(NewFile(dir, "db.edb"));
    io::FaultFile* file = ff.get();
    const bool dies = trial % 4 != 3;
    int errors = 0;
    absl::Status last;
    std::map<PageNo, Node> model;
    {
      BufferCache c(file, Opts(16, /*forced=*/true));
      Forest forest(&c, 1000 + trial);
      REQUIRE_OK(forest.Create());
      const int die_at = dies ? 20 + static_cast<int>(rng() % 300) : -1;
      for (int i = 0; i < 400; ++i) {
        if (i == die_at) {  // the disk dies: every write from a random one on fails
          file->FailWriteAfter(1 + rng() % 40, EIO, /*sticky=*/true);
        } else if (i % 37 == 5 && i < die_at) {  // a transient write or sync error
          if (rng() % 3 == 0) file->FailSyncAfter(1 + rng() % 3, EIO);
          else file->FailWriteAfter(1 + rng() % 20, rng() % 2 ? EIO : ENOSPC);
        }
        const absl::Status s = forest.Step();  // the engine reports errors and goes on
        if (!s.ok()) {
          ++errors;
          last = s;
        }
      }
      forest.Unhold();
      if (!dies) {  // the errors were transient: everything still reaches the disk
        file->FailWriteAfter(0, 0);
        file->FailSyncAfter(0, 0);
        REQUIRE_OK(c.FlushAll());
      }
      model = forest.model();
      c.DiscardAll();
    }
    INFO(errors << " steps failed, the last with " << last.ToString());
    REQUIRE_OK(file->DropUnsynced());
    file->FailWriteAfter(0, 0);
    const Versions durable = [&](PageNo p) {
      std::string s(kPs, '\0');
      if (!file->Read(uint64_t{p} * kPs, s.data(), kPs).ok()) s.assign(kPs, '\0');
      return std::vector<std::string>{s};
    };
    CHECK(CheckImages(durable) == "");
    if (!dies) CHECK(CheckModel(file, model) == "");
  }
}

TEST_CASE(
    "careful write: without forced writes, a process crash at any moment leaves no "
    "reachable page linking to a page version that is not on disk",
    "[cache]") {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    INFO("seed " << seed);
    TestDb db(Opts(16, /*forced=*/false), /*init_pip=*/false);
    BufferCache& c = db.cache();
    Forest forest(&c, 50 + seed);
    REQUIRE_OK(forest.Create());
    const Versions on_disk = [&](PageNo p) { return std::vector<std::string>{db.DiskPage(p)}; };
    for (int i = 0; i < 500; ++i) {
      REQUIRE_OK(forest.Step());
      const std::string broken = CheckImages(on_disk);
      if (!broken.empty()) FAIL("after step " << i << ": " << broken);
    }
    forest.Unhold();
    REQUIRE_OK(c.FlushAll());
    CHECK(CheckModel(&db.file(), forest.model()) == "");
  }
}
