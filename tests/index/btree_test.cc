// Tests for the B-link tree (engine/index/btree.h) over a real file and buffer cache: inserts
// (unique keys, non-unique index entries, multi-column keys), removes, range cursors both ways,
// splits at every level against a std::map model, Check, the crash states careful write allows
// (split node and new right page on disk without the parent's separator, built from partial
// flushes and by hand) and their repair, corrupt pages, and concurrent writers and readers.
#include "engine/index/btree.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cache/page_space.h"
#include "engine/index/btree_build.h"
#include "engine/page/btree_page.h"
#include "engine/page/pip.h"
#include "engine/util/key_encoding.h"
#include "tests/support/engine_util.h"

namespace ember::index {
namespace {

using page::BtreeNode;
using page::PageNo;
using Entries = std::vector<std::pair<std::string, uint64_t>>;
using Model = std::map<std::string, uint64_t>;

constexpr uint32_t kRelation = 7;
constexpr uint16_t kIndex = 3;

// A database file holding one tree, with its cache and page space. Crash() drops the cache
// without writing anything (the file keeps what was flushed) and opens the tree again.
class TreeFile {
 public:
  explicit TreeFile(uint32_t page_size = 4096, uint32_t cache_pages = 512)
      : path_(dir_.File("tree.edb")) {
    REQUIRE(dir_.ok());
    opts_.page_size = page_size;
    opts_.capacity = cache_pages;
    opts_.forced_writes = false;  // durability is not under test: what was written is on disk
    io::FileOptions fo;
    fo.mode = io::OpenMode::kCreateNew;
    fo.use_io_uring = false;
    file_ = VALUE_OR_FAIL(io::OpenPosixFile(path_, fo));
    cache_ = std::make_unique<cache::BufferCache>(file_.get(), opts_);
    {
      cache::PageRef pip = VALUE_OR_FAIL(cache_->FetchNew(1));
      page::InitPip(pip.data(), page_size, 1, 0);
      pip.Mark(0);
    }
    space_ = std::make_unique<cache::PageSpace>(cache_.get(), 2);
    root_ = VALUE_OR_FAIL(BTree::Create(cache_.get(), space_.get(), 1, kRelation, kIndex));
    tree_ = std::make_unique<BTree>(cache_.get(), space_.get(), root_);
  }

  BTree& tree() { return *tree_; }
  cache::BufferCache& cache() { return *cache_; }
  cache::PageSpace& space() { return *space_; }
  PageNo root() const { return root_; }
  uint32_t page_size() const { return opts_.page_size; }

  void Crash() {
    const uint32_t page_count = space_->page_count();
    tree_.reset();
    space_.reset();
    cache_.reset();  // nothing is written
    Open(page_count);
  }

  // The file's bytes, and the page count, to come back to with Restore().
  struct Image {
    std::string bytes;
    uint32_t page_count = 0;
  };
  Image Snapshot() {
    REQUIRE_OK(cache_->FlushAll());
    Image im;
    im.page_count = space_->page_count();
    im.bytes.resize(VALUE_OR_FAIL(file_->Size()));
    REQUIRE_OK(file_->Read(0, im.bytes.data(), im.bytes.size()));
    return im;
  }
  void Restore(const Image& im) {
    tree_.reset();
    space_.reset();
    cache_.reset();
    REQUIRE_OK(file_->Truncate(0));
    REQUIRE_OK(file_->Write(0, im.bytes.data(), im.bytes.size()));
    Open(im.page_count);
  }

  // Rewrites page `no` on disk (through the cache, which must hold nothing dirty of it) after
  // `change` edits its decoded node; the checksum stays valid.
  void RewriteNode(PageNo no, const std::function<void(BtreeNode&)>& change) {
    {
      cache::PageRef r = VALUE_OR_FAIL(cache_->Fetch(no, cache::LatchMode::kExclusive));
      BtreeNode n;
      REQUIRE_OK(page::DecodeBtreePage(r.data(), opts_.page_size, no, &n));
      change(n);
      REQUIRE(page::EncodeBtreePage(n, r.data(), opts_.page_size));
      r.Mark(0);
    }
    REQUIRE_OK(cache_->FlushAll());
    Crash();
  }

  // Overwrites raw bytes of page `no` on disk (the checksum no longer matches).
  void SmashBytes(PageNo no, size_t offset, std::string_view bytes) {
    REQUIRE_OK(cache_->FlushAll());
    REQUIRE_OK(file_->Write(uint64_t{no} * opts_.page_size + offset, bytes.data(), bytes.size()));
    Crash();
  }

 private:
  void Open(uint32_t page_count) {
    cache_ = std::make_unique<cache::BufferCache>(file_.get(), opts_);
    space_ = std::make_unique<cache::PageSpace>(cache_.get(), page_count);
    tree_ = std::make_unique<BTree>(cache_.get(), space_.get(), root_);
  }

  testing::TempDir dir_;
  std::string path_;
  cache::CacheOptions opts_;
  std::unique_ptr<io::File> file_;
  std::unique_ptr<cache::BufferCache> cache_;
  std::unique_ptr<cache::PageSpace> space_;
  PageNo root_ = page::kNoPage;
  std::unique_ptr<BTree> tree_;
};

// Every entry from Seek(from) on, in cursor order.
absl::StatusOr<Entries> Scan(const BTree& t, bool descending, std::string_view from = "") {
  absl::StatusOr<BTree::Cursor> c = t.Seek(from, descending);
  if (!c.ok()) return c.status();
  Entries out;
  while (c->Valid()) {
    out.emplace_back(std::string(c->key()), c->value());
    if (absl::Status s = c->Next(); !s.ok()) return s;
  }
  return out;
}

struct CheckResult {
  std::vector<std::string> errors;
  Entries visited;
  std::vector<PageNo> pages;
};
CheckResult CheckTree(const BTree& t) {
  CheckResult r;
  REQUIRE_OK(t.Check(
      &r.errors, [&](std::string_view k, uint64_t v) { r.visited.emplace_back(k, v); }, &r.pages));
  return r;
}

// Requires the tree to hold exactly `model`: Check clean and visiting it in order, scans both
// ways, a point Seek per key and range seeks between keys.
void RequireTree(const BTree& t, const Model& model) {
  const Entries want(model.begin(), model.end());
  CheckResult c = CheckTree(t);
  INFO("Check errors:\n" << absl::StrJoin(c.errors, "\n"));
  REQUIRE(c.errors.empty());
  REQUIRE(c.visited == want);
  REQUIRE(VALUE_OR_FAIL(Scan(t, false)) == want);
  Entries desc = VALUE_OR_FAIL(Scan(t, true));
  std::reverse(desc.begin(), desc.end());
  REQUIRE(desc == want);
  for (const auto& [k, v] : model) {
    BTree::Cursor up = VALUE_OR_FAIL(t.Seek(k));
    REQUIRE(up.Valid());
    REQUIRE(up.key() == k);
    REQUIRE(up.value() == v);
    if (!k.empty()) {  // Seek("", true) means "from the very end"
      BTree::Cursor down = VALUE_OR_FAIL(t.Seek(k, true));
      REQUIRE(down.Valid());
      REQUIRE(down.key() == k);
    }
    // Just past the key (ascending) and just before it (descending): the neighbours.
    const std::string after = k + std::string(1, '\0');
    BTree::Cursor next = VALUE_OR_FAIL(t.Seek(after));
    auto it = model.upper_bound(k);
    REQUIRE(next.Valid() == (it != model.end()));
    if (next.Valid()) REQUIRE(next.key() == it->first);
  }
}

std::string RandomKey(std::mt19937_64& rng, size_t max_len) {
  std::string k(1 + rng() % max_len, '\0');
  for (char& c : k) c = static_cast<char>(rng() % 4 == 0 ? "\x00\xff"[rng() % 2] : rng() % 256);
  return k;
}

// Levels of the tree's pages, and the pages no parent names (reachable only through their left
// sibling's right_sibling: a split whose parent was not written).
struct Shape {
  std::map<int, int> pages_per_level;
  std::map<int, int> link_only_per_level;
  int root_level = 0;
};
Shape ShapeOf(TreeFile& f) {
  CheckResult c = CheckTree(f.tree());
  Shape s;
  std::set<PageNo> named;
  std::map<PageNo, int> level;
  for (PageNo p : c.pages) {
    cache::PageRef r = VALUE_OR_FAIL(f.cache().Fetch(p, cache::LatchMode::kShared));
    BtreeNode n;
    REQUIRE_OK(page::DecodeBtreePage(r.data(), f.page_size(), p, &n));
    level[p] = n.level;
    ++s.pages_per_level[n.level];
    if (p == f.root()) s.root_level = n.level;
    if (!n.leaf()) {
      named.insert(n.low_page);
      for (const auto& e : n.entries) named.insert(static_cast<PageNo>(e.value));
    }
  }
  for (const auto& [p, lv] : level) {
    if (p != f.root() && !named.contains(p)) ++s.link_only_per_level[lv];
  }
  return s;
}

int LinkOnly(const Shape& s) {
  int n = 0;
  for (const auto& [lv, count] : s.link_only_per_level) n += count;
  return n;
}

// ---------------------------------------------------------------- basic operations

TEST_CASE("btree: unique inserts, duplicates, lookups and removes", "[btree][index]") {
  TreeFile f;
  BTree& t = f.tree();
  Model model;
  REQUIRE_OK(t.Insert("m", 1, 1));
  REQUIRE(absl::IsAlreadyExists(t.Insert("m", 2, 1)));
  REQUIRE_OK(t.Insert("", 3, 1));  // the empty key is the smallest
  REQUIRE_OK(t.Insert("z\xff", 4, 1));
  model = {{"m", 1}, {"", 3}, {"z\xff", 4}};
  RequireTree(t, model);

  REQUIRE(absl::IsNotFound(t.Remove("q", 1)));
  REQUIRE_OK(t.Remove("m", 1));
  REQUIRE(absl::IsNotFound(t.Remove("m", 1)));
  model.erase("m");
  RequireTree(t, model);

  const std::string too_long(MaxKeySize(f.page_size()) + 1, 'k');
  REQUIRE(absl::IsInvalidArgument(t.Insert(too_long, 1, 1)));
  REQUIRE(absl::IsNotFound(t.Remove(too_long, 1)));  // never in the tree (an undo may ask)
  const std::string longest(MaxKeySize(f.page_size()), 'k');
  REQUIRE_OK(t.Insert(longest, 9, 1));
  model[longest] = 9;
  RequireTree(t, model);
}

TEST_CASE("btree: an empty tree has nothing to scan either way", "[btree][index]") {
  TreeFile f;
  CHECK_FALSE(VALUE_OR_FAIL(f.tree().Seek("")).Valid());
  CHECK_FALSE(VALUE_OR_FAIL(f.tree().Seek("", true)).Valid());
  CHECK_FALSE(VALUE_OR_FAIL(f.tree().Seek("x", true)).Valid());
  RequireTree(f.tree(), {});
}

// Non-unique index entries: the encoded column value followed by the record number, as the
// index layer builds them (engine/db), so equal values sort by record.
std::string Entry(int64_t value, uint64_t rec) {
  std::string k;
  util::AppendKeyInt64(&k, value);
  for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>(rec >> (8 * i)));
  return k;
}

TEST_CASE("btree: non-unique entries and range cursors both ways", "[btree][index]") {
  TreeFile f;
  BTree& t = f.tree();
  Model model;
  std::mt19937_64 rng(11);
  // 40 distinct values, each in many records: runs of equal values span leaves.
  for (uint64_t rec = 1; rec <= 4000; ++rec) {
    const int64_t v = static_cast<int64_t>(rng() % 40) - 20;
    const std::string k = Entry(v, rec);
    REQUIRE_OK(t.Insert(k, rec, 1));
    model[k] = rec;
  }
  RequireTree(t, model);
  for (int64_t v = -21; v <= 20; ++v) {
    std::string lo;
    util::AppendKeyInt64(&lo, v);
    const std::string hi = lo + std::string(8, '\xff');
    // Ascending from the value's prefix: exactly its records, in record order.
    std::vector<uint64_t> want;
    for (auto it = model.lower_bound(lo); it != model.end() && it->first <= hi; ++it) {
      want.push_back(it->second);
    }
    std::vector<uint64_t> up, down;
    BTree::Cursor c = VALUE_OR_FAIL(t.Seek(lo));
    while (c.Valid() && c.key().substr(0, lo.size()) == lo) {
      up.push_back(c.value());
      REQUIRE_OK(c.Next());
    }
    BTree::Cursor d = VALUE_OR_FAIL(t.Seek(hi, true));
    while (d.Valid() && d.key().substr(0, lo.size()) == lo) {
      down.push_back(d.value());
      REQUIRE_OK(d.Next());
    }
    std::reverse(down.begin(), down.end());
    CHECK(up == want);
    CHECK(down == want);
  }
}

TEST_CASE("btree: multi-column keys order column by column", "[btree][index]") {
  TreeFile f;
  BTree& t = f.tree();
  Model model;
  std::mt19937_64 rng(5);
  const std::vector<std::string> names = {"", "a", "ab", std::string("a\0b", 3), "b", "zz"};
  uint64_t rec = 0;
  for (int64_t a = -3; a <= 3; ++a) {
    for (const std::string& s : names) {
      for (int n = 0; n < 30; ++n) {
        std::string k;
        util::AppendKeyInt64(&k, a);
        util::AppendKeyString(&k, s);
        util::AppendKeyDouble(&k, static_cast<double>(rng() % 1000) / 7.0 - 50);
        ++rec;
        if (model.emplace(k, rec).second) REQUIRE_OK(t.Insert(k, rec, 1));
      }
    }
  }
  RequireTree(t, model);
  // The (a, s) prefix ranges come back in column order: a first, then the string.
  std::vector<std::pair<int64_t, std::string>> seen;
  Entries all = VALUE_OR_FAIL(Scan(t, false));
  for (const auto& [k, v] : all) {
    std::string_view in = k;
    int64_t a;
    std::string s;
    REQUIRE(util::DecodeKeyInt64(&in, &a));
    REQUIRE(util::DecodeKeyString(&in, &s));
    if (seen.empty() || seen.back() != std::make_pair(a, s)) seen.emplace_back(a, s);
  }
  std::vector<std::pair<int64_t, std::string>> want;
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t a = -3; a <= 3; ++a) {
    for (const std::string& s : sorted) want.emplace_back(a, s);
  }
  CHECK(seen == want);
}

// ---------------------------------------------------------------- splits against a model

TEST_CASE("btree: thousands of random inserts and removes split every level and match a model",
          "[exhaustive][btree][index]") {
  const uint32_t ps = GENERATE(4096u, 8192u);
  CAPTURE(ps);
  TreeFile f(ps, 256);  // a small cache: pages are evicted and read back
  BTree& t = f.tree();
  Model model;
  std::mt19937_64 rng(ps);
  for (int i = 0; i < 30000; ++i) {
    // Mostly short random keys, some of the maximum size (few per page: many leaves, and
    // enough of them for internal nodes, which hold hundreds of short separators, to split).
    std::string k = RandomKey(rng, 60);
    if (rng() % 4 == 0) k.resize(MaxKeySize(ps), 'm');
    const absl::Status s = t.Insert(k, i, 1 + i % 5);
    if (model.emplace(k, i).second) {
      REQUIRE_OK(s);
    } else {
      REQUIRE(absl::IsAlreadyExists(s));
    }
    if (i % 7 == 3 && !model.empty()) {
      auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
      REQUIRE_OK(t.Remove(it->first, 1));
      model.erase(it);
    }
  }
  RequireTree(t, model);
  const Shape shape = ShapeOf(f);
  CHECK(shape.root_level >= 2);
  CHECK(shape.pages_per_level.at(1) >= 2);  // internal non-root nodes split too
  CHECK(LinkOnly(shape) == 0);
  // Everything reaches disk and reads back.
  REQUIRE_OK(f.cache().FlushAll());
  f.Crash();
  RequireTree(f.tree(), model);

  // Remove everything: empty leaves stay linked and scans pass over them both ways.
  for (const auto& [k, v] : model) REQUIRE_OK(f.tree().Remove(k, 1));
  RequireTree(f.tree(), {});
  REQUIRE_OK(f.tree().Insert("again", 1, 1));
  RequireTree(f.tree(), {{"again", 1}});
}

TEST_CASE("btree: an insert reports a key prefix alone only when no other entry has it",
          "[btree][index]") {
  // Unique indexes skip their duplicate check when Insert says the key (the entry less its
  // 8-byte record suffix) was alone: it must never say so wrongly, wherever the neighbours lie
  // (same leaf, across a leaf boundary, in the rightmost leaf), and it should say so often.
  const uint32_t ps = GENERATE(4096u, 8192u);
  CAPTURE(ps);
  TreeFile f(ps, 256);
  BTree& t = f.tree();
  std::map<std::string, int> prefixes;  // key prefix -> entries with it
  std::mt19937_64 rng(ps + 1);
  int said_alone = 0;
  const int n = 20000;
  // First a few entries per prefix from a pool (so leaf boundaries often fall between two
  // prefixes, and a new entry can land last in a leaf with its prefix only in the next leaf),
  // then ascending unique prefixes (a bulk load), some long so leaves hold few entries.
  std::vector<std::string> pool;
  for (int i = 0; i < 2000; ++i) pool.push_back(RandomKey(rng, 1 + rng() % 12));
  for (int i = 0; i < n; ++i) {
    std::string prefix = i < n / 2 ? pool[rng() % pool.size()]
                                   : absl::StrCat("k", 100000 + i, std::string(rng() % 200, 'p'));
    const uint64_t rec = rng();
    std::string entry = prefix;
    for (int b = 7; b >= 0; --b) entry.push_back(static_cast<char>((rec >> (8 * b)) & 0xFF));
    bool alone = true;
    const absl::Status s = t.Insert(entry, rec, 1, prefix.size(), &alone);
    if (!s.ok()) {
      REQUIRE(absl::IsAlreadyExists(s));
      CHECK_FALSE(alone);
      continue;
    }
    int& count = prefixes[prefix];
    if (alone) {
      INFO("entry " << i << " said alone with " << count << " other entries of its prefix");
      REQUIRE(count == 0);
      ++said_alone;
    }
    ++count;
  }
  CHECK(ShapeOf(f).root_level >= 1);
  // The ascending half nearly always finds its answer in the leaf.
  CHECK(said_alone > n / 2 * 9 / 10);
}

TEST_CASE("btree: ascending and descending bulk loads", "[btree][index]") {
  const bool descending = GENERATE(false, true);
  TreeFile f;
  Model model;
  std::mt19937_64 rng(9);
  for (int i = 0; i < 20000; ++i) {
    const int n = descending ? 20000 - i : i;
    // About 190 bytes an entry: some 21 fit in a leaf, so 20,000 entries make more leaves than
    // one internal node of short separators holds.
    const std::string k =
        Entry(n, static_cast<uint64_t>(n)) + RandomKey(rng, 1) + std::string(170, 'p');
    REQUIRE_OK(f.tree().Insert(k, n, 1));
    model[k] = n;
  }
  RequireTree(f.tree(), model);
  const Shape shape = ShapeOf(f);
  CHECK(shape.root_level >= 2);
  if (descending) {
    CHECK(shape.pages_per_level.at(0) > 20000 / 18);
  } else {
    // Appending at the right end leaves the left pages full.
    CHECK(shape.pages_per_level.at(0) < 20000 / 18);
  }
}

// ---------------------------------------------------------------- crash states

// A transaction's split is written by whichever commit comes next: the split's pages are the
// engine's (txn 0), so another transaction's committed entry in the new right page never reaches
// disk without the links that make it reachable. (Before, a failed or never-committed splitter
// left its pages dirty while the next commit wrote only the right page: its entries were lost.)
TEST_CASE("btree: a split by an uncommitted transaction is written by the next commit",
          "[btree][index][crash]") {
  TreeFile f;
  Model model;
  int i = 0;
  for (; i < 200; ++i) {
    const std::string k = Entry(i, i);
    REQUIRE_OK(f.tree().Insert(k, i, 1));
    model[k] = i;
  }
  REQUIRE_OK(f.cache().FlushAll());
  const uint32_t before = f.space().page_count();
  // Transaction 2 appends until a leaf splits; it never commits.
  for (; f.space().page_count() == before; ++i) {
    REQUIRE_OK(f.tree().Insert(Entry(i, i), i, 2));
  }
  // Transaction 3 inserts into the new rightmost leaf and commits (its flush).
  const std::string k3 = Entry(100000, 1);
  REQUIRE_OK(f.tree().Insert(k3, 77, 3));
  const uint64_t txns[] = {3};
  REQUIRE_OK(f.cache().FlushTxns(txns));
  f.Crash();
  Entries all = VALUE_OR_FAIL(Scan(f.tree(), false));
  REQUIRE(std::find(all.begin(), all.end(), std::make_pair(k3, uint64_t{77})) != all.end());
  for (const auto& [k, v] : model) {
    REQUIRE(std::find(all.begin(), all.end(), std::make_pair(k, v)) != all.end());
  }
  CheckResult c = CheckTree(f.tree());
  INFO(absl::StrJoin(c.errors, "\n"));
  CHECK(c.errors.empty());
}

// Builds a tree, then for one insert that splits a leaf and its parent (and maybe more), every
// state a crash can leave: for each page X of the tree, X written with its prerequisites
// (FlushPages) and nothing else. Each state must read as the tree before or after the insert,
// both ways, pass Check, and get repaired by writers that move right.
// The pages a descent for `key` passes in a consistent tree (no moving right), root first.
std::vector<PageNo> PathTo(TreeFile& f, std::string_view key) {
  std::vector<PageNo> path{f.root()};
  for (;;) {
    cache::PageRef r = VALUE_OR_FAIL(f.cache().Fetch(path.back(), cache::LatchMode::kShared));
    BtreeNode n;
    REQUIRE_OK(page::DecodeBtreePage(r.data(), f.page_size(), path.back(), &n));
    if (n.leaf()) return path;
    PageNo child = n.low_page;
    for (const auto& e : n.entries) {
      if (e.key <= key) child = static_cast<PageNo>(e.value);
    }
    path.push_back(child);
  }
}

// Builds a tree, then for inserts that split a leaf and its (non-root) parent, every state a
// crash can leave: for each page X the insert changed, X written with its prerequisites
// (FlushPages) and nothing else. Each state must read as the tree before or after the insert,
// both ways, pass Check, and get repaired by writers that move right.
TEST_CASE("btree: an ascending load of prefix-compressed entries leaves its leaves full",
          "[btree][index]") {
  // Entries shaped as a unique index's: key and record number, consecutive keys sharing all but
  // their last bytes (about 14 bytes an entry). A rightmost leaf filled to the last byte needs
  // room for a fence once it splits; the split must still leave it nearly full, not halve it.
  TreeFile f(4096, 256);
  Model model;
  constexpr int64_t kN = 20000;
  for (int64_t id = 1; id <= kN; ++id) {
    const uint64_t rec = (static_cast<uint64_t>(id / 111) << 16) | static_cast<uint64_t>(id % 111);
    const std::string k = Entry(id, rec);
    REQUIRE_OK(f.tree().Insert(k, rec, 1, /*prefix=*/k.size() - 8));
    model[k] = rec;
  }
  RequireTree(f.tree(), model);
  const Shape shape = ShapeOf(f);
  INFO("leaves " << shape.pages_per_level.at(0));
  // Full leaves hold about 260 entries each (77 leaves); half-full ones would need over 150.
  CHECK(shape.pages_per_level.at(0) <= kN / 200);
}

TEST_CASE("btree: an ascending load of keys of varied length splits at the right end correctly",
          "[btree][index]") {
  // Keys with tails of 0-60 bytes: the last leaf, once full, sometimes has room for its fence and
  // sometimes has to move its last entries to the new page (the tail split's two shapes).
  TreeFile f(4096, 256);
  Model model;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 6000; ++i) {
    char num[16];
    std::snprintf(num, sizeof num, "r%07d", i);
    const std::string k =
        std::string(num) + std::string(rng() % 61, static_cast<char>('a' + rng() % 26));
    REQUIRE_OK(f.tree().Insert(k, static_cast<uint64_t>(i), 1));
    model[k] = static_cast<uint64_t>(i);
    if (i % 1500 == 0) RequireTree(f.tree(), model);
  }
  RequireTree(f.tree(), model);
  const Shape shape = ShapeOf(f);
  CHECK(LinkOnly(shape) == 0);
  // About 40 bytes an entry: a full leaf holds about 100; half-full ones would need over 110.
  INFO("leaves " << shape.pages_per_level.at(0));
  CHECK(shape.pages_per_level.at(0) <= 6000 / 85);
}

TEST_CASE("btree: every partial flush of a split cascade reads correctly and is repaired",
          "[exhaustive][btree][index][crash]") {
  const uint32_t ps = 4096;
  std::mt19937_64 rng(3);
  // Long random keys: about four per leaf, so there are enough leaves for several internal
  // nodes below the root.
  std::vector<std::string> keys;
  // (Separators of random keys take a few bytes, so a level-1 node holds hundreds of them: it
  // takes thousands of leaves to split one under a level-2 root.)
  for (int i = 0; i < 12000; ++i) {
    std::string k = RandomKey(rng, 8);
    k.resize(700, 'k');
    keys.push_back(std::move(k));
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::shuffle(keys.begin(), keys.end(), rng);

  // Pass 1: which inserts split a level-1 node that is not the root (under a level-2 root)?
  std::vector<size_t> cascades;
  {
    TreeFile f(ps);
    auto root_children = [&]() -> std::pair<int, size_t> {
      cache::PageRef r = VALUE_OR_FAIL(f.cache().Fetch(f.root(), cache::LatchMode::kShared));
      BtreeNode n;
      REQUIRE_OK(page::DecodeBtreePage(r.data(), ps, f.root(), &n));
      return {n.level, n.leaf() ? 0 : n.entries.size() + 1};
    };
    for (size_t i = 0; i < keys.size(); ++i) {
      const auto before = root_children();
      REQUIRE_OK(f.tree().Insert(keys[i], i, 1));
      const auto after = root_children();
      if (before.first == 2 && after.first == 2 && after.second > before.second) {
        cascades.push_back(i);
      }
    }
  }
  REQUIRE(cascades.size() >= 2);
  std::map<int, int> link_only_seen;  // level -> states that had such pages
  int states = 0;
  for (size_t which : {cascades.front(), cascades.back()}) {
    CAPTURE(which);
    TreeFile f(ps);
    Model before;
    for (size_t i = 0; i < which; ++i) {
      REQUIRE_OK(f.tree().Insert(keys[i], i, 1));
      before[keys[i]] = i;
    }
    const TreeFile::Image image = f.Snapshot();
    Model after = before;
    after[keys[which]] = which;
    // The pages the insert changes: its path before and after, and the new pages.
    std::set<PageNo> changed;
    for (PageNo p : PathTo(f, keys[which])) changed.insert(p);
    const std::vector<PageNo> old_pages = CheckTree(f.tree()).pages;
    REQUIRE_OK(f.tree().Insert(keys[which], which, 1));
    for (PageNo p : PathTo(f, keys[which])) changed.insert(p);
    for (PageNo p : CheckTree(f.tree()).pages) {
      if (std::find(old_pages.begin(), old_pages.end(), p) == old_pages.end()) changed.insert(p);
    }
    changed.insert(1);              // the PIP alone
    changed.insert(page::kNoPage);  // and: nothing written at all
    REQUIRE(changed.size() >= 7);   // root, two internal nodes, two leaves, PIP, nothing
    for (PageNo x : changed) {
      CAPTURE(x);
      ++states;
      f.Restore(image);
      REQUIRE_OK(f.tree().Insert(keys[which], which, 1));
      if (x != page::kNoPage) {
        const PageNo one[] = {x};
        REQUIRE_OK(f.cache().FlushPages(one));
      }
      f.Crash();
      const Shape shape = ShapeOf(f);
      for (const auto& [lv, n] : shape.link_only_per_level) link_only_seen[lv] += n > 0 ? 1 : 0;
      const Entries got = VALUE_OR_FAIL(Scan(f.tree(), false));
      const bool inserted = got.size() == after.size();
      const Model& want = inserted ? after : before;
      RequireTree(f.tree(), want);
      // Writers that meet a missing separator post it. Inserting just past each fence makes
      // every link-only page's left sibling send a writer right.
      Model model = want;
      for (const PageNo p : CheckTree(f.tree()).pages) {
        cache::PageRef r = VALUE_OR_FAIL(f.cache().Fetch(p, cache::LatchMode::kShared));
        BtreeNode n;
        REQUIRE_OK(page::DecodeBtreePage(r.data(), ps, p, &n));
        r.Release();
        if (!n.fence) continue;
        const std::string k = *n.fence + "\x01";
        if (model.contains(k)) continue;
        REQUIRE_OK(f.tree().Insert(k, 1, 1));
        model[k] = 1;
      }
      CHECK(LinkOnly(ShapeOf(f)) == 0);
      RequireTree(f.tree(), model);
    }
  }
  INFO("states " << states);
  // The B-link states did occur, at the leaf level and one level up.
  CHECK(link_only_seen[0] > 0);
  CHECK(link_only_seen[1] > 0);
}

// Leaves built by hand: a parent P that knows N and O, and N's right sibling R that P does not
// know (a crash after writing N and R). R is full, so the first insert into its range splits it
// and posts the new separator into P, which still lacks R itself; the repair then adds R.
TEST_CASE("btree: a right page the parent lacks is read, split and linked",
          "[btree][index][crash]") {
  TreeFile f;
  const uint32_t ps = f.page_size();
  Model model;
  // Allocate N, R, O; the root becomes P.
  auto alloc = [&]() {
    cache::PageRef r = VALUE_OR_FAIL(f.space().Allocate(1));
    page::InitPage(r.data(), ps, page::PageType::kBtree, r.page_no());
    return r;
  };
  cache::PageRef n_ref = alloc(), r_ref = alloc(), o_ref = alloc();
  const PageNo n = n_ref.page_no(), r = r_ref.page_no(), o = o_ref.page_no();
  auto leaf = [&](const std::string& from, const std::string& to, PageNo left, PageNo right,
                  std::optional<std::string> fence, size_t fill) {
    BtreeNode node;
    node.relation_id = kRelation;
    node.index_id = kIndex;
    node.left_sibling = left;
    node.right_sibling = right;
    node.fence = std::move(fence);
    // Keys from + 3 digits, until the page is `fill` bytes full.
    for (int i = 0; i < 1000; ++i) {
      BtreeNode bigger = node;
      const std::string k = absl::StrCat(from, 100 + i, std::string(20, 'x'));
      REQUIRE(k < to);
      bigger.entries.push_back({k, static_cast<uint64_t>(model.size() + 1)});
      if (page::BtreeEncodedSize(bigger) > fill) break;
      model[k] = model.size() + 1;
      node = std::move(bigger);
    }
    return node;
  };
  REQUIRE(page::EncodeBtreePage(leaf("c", "g", page::kNoPage, r, "g", ps / 2), n_ref.data(), ps));
  REQUIRE(page::EncodeBtreePage(leaf("h", "m", n, o, "m", ps - 8), r_ref.data(), ps));
  REQUIRE(page::EncodeBtreePage(leaf("p", "zz", n, page::kNoPage, std::nullopt, ps / 2),
                                o_ref.data(), ps));
  for (cache::PageRef* p : {&n_ref, &r_ref, &o_ref}) {
    p->Mark(0);
    p->Release();
  }
  {
    cache::PageRef root = VALUE_OR_FAIL(f.cache().Fetch(f.root(), cache::LatchMode::kExclusive));
    BtreeNode top;
    top.relation_id = kRelation;
    top.index_id = kIndex;
    top.level = 1;
    top.low_page = n;
    top.entries = {{"m", o}};
    REQUIRE(page::EncodeBtreePage(top, root.data(), ps));
    root.Mark(0);
  }
  REQUIRE_OK(f.cache().FlushAll());
  f.Crash();
  {
    const Shape s = ShapeOf(f);
    REQUIRE(s.link_only_per_level == std::map<int, int>{{0, 1}});
  }
  // Readers find R's keys through N's fence, both ways; Check accepts the state.
  RequireTree(f.tree(), model);
  {
    BTree::Cursor c = VALUE_OR_FAIL(f.tree().Seek("h"));  // P sends "h" to N; N's fence to R
    REQUIRE(c.Valid());
    CHECK(c.key().substr(0, 4) == "h100");
    BTree::Cursor d = VALUE_OR_FAIL(f.tree().Seek("o", true));  // the last key of R
    REQUIRE(d.Valid());
    CHECK(d.key() == std::prev(model.lower_bound("m"))->first);
  }
  // The first insert into R's range does not fit: R splits under a parent that lacks R.
  const std::string big = "k" + std::string(40, 'y');
  REQUIRE_OK(f.tree().Insert(big, 999, 1));
  model[big] = 999;
  RequireTree(f.tree(), model);
  {
    cache::PageRef root = VALUE_OR_FAIL(f.cache().Fetch(f.root(), cache::LatchMode::kShared));
    BtreeNode top;
    REQUIRE_OK(page::DecodeBtreePage(root.data(), ps, f.root(), &top));
    // P now names N (low), R (at "g", the repair), the page split off R, and O (at "m").
    REQUIRE(top.entries.size() == 3);
    CHECK(top.entries[0].key == "g");
    CHECK(top.entries[0].value == r);
    CHECK(top.entries[2].key == "m");
  }
  CHECK(LinkOnly(ShapeOf(f)) == 0);
  // And it all survives a flush and a reopen.
  REQUIRE_OK(f.cache().FlushAll());
  f.Crash();
  RequireTree(f.tree(), model);
}

// ---------------------------------------------------------------- corrupt pages

TEST_CASE("btree: corrupt pages are DataLoss naming the page, never a crash", "[btree][index]") {
  TreeFile f;
  Model model;
  for (int i = 0; i < 3000; ++i) {
    const std::string k = Entry(i, i);
    REQUIRE_OK(f.tree().Insert(k, i, 1));
    model[k] = i;
  }
  RequireTree(f.tree(), model);
  // A leaf in the middle, and the one to its right.
  BTree::Cursor c = VALUE_OR_FAIL(f.tree().Seek(Entry(1500, 1500)));
  REQUIRE(c.Valid());
  PageNo mid = page::kNoPage;
  for (PageNo p : CheckTree(f.tree()).pages) {
    cache::PageRef r = VALUE_OR_FAIL(f.cache().Fetch(p, cache::LatchMode::kShared));
    BtreeNode n;
    REQUIRE_OK(page::DecodeBtreePage(r.data(), f.page_size(), p, &n));
    if (n.leaf() && !n.entries.empty() && n.entries.front().key <= Entry(1500, 1500) && n.fence &&
        *n.fence > Entry(1500, 1500)) {
      mid = p;
    }
  }
  REQUIRE(mid != page::kNoPage);
  const std::string name = absl::StrCat("page ", mid);
  auto require_data_loss = [&](const absl::Status& s) {
    INFO(s.ToString());
    REQUIRE(absl::IsDataLoss(s));
    REQUIRE(std::string(s.message()).find(name) != std::string::npos);
  };
  auto require_check_reports = [&]() {
    std::vector<std::string> errors;
    std::vector<PageNo> pages;
    const absl::Status s = f.tree().Check(&errors, nullptr, &pages);
    if (s.ok()) {
      INFO(absl::StrJoin(errors, "\n"));
      REQUIRE(std::any_of(errors.begin(), errors.end(),
                          [&](const std::string& e) { return e.find(name) != std::string::npos; }));
    } else {
      require_data_loss(s);
    }
  };

  SECTION("bad checksum") {
    f.SmashBytes(mid, 100, "garbage");
    require_data_loss(f.tree().Seek(Entry(1500, 1500)).status());
    require_data_loss(f.tree().Insert(Entry(1500, 7), 1, 1));
    require_data_loss(Scan(f.tree(), false).status());
    require_data_loss(Scan(f.tree(), true).status());
    require_check_reports();
  }
  SECTION("fence length past the page") {
    {
      cache::PageRef r = VALUE_OR_FAIL(f.cache().Fetch(mid, cache::LatchMode::kExclusive));
      util::Put16(r.data() + f.page_size() - 2, 0xFFFF);
      r.Mark(0);
    }
    REQUIRE_OK(f.cache().FlushAll());
    f.Crash();
    require_data_loss(f.tree().Seek(Entry(1500, 1500)).status());
    require_data_loss(f.tree().Remove(Entry(1500, 1500), 1));
    require_check_reports();
  }
  SECTION("a right-sibling chain that loops back") {
    // mid's right sibling points back to mid's left part: fences stop increasing.
    PageNo right = page::kNoPage;
    f.RewriteNode(mid, [&](BtreeNode& n) { right = n.right_sibling; });
    f.RewriteNode(right, [&](BtreeNode& n) {
      n.right_sibling = mid;
      n.fence = Entry(1600, 0);
      while (!n.entries.empty() && n.entries.back().key >= *n.fence) n.entries.pop_back();
    });
    // A descent past mid's fence moves right into `right`, whose chain leads back to mid.
    REQUIRE(f.tree().Seek(Entry(2999, 2999)).ok());  // the parent sends it elsewhere
    require_check_reports();
    const absl::Status s = Scan(f.tree(), false).status();
    INFO(s.ToString());
    CHECK(absl::IsDataLoss(s));
  }
  SECTION("a page of another tree") {
    f.RewriteNode(mid, [](BtreeNode& n) { n.index_id = kIndex + 1; });
    require_check_reports();
  }
  SECTION("a level mismatch") {
    f.RewriteNode(mid, [](BtreeNode& n) {
      n.level = 1;
      n.low_page = 5;
      for (auto& e : n.entries) e.value = 5;
    });
    require_data_loss(f.tree().Seek(Entry(1500, 1500)).status());
    require_check_reports();
  }
}

// ---------------------------------------------------------------- concurrency

// Writers insert disjoint keys (so every leaf, internal and root split happens under readers)
// while readers look up keys known to be present and scan both ways, checking order and that
// nothing present before the scan began is missed. Meant to run under TSan too.
TEST_CASE("btree: concurrent inserts, removes, lookups and scans", "[btree][index][concurrency]") {
  TreeFile f(4096, 1024);
  BTree& t = f.tree();
  constexpr int kWriters = 3, kReaders = 3, kPerWriter = 4000;
  // Preloaded keys (never removed): every scan must see all of them.
  std::vector<std::string> stable;
  for (int i = 0; i < 500; ++i) {
    stable.push_back(absl::StrCat("s", 10000 + i * 7));
    REQUIRE_OK(t.Insert(stable.back(), i, 1));
  }
  std::atomic<bool> writers_done{false};
  std::mutex mu;
  std::vector<std::string> problems;
  auto problem = [&](std::string p) {
    std::lock_guard<std::mutex> g(mu);
    if (problems.size() < 20) problems.push_back(std::move(p));
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(100 + w);
      for (int i = 0; i < kPerWriter; ++i) {
        const std::string k = absl::StrCat("w", w, "-", rng() % 1000000, "-", i);
        if (absl::Status s = t.Insert(k, i, 2 + w); !s.ok()) problem("insert " + s.ToString());
        if (i % 5 == 0) {
          if (absl::Status s = t.Remove(k, 2 + w); !s.ok()) problem("remove " + s.ToString());
        }
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(200 + r);
      int rounds = 0;
      while (!writers_done.load() || rounds < 3) {
        ++rounds;
        const std::string& k = stable[rng() % stable.size()];
        absl::StatusOr<BTree::Cursor> c = t.Seek(k, r % 2 == 1);
        if (!c.ok() || !c->Valid() || c->key() != k) {
          problem("lookup of " + k + " failed");
        }
        absl::StatusOr<Entries> all = Scan(t, r % 2 == 1);
        if (!all.ok()) {
          problem("scan " + all.status().ToString());
          continue;
        }
        size_t found = 0;
        for (size_t i = 0; i < all->size(); ++i) {
          if (i > 0 && (r % 2 == 1 ? !((*all)[i].first < (*all)[i - 1].first)
                                   : !((*all)[i - 1].first < (*all)[i].first))) {
            problem("scan out of order at " + (*all)[i].first);
            break;
          }
          if ((*all)[i].first[0] == 's') ++found;
        }
        if (found != stable.size()) problem(absl::StrCat("scan saw ", found, " stable keys"));
      }
    });
  }
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  writers_done.store(true);
  for (size_t i = kWriters; i < threads.size(); ++i) threads[i].join();
  INFO(absl::StrJoin(problems, "\n"));
  REQUIRE(problems.empty());
  CheckResult c = CheckTree(t);
  INFO(absl::StrJoin(c.errors, "\n"));
  REQUIRE(c.errors.empty());
  CHECK(c.visited.size() == stable.size() + kWriters * (kPerWriter - kPerWriter / 5));
  CHECK(ShapeOf(f).root_level >= 1);
}

// --- bulk (bottom-up) build (btree_build.h)

// Builds the tree of `f` from `model` cut into `ranges` ranges at random points (some empty),
// filled in an interleaved order as parallel workers would.
BulkBuildStats BulkLoad(TreeFile& f, const Model& model, int ranges, int fill, uint64_t seed) {
  const Entries all(model.begin(), model.end());
  std::mt19937_64 rng(seed);
  std::vector<size_t> cuts{0};
  for (int r = 1; r < ranges; ++r) cuts.push_back(all.empty() ? 0 : rng() % (all.size() + 1));
  cuts.push_back(all.size());
  std::sort(cuts.begin(), cuts.end());
  BulkBuild b(&f.cache(), &f.space(), kRelation, kIndex, 1, f.root(), ranges, fill);
  std::vector<size_t> at(cuts.begin(), cuts.end() - 1);
  for (bool more = true; more;) {
    more = false;
    for (int r = 0; r < ranges; ++r) {
      for (size_t n = rng() % 50; n > 0 && at[r] < cuts[r + 1]; --n, ++at[r]) {
        REQUIRE_OK(b.Add(r, all[at[r]].first, all[at[r]].second));
      }
      more = more || at[r] < cuts[r + 1];
    }
  }
  REQUIRE_OK(b.Complete());
  return b.stats();
}

TEST_CASE("btree bulk build: any number of entries and ranges gives exactly the tree",
          "[exhaustive][btree][bulk]") {
  struct Case {
    uint32_t ps;
    size_t n;
    int ranges;
  };
  const Case cs = GENERATE(Case{4096, 0, 3}, Case{4096, 1, 1}, Case{8192, 2, 8}, Case{4096, 50, 3},
                           Case{8192, 3000, 1}, Case{4096, 3000, 8}, Case{4096, 12000, 3},
                           Case{8192, 12000, 8});
  const uint32_t ps = cs.ps;
  const size_t n = cs.n;
  const int ranges = cs.ranges;
  INFO("page size " << ps << ", " << n << " entries, " << ranges << " ranges");
  TreeFile f(ps, 4096);
  std::mt19937_64 rng(n * 31 + ranges);
  Model model;
  while (model.size() < n) {
    // Mostly short keys with shared prefixes, some long ones up to the page's limit.
    std::string k = rng() % 50 == 0
                        ? RandomKey(rng, MaxKeySize(ps))
                        : "k" + std::to_string(rng() % (n * 10 + 10)) + RandomKey(rng, 6);
    if (k.size() > MaxKeySize(ps)) k.resize(MaxKeySize(ps));
    model[k] = rng() >> (rng() % 64);
  }
  const BulkBuildStats st = BulkLoad(f, model, ranges, 90, n + 7);
  CHECK(st.entries == n);
  RequireTree(f.tree(), model);
  CheckResult c = CheckTree(f.tree());
  CHECK(c.pages.size() == std::max<uint64_t>(1, st.leaf_pages + st.internal_pages));
  // The tree takes inserts and removes afterwards like any other, splitting its full leaves.
  for (int i = 0; i < 2000; ++i) {
    std::string k = "z" + RandomKey(rng, 20);
    if (model.emplace(k, i).second) REQUIRE_OK(f.tree().Insert(k, i, 1));
  }
  for (int i = 0; i < 300 && !model.empty(); ++i) {
    auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
    REQUIRE_OK(f.tree().Remove(it->first, 1));
    model.erase(it);
  }
  RequireTree(f.tree(), model);
  // And it survives the cache: written, dropped, read back.
  REQUIRE_OK(f.cache().FlushAll());
  f.Crash();
  RequireTree(f.tree(), model);
}

TEST_CASE("btree bulk build: pages are filled to the fill factor", "[btree][bulk]") {
  TreeFile f(4096, 4096);
  Model model;
  for (int i = 0; i < 15000; ++i) model[absl::StrCat("word", i * 7919 % 100003)] = i;
  const int fill = GENERATE(60, 100);
  INFO("fill " << fill);
  const BulkBuildStats st = BulkLoad(f, model, 1, fill, 1);  // one last leaf
  RequireTree(f.tree(), model);
  size_t bytes = 0;  // entry bytes of every leaf
  for (PageNo p : CheckTree(f.tree()).pages) {
    cache::PageRef r = VALUE_OR_FAIL(f.cache().Fetch(p, cache::LatchMode::kShared));
    page::BtreeHeader h;
    REQUIRE_OK(page::ReadBtreeHeader(r.data(), 4096, p, &h));
    if (h.leaf()) bytes += h.data_end + 2u * h.restart_count;
  }
  const double avg = static_cast<double>(bytes) / static_cast<double>(st.leaf_pages) / 4096.0;
  INFO("average leaf fill " << avg << " over " << st.leaf_pages << " leaves");
  CHECK(avg <= fill / 100.0 + 0.01);
  CHECK(avg >= fill / 100.0 - 0.05);
  CHECK(st.depth >= 2);
}

TEST_CASE("btree bulk build: Abandon gives back every page the build took", "[btree][bulk]") {
  TreeFile f(4096, 2048);
  const uint32_t before = f.space().page_count();
  Model model;
  for (int i = 0; i < 20000; ++i) model[absl::StrCat("key", i * 13 % 20011)] = i;
  const bool completed = GENERATE(false, true);
  {
    BulkBuild b(&f.cache(), &f.space(), kRelation, kIndex, 1, f.root(), 3, 90);
    int r = 0;
    size_t i = 0;
    for (const auto& [k, v] : model) {
      if (i++ == model.size() / 3 * static_cast<size_t>(r + 1) && r < 2) ++r;
      REQUIRE_OK(b.Add(r, k, v));
    }
    if (completed) REQUIRE_OK(b.Complete());
    b.Abandon();
  }
  // Every page past the root is free again.
  for (PageNo p = f.root() + 1; p < f.space().page_count(); ++p) {
    if (page::PipPageNo(p / page::PagesPerPip(4096), 4096) == p) continue;
    INFO("page " << p << " of " << f.space().page_count() << " (" << before << " before)");
    REQUIRE(VALUE_OR_FAIL(f.space().IsFree(p)));
  }
}

}  // namespace
}  // namespace ember::index
