// Crash tests of BLOB writing (architecture.md "BLOBs and temp space" and "Durability"): a crash
// in the middle of writing a BLOB must leave no partial BLOB visible after reopening, and
// Validate() must be clean.
//  1. SIGKILL: a forked child builds BLOBs of several MB - through a BlobWriter with random
//     segment sizes, through Append, and with Concat of temporary and stored BLOBs, so temporary
//     BLOBs live in database pages and in TempSpace (spilled to files: the temp cache is tiny)
//     under blob_temp_space 0, 1 and 2 - assigns them to rows (insert, or update to a longer
//     BLOB) and commits. Before each Commit it logs the transaction's rows (id, BLOB length,
//     checksum), after it "committed". The parent kills it at random moments, many times over
//     one database file.
//  2. Power loss, in process: io::FaultFile::DropUnsynced (and ReorderFile, which keeps a random
//     subset of the unsynced page writes) at a random call in the middle of building and storing
//     a BLOB, or inside the commit's flush (a failed sync or a write that cuts the power).
//  3. A crash after a BLOB was stored by a transaction that then died, with the BLOB's header
//     record certainly on disk: over repeated crashes its pages must be reused, not kept.
// After every crash the database is reopened and must show: Validate() clean (unreachable pages,
// which a crash may leave, are allowed: they are freed on request and the database validated
// again, as crash_test.cc does); exactly the committed rows, each BLOB reading back with its
// logged length and checksum (the transaction in flight at the crash all there, with complete
// BLOBs, or not at all); no spill file left in the temp directory; and a file whose growth over
// all the crashes stays within a bound of the committed BLOB bytes (free pages are reused).
//
// Environment (shared with crash_test.cc): EMBER_CRASH_SEED, EMBER_CRASH_DIR, EMBER_CRASH_KEEP
// and EMBER_CRASH_VERBOSE as crash_util.h describes them; EMBER_CRASH_PAGE_SIZE (SIGKILL test,
// default 4096: see crash_test.cc on torn pages). Of this file: EMBER_BLOB_CRASH_KILLS (SIGKILL
// rounds, default 24), EMBER_BLOB_CRASH_MAX_DELAY_MS (longest kill delay, default 150),
// EMBER_BLOB_CRASH_POWER_RUNS (seeds per power-loss test, default 30, two crashes each) and
// EMBER_BLOB_CRASH_POWER_FIRST (the index of the first of those runs, default 0: a failure's `i`
// replays it).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "engine/page/blob_page.h"
#include "tests/support/blob_util.h"
#include "tests/support/child_process.h"
#include "tests/support/crash_util.h"
#include "tests/support/fault_file.h"
#include "tests/support/side_log.h"

namespace ember::blobcrash {
namespace {

using testing::AnnounceSeed;
using testing::AppendDurablyOrDie;
using testing::BaseSeed;
using testing::ChildArgs;
using testing::ChildLink;
using testing::DrawPageSizeAndPath;
using testing::EncodeCommitted;
using testing::EncodePending;
using testing::EnvU64;
using testing::ExpectedStates;
using testing::ForkAndKill;
using testing::Join;
using testing::kCrashPageSizes;
using testing::LossModel;
using testing::OkOrDie;
using testing::OpenPowerLossDb;
using testing::Pattern;
using testing::PowerLossDb;
using testing::Report;
using testing::RequireModel;
using testing::RequireSideLog;
using testing::RequireValidAfterCrash;
using testing::RequireWritePath;
using testing::RunChildLoop;
using testing::ScopedNoEmberTmp;
using testing::ScratchDir;
using testing::SideLog;
using testing::ValueOr;
using testing::Verbosity;

constexpr uint64_t kFixedSeed = 0xB10B'C4A5ull;

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

// ---------------------------------------------------------------- BLOB contents

// A 64-bit checksum of a byte stream that does not depend on how the stream is cut into pieces:
// a BLOB made of a stored BLOB's bytes plus new ones is checked without keeping either in memory.
class Checksum {
 public:
  void Add(std::string_view s) {
    const char* p = s.data();
    size_t n = s.size();
    len_ += n;
    if (fill_ > 0) {
      const size_t k = std::min(n, 8 - fill_);
      std::memcpy(buf_ + fill_, p, k);
      fill_ += k;
      p += k;
      n -= k;
      if (fill_ < 8) return;
      Word(Load(buf_));
      fill_ = 0;
    }
    for (; n >= 8; p += 8, n -= 8) Word(Load(p));
    std::memcpy(buf_, p, n);
    fill_ = n;
  }
  uint64_t value() const {
    uint64_t tail = 0;
    std::memcpy(&tail, buf_, fill_);
    return testing::Mix64(testing::Mix64(h_ ^ testing::Mix64(tail + fill_)) ^ len_);
  }
  uint64_t length() const { return len_; }

 private:
  static uint64_t Load(const char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  // Position-dependent through the chain: a page of the BLOB moved or repeated changes the sum.
  void Word(uint64_t w) {
    h_ = std::rotl(h_ ^ (w * 0x9E3779B97F4A7C15ull), 29) * 0xC2B2AE3D27D4EB4Full +
         0x165667B19E3779F9ull;
  }
  uint64_t h_ = 0x6A09E667F3BCC908ull;
  uint64_t len_ = 0;
  char buf_[8] = {};
  size_t fill_ = 0;
};

uint64_t SumOf(std::string_view s) {
  Checksum c;
  c.Add(s);
  return c.value();
}

// ---------------------------------------------------------------- the table

// blob_rows(id INT64 NOT NULL, len INT64 NOT NULL, sum INT64 NOT NULL, body BLOB), unique index
// on id. `len` and `sum` describe `body`, so every visible row can be checked on its own as well
// as against the log: a partial BLOB shows up even in a row the log cannot vouch for.
TableSchema RowsSchema() {
  return TableSchema{
      "blob_rows",
      {Column{"id", ColumnType::kInt64, false}, Column{"len", ColumnType::kInt64, false},
       Column{"sum", ColumnType::kInt64, false}, Column{"body", ColumnType::kBlob, true}}};
}

struct Handles {
  Table table;
  Index by_id;
};

absl::StatusOr<Handles> CreateSchema(Database* db) {
  absl::StatusOr<Table> t = db->CreateTable(RowsSchema());
  if (!t.ok()) return t.status();
  absl::StatusOr<Index> ix =
      db->CreateIndex(IndexSchema{"blob_rows_by_id", "blob_rows", {"id"}, true});
  if (!ix.ok()) return ix.status();
  return Handles{*t, *ix};
}

absl::StatusOr<Handles> GetHandles(Database* db) {
  absl::StatusOr<Table> t = db->GetTable("blob_rows");
  absl::StatusOr<Index> ix = db->GetIndex("blob_rows_by_id");
  if (!t.ok()) return t.status();
  if (!ix.ok()) return ix.status();
  return Handles{*t, *ix};
}

// ---------------------------------------------------------------- the model

struct RowState {
  uint64_t rec = 0;
  uint64_t len = 0;
  uint64_t sum = 0;
  friend bool operator==(const RowState&, const RowState&) = default;
};
using Model = std::map<int64_t, RowState>;

std::string DescribeRow(const RowState& r) {
  return absl::StrCat("{rec ", r.rec, " len ", r.len, " sum ", r.sum, "}");
}

// One row change of a transaction: 'I' insert, 'U' update (a new BLOB), 'D' delete.
struct Op {
  char kind = 'I';
  int64_t id = 0;
  RowState row;

  // In the side log: "I|U id rec len sum" or "D id rec 0 0".
  void Encode(std::string* out) const {
    const bool del = kind == 'D';
    absl::StrAppend(out, " ", std::string(1, kind), " ", id, " ", row.rec, " ", del ? 0 : row.len,
                    " ", del ? 0 : row.sum);
  }
  void Decode(std::istream& in) {
    std::string k;
    in >> k >> id >> row.rec >> row.len >> row.sum;
    kind = k.empty() ? '?' : k[0];
  }
};

using Effect = testing::TxnEffect<Op>;

void ApplyEffect(const Effect& e, Model* m) {
  for (const Op& op : e.ops) {
    if (op.kind == 'D') m->erase(op.id);
    else (*m)[op.id] = op.row;
  }
}

// BLOB bytes a transaction stored (every insert and update holds a new BLOB).
uint64_t StoredBytes(const Effect& e) {
  uint64_t n = 0;
  for (const Op& op : e.ops) n += op.kind == 'D' ? 0 : op.row.len;
  return n;
}

// Database pages a stored BLOB of `len` bytes takes (data pages, and list pages at level 2).
uint64_t BlobPages(uint64_t len, uint32_t page_size) {
  if (len <= page_size / 4) return 0;
  const uint64_t cap = page::BlobPageCapacity(page_size);
  const uint64_t data = (len + cap - 1) / cap;
  if (data <= page_size / 8) return data;
  const uint64_t per_list = page::BlobListCapacity(page_size);
  return data + (data + per_list - 1) / per_list;
}

uint64_t LiveBytes(const Model& m) {
  uint64_t n = 0;
  for (const auto& [id, r] : m) n += r.len;
  return n;
}

// ---------------------------------------------------------------- the workload

// Sizes of the BLOBs; the in-process tests use smaller ones to fit more crashes into the time.
struct Shape {
  int max_ops = 2;                     // row changes per transaction: 1..max_ops
  uint64_t max_len = 6 << 20;          // longest new BLOB
  uint64_t live_budget = 40ull << 20;  // above this many live BLOB bytes, rows get deleted
  uint32_t page_size = 4096;
};

// The largest level-1 BLOB: level 2 starts past it.
uint64_t Level1Max(uint32_t page_size) {
  return uint64_t{page_size / 8} * page::BlobPageCapacity(page_size);
}

// The longest BLOB RandomLen makes: max_len, or past 4096-byte pages the level-1 edge, which is
// larger then (about 8 MB at 8192, 32 MB at 16384).
uint64_t LongestLen(const Shape& s) { return std::max(s.max_len, Level1Max(s.page_size) + 1); }

uint64_t RandomLen(std::mt19937_64& rng, const Shape& s) {
  const uint64_t cap = page::BlobPageCapacity(s.page_size);
  const uint64_t level1_max = Level1Max(s.page_size);
  const uint32_t r = rng() % 100;
  // Mostly several MB (level 2 at 4096-byte pages), then level 1, inline (0 too), and the edges
  // between the levels.
  if (r < 65) return s.max_len / 6 + rng() % (s.max_len - s.max_len / 6 + 1);
  if (r < 80) return s.page_size / 4 + 1 + rng() % level1_max;
  if (r < 90) return rng() % (s.page_size / 4 + 1);
  const uint64_t edges[] = {0,       s.page_size / 4, s.page_size / 4 + 1, cap,
                            cap + 1, level1_max,      level1_max + 1};
  return edges[rng() % std::size(edges)];
}

// Segment sizes for the writer and for Append: mostly up to a page or two, some far larger,
// a few of a byte or so, and odd sizes around page capacities.
size_t SegmentSize(std::mt19937_64& rng) {
  const uint32_t r = rng() % 20;
  if (r == 0) return 1 + rng() % 8;
  if (r < 3) return 4060 + rng() % 40;
  if (r < 12) return 1 + rng() % 65536;
  if (r < 18) return 65536 + rng() % (448 << 10);
  return (512 << 10) + rng() % (1536 << 10);
}

// Where the workload is; the hook sees every step before it runs.
enum class Step { kBlobCall, kRowWrite, kCommit };

// Returns false to stop the workload right there (the crash point). May be empty.
using Hook = std::function<bool(Step)>;

absl::Status Stopped() { return absl::CancelledError("stopped at the crash point"); }
bool IsStopped(const absl::Status& s) {
  return absl::IsCancelled(s) && s.message() == "stopped at the crash point";
}

bool Go(const Hook& hook, Step step) { return !hook || hook(step); }

// A new temporary BLOB holding `data`, written through a BlobWriter in random segments.
absl::StatusOr<BlobId> BuildWithWriter(Transaction* t, std::string_view data, std::mt19937_64& rng,
                                       const Hook& hook) {
  if (!Go(hook, Step::kBlobCall)) return Stopped();
  absl::StatusOr<std::unique_ptr<BlobWriter>> w = t->CreateBlob();
  if (!w.ok()) return w.status();
  for (size_t off = 0; off < data.size();) {
    const size_t n = std::min(SegmentSize(rng), data.size() - off);
    if (!Go(hook, Step::kBlobCall)) return Stopped();
    if (absl::Status s = (*w)->Write(data.substr(off, n)); !s.ok()) return s;
    off += n;
  }
  return (*w)->id();
}

// A new temporary BLOB made by the engine (TempSpace under modes 1 and 2), piece by piece.
absl::StatusOr<BlobId> BuildWithAppend(Transaction* t, std::string_view data, std::mt19937_64& rng,
                                       const Hook& hook) {
  BlobId b{};
  size_t off = 0;
  do {  // at least once: Append to BlobId{} makes the BLOB even when `data` is empty
    const size_t n = std::min(SegmentSize(rng), data.size() - off);
    if (!Go(hook, Step::kBlobCall)) return Stopped();
    if (absl::Status s = t->Append(&b, data.substr(off, n)); !s.ok()) return s;
    off += n;
  } while (off < data.size());
  return b;
}

// Writer-made left part ++ engine-made right part, then the tail appended in place or concatenated
// into yet another BLOB; the parts are released or left for the transaction's end.
absl::StatusOr<BlobId> BuildWithConcat(Transaction* t, std::string_view data, std::mt19937_64& rng,
                                       const Hook& hook) {
  const size_t a = data.empty() ? 0 : rng() % (data.size() + 1);
  const size_t b = a + (data.size() == a ? 0 : rng() % (data.size() - a + 1));
  absl::StatusOr<BlobId> left = BuildWithWriter(t, data.substr(0, a), rng, hook);
  if (!left.ok()) return left;
  absl::StatusOr<BlobId> right = BuildWithAppend(t, data.substr(a, b - a), rng, hook);
  if (!right.ok()) return right;
  if (!Go(hook, Step::kBlobCall)) return Stopped();
  absl::StatusOr<BlobId> whole = t->Concat(*left, *right);
  if (!whole.ok()) return whole;
  for (BlobId part : {*left, *right}) {
    if (rng() % 2 == 0) continue;
    if (!Go(hook, Step::kBlobCall)) return Stopped();
    if (absl::Status s = t->ReleaseBlob(part); !s.ok()) return s;
  }
  if (!Go(hook, Step::kBlobCall)) return Stopped();
  if (rng() % 2 == 0) {
    BlobId w = *whole;
    if (absl::Status s = t->Append(&w, data.substr(b)); !s.ok()) return s;
    if (w.value != whole->value) return absl::InternalError("Append to a temporary BLOB moved it");
    return w;
  }
  return t->Concat(*whole, data.substr(b));
}

absl::StatusOr<BlobId> BuildBlob(Transaction* t, std::string_view data, std::mt19937_64& rng,
                                 const Hook& hook) {
  switch (rng() % 3) {
    case 0: return BuildWithWriter(t, data, rng, hook);
    case 1: return BuildWithAppend(t, data, rng, hook);
    default: return BuildWithConcat(t, data, rng, hook);
  }
}

// Reads all of BLOB `id` through a BlobReader in random segments into `sum`; DataLoss when its
// length is not `expect_len` or the reader misbehaves.
absl::Status ReadInto(Transaction* t, BlobId id, uint64_t expect_len, std::mt19937_64& rng,
                      Checksum* sum) {
  absl::StatusOr<std::unique_ptr<BlobReader>> r = t->OpenBlob(id);
  if (!r.ok()) return r.status();
  if ((*r)->size() != expect_len) {
    return absl::DataLossError(absl::StrCat("BLOB ", id.value, " has ", (*r)->size(),
                                            " bytes, its row says ", expect_len));
  }
  std::string buf;
  for (uint64_t pos = 0; pos < expect_len;) {
    buf.resize(std::min<uint64_t>(SegmentSize(rng), expect_len - pos));
    absl::StatusOr<size_t> k = (*r)->Read(buf.data(), buf.size());
    if (!k.ok()) return k.status();
    if (*k == 0) return absl::DataLossError(absl::StrCat("BLOB ", id.value, " ends at ", pos));
    sum->Add(std::string_view(buf.data(), *k));
    pos += *k;
  }
  char c;
  absl::StatusOr<size_t> k = (*r)->Read(&c, 1);
  if (!k.ok()) return k.status();
  if (*k != 0) return absl::DataLossError(absl::StrCat("BLOB ", id.value, " reads past its end"));
  return absl::OkStatus();
}

// One random transaction's row changes (not its Commit). `view` holds the committed state on
// entry and the transaction's view on return; `eff` what it did. Errors are the engine's, or
// Stopped() when the hook chose the crash point, or DataLoss when a stored BLOB read back in the
// middle of the work is not what its row says.
absl::Status RunBlobTxn(Transaction* t, const Handles& h, std::mt19937_64& rng, const Shape& shape,
                        int64_t tag, int64_t* next_id, Model* view, Effect* eff, const Hook& hook) {
  eff->tag = tag;
  eff->ops.clear();
  const int nops = 1 + static_cast<int>(rng() % shape.max_ops);
  for (int i = 0; i < nops; ++i) {
    const uint32_t r = rng() % 100;
    const bool full = LiveBytes(*view) > shape.live_budget;
    if (view->empty() || (!full && r < 60) || (full && r < 20)) {
      // A new row with a new BLOB (or now and then the empty BLOB id).
      const uint64_t len = RandomLen(rng, shape);
      const std::string data = Pattern(rng(), len);
      BlobId body{};
      if (len > 0 || rng() % 2 == 0) {
        absl::StatusOr<BlobId> b = BuildBlob(t, data, rng, hook);
        if (!b.ok()) return b.status();
        body = *b;
      }
      Op op{'I', (*next_id)++, RowState{0, len, SumOf(data)}};
      if (!Go(hook, Step::kRowWrite)) return Stopped();
      absl::StatusOr<RecordId> rec = t->Insert(
          h.table, Row{op.id, static_cast<int64_t>(len), static_cast<int64_t>(op.row.sum), body});
      if (!rec.ok()) return rec.status();
      op.row.rec = rec->value;
      (*view)[op.id] = op.row;
      eff->ops.push_back(op);
      continue;
    }
    auto it = std::next(view->begin(), static_cast<long>(rng() % view->size()));
    const int64_t id = it->first;
    const RowState old = it->second;
    if (full || r >= 85) {
      if (!Go(hook, Step::kRowWrite)) return Stopped();
      if (absl::Status s = t->Delete(h.table, RecordId{old.rec}); !s.ok()) return s;
      view->erase(it);
      eff->ops.push_back(Op{'D', id, old});
      continue;
    }
    // Update: a fresh BLOB, or (if not too long yet) the stored one extended: Append to a stored
    // BLOB, or Concat of it with bytes or with a temporary BLOB. The stored bytes are read back
    // here for the checksum, which also checks them.
    Checksum sum;
    BlobId body{};
    std::string extra;
    const bool extend = old.len < shape.max_len && rng() % 3 != 0;
    if (extend) {
      absl::StatusOr<std::optional<Row>> row = t->Get(h.table, RecordId{old.rec});
      if (!row.ok()) return row.status();
      if (!row->has_value() || (**row).size() != 4 || !std::holds_alternative<BlobId>((**row)[3])) {
        return absl::DataLossError(absl::StrCat("id ", id, ": row not found or malformed"));
      }
      const BlobId stored = std::get<BlobId>((**row)[3]);
      if (!Go(hook, Step::kBlobCall)) return Stopped();
      if (absl::Status s = ReadInto(t, stored, old.len, rng, &sum); !s.ok()) return s;
      if (sum.value() != old.sum) {
        return absl::DataLossError(absl::StrCat("id ", id, ": stored BLOB of ", old.len,
                                                " bytes read back with a wrong checksum"));
      }
      extra = Pattern(rng(), static_cast<size_t>(rng() % (shape.max_len / 3 + 1)));
      if (!Go(hook, Step::kBlobCall)) return Stopped();
      absl::StatusOr<BlobId> b;
      switch (rng() % 3) {
        case 0: {
          BlobId x = stored;
          absl::Status s = t->Append(&x, extra);
          b = s.ok() ? absl::StatusOr<BlobId>(x) : s;
          break;
        }
        case 1: b = t->Concat(stored, extra); break;
        default: {
          absl::StatusOr<BlobId> tail = BuildWithWriter(t, extra, rng, hook);
          if (!tail.ok()) return tail.status();
          if (!Go(hook, Step::kBlobCall)) return Stopped();
          b = t->Concat(stored, *tail);
        }
      }
      if (!b.ok()) return b.status();
      body = *b;
    } else {
      extra = Pattern(rng(), RandomLen(rng, shape));
      absl::StatusOr<BlobId> b = BuildBlob(t, extra, rng, hook);
      if (!b.ok()) return b.status();
      body = *b;
    }
    sum.Add(extra);
    const RowState nrow{old.rec, sum.length(), sum.value()};
    if (!Go(hook, Step::kRowWrite)) return Stopped();
    if (absl::Status s = t->Update(
            h.table, RecordId{old.rec},
            Row{id, static_cast<int64_t>(nrow.len), static_cast<int64_t>(nrow.sum), body});
        !s.ok()) {
      return s;
    }
    it->second = nrow;
    eff->ops.push_back(Op{'U', id, nrow});
  }
  // Now and then a temporary BLOB that no row takes: released, or left to vanish at the end.
  if (rng() % 4 == 0) {
    const std::string scratch = Pattern(rng(), rng() % (shape.max_len / 3 + 1));
    absl::StatusOr<BlobId> b = BuildBlob(t, scratch, rng, hook);
    if (!b.ok()) return b.status();
    if (rng() % 2 == 0) {
      if (!Go(hook, Step::kBlobCall)) return Stopped();
      if (absl::Status s = t->ReleaseBlob(*b); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- checking a reopened database

// Reads every row `t` (a read-only transaction) sees, and its BLOB, into `out`, and lists
// problems: a malformed row, a temporary BLOB id in a row, a BLOB whose length or checksum is not
// what its own row says (a partial BLOB), an id twice, the index disagreeing with the scan, an id
// of `absent_ids` that the index finds without the scan showing it. An error only when the
// engine failed a call.
absl::Status ReadState(Transaction& t, const Handles& h, const std::vector<int64_t>& absent_ids,
                       std::mt19937_64& rng, Model* out, std::vector<std::string>* problems) {
  out->clear();
  auto problem = [&](std::string s) {
    if (problems->size() < 40) problems->push_back(std::move(s));
  };
  {
    absl::StatusOr<std::unique_ptr<Cursor>> c = t.Scan(h.table);
    if (!c.ok()) return c.status();
    for (; (*c)->Valid();) {
      const Row row = (*c)->row();
      const uint64_t rec = (*c)->id().value;
      if (row.size() != 4 || !std::holds_alternative<int64_t>(row[0]) ||
          !std::holds_alternative<int64_t>(row[1]) || !std::holds_alternative<int64_t>(row[2]) ||
          !std::holds_alternative<BlobId>(row[3])) {
        problem(absl::StrCat("record ", rec, ": malformed row"));
      } else {
        const int64_t id = std::get<int64_t>(row[0]);
        const RowState st{rec, static_cast<uint64_t>(std::get<int64_t>(row[1])),
                          static_cast<uint64_t>(std::get<int64_t>(row[2]))};
        const BlobId body = std::get<BlobId>(row[3]);
        if (blob::IsTemp(body.value)) {
          problem(absl::StrCat("id ", id, ": the row holds temporary BLOB id ", body.value));
        } else {
          Checksum sum;
          absl::Status s = ReadInto(&t, body, st.len, rng, &sum);
          if (absl::IsDataLoss(s) || absl::IsOutOfRange(s) || absl::IsNotFound(s)) {
            problem(absl::StrCat("id ", id, " (record ", rec, "): ", s.ToString()));
          } else if (!s.ok()) {
            return s;
          } else if (sum.value() != st.sum) {
            problem(absl::StrCat("id ", id, " (record ", rec, "): BLOB of ", st.len,
                                 " bytes has checksum ", sum.value(), ", its row says ", st.sum));
          }
        }
        if (!out->emplace(id, st).second) {
          problem(absl::StrCat("id ", id, " visible twice (records ", (*out)[id].rec, " and ", rec,
                               ")"));
        }
      }
      if (absl::Status s = (*c)->Next(); !s.ok()) return s;
    }
  }
  // The unique index: a full scan in id order equals the table scan; lookups find each row,
  // and nothing for ids that must not be there.
  std::vector<std::pair<int64_t, uint64_t>> want;
  for (const auto& [id, st] : *out) want.emplace_back(id, st.rec);
  std::vector<std::pair<int64_t, uint64_t>> got;
  {
    absl::StatusOr<std::unique_ptr<Cursor>> c = t.IndexScan(h.by_id, {}, {});
    if (!c.ok()) return c.status();
    for (; (*c)->Valid();) {
      got.emplace_back(std::get<int64_t>((*c)->row()[0]), (*c)->id().value);
      if (absl::Status s = (*c)->Next(); !s.ok()) return s;
    }
  }
  if (got != want) {
    problem(absl::StrCat("index scan returned ", got.size(), " entries, table scan ", want.size(),
                         " rows (or different records)"));
  }
  for (const auto& [id, st] : *out) {
    absl::StatusOr<std::optional<std::pair<RecordId, Row>>> l = t.Lookup(h.by_id, Row{id});
    if (!l.ok()) return l.status();
    if (!l->has_value() || (*l)->first.value != st.rec) {
      problem(absl::StrCat("lookup of id ", id, " does not find record ", st.rec));
    }
  }
  for (int64_t id : absent_ids) {
    if (out->contains(id)) continue;
    absl::StatusOr<std::optional<std::pair<RecordId, Row>>> l = t.Lookup(h.by_id, Row{id});
    if (!l.ok()) return l.status();
    if (l->has_value()) {
      problem(absl::StrCat("lookup of id ", id, " finds record ", (*l)->first.value,
                           " that the table scan does not show"));
    }
  }
  return absl::OkStatus();
}

// See RequireModel (crash_util.h).
Model RequireState(Database* db, const Handles& h, const std::vector<int64_t>& absent,
                   std::mt19937_64& rng, const Model& want, const Model* alt, bool* matched_alt) {
  auto read = [&](Transaction& t, Model* got, std::vector<std::string>* problems) {
    return ReadState(t, h, absent, rng, got, problems);
  };
  return RequireModel(db, read, want, alt, matched_alt);
}

// What the temp directory must hold after a reopen: nothing (spill files are unlinked as soon as
// they are open, and Database::Open removes those of dead processes).
void RequireNoSpillFiles(const std::string& temp_dir) {
  const std::vector<std::string> left = FilesIn(temp_dir);
  INFO("left in the temp directory " << temp_dir << ":\n" << Join(left));
  REQUIRE(left.empty());
}

// The file may grow by at most three times the BLOB bytes ever committed (the pages of BLOBs
// replaced or deleted, and of crashed writes, must be reused rather than piled up), plus room
// for the largest transaction's temporary and stored BLOBs in pages at once.
void RequireBoundedGrowth(uint64_t growth, uint64_t committed_bytes, const Shape& shape) {
  const uint64_t one_txn = uint64_t(shape.max_ops + 1) * 3 * LongestLen(shape);
  const uint64_t bound = 3 * committed_bytes + one_txn;
  INFO("file growth " << growth << " bytes, committed BLOB bytes " << committed_bytes << ", bound "
                      << bound);
  REQUIRE(growth <= bound);
}

uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  const uint64_t n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

// ---------------------------------------------------------------- 1. SIGKILL

// Where the child is, in memory shared with the parent: tells where the kills landed.
struct Progress {
  std::atomic<uint32_t> step{0};         // 1 + Step; 0 before a transaction's first step
  std::atomic<uint64_t> temp_spills{0};  // spill blocks the child's temp space created
};

constexpr uint64_t kChildMaxTxns = 5000;

// The child: runs random BLOB transactions until killed, logging each one before its Commit and
// after. A stored BLOB that reads back wrong fails it like an engine error.
[[noreturn]] void RunChild(const ChildArgs& args, const ChildLink& link, const Shape& shape,
                           Model model, int64_t next_id, uint64_t seed, Progress* progress) {
  std::mt19937_64 rng(seed);
  const Hook track = [&](Step s) {
    progress->step.store(1 + static_cast<uint32_t>(s), std::memory_order_relaxed);
    return true;
  };
  int64_t tag = next_id;
  auto txn = [&](Database& db, const Handles& h, Transaction* tx, int log_fd) {
    Model view = model;
    Effect eff;
    OkOrDie(RunBlobTxn(tx, h, rng, shape, tag++, &next_id, &view, &eff, track), "operation");
    progress->temp_spills.store(db.stats().temp_spills, std::memory_order_relaxed);
    AppendDurablyOrDie(log_fd, EncodePending(eff));
    track(Step::kCommit);
    OkOrDie(tx->Commit(), "commit");
    progress->step.store(0, std::memory_order_relaxed);
    AppendDurablyOrDie(log_fd, EncodeCommitted(eff.tag));
    model = std::move(view);
  };
  RunChildLoop(args, link, GetHandles, txn);
}

TEST_CASE("blob crash: SIGKILL while writing large BLOBs leaves no partial BLOB", "[crash][fork]") {
  const uint64_t seed = AnnounceSeed("blob SIGKILL", kFixedSeed);
  const uint64_t kills = EnvU64("EMBER_BLOB_CRASH_KILLS", 24);
  const uint64_t max_delay_ms =
      std::max<uint64_t>(10, EnvU64("EMBER_BLOB_CRASH_MAX_DELAY_MS", 150));
  std::mt19937_64 rng(seed);
  Shape shape;
  // Drawn, as in crash_test.cc's SIGKILL test: pages above 4 KiB can be torn by the kill.
  const uint32_t drawn_page_size = kCrashPageSizes[rng() % std::size(kCrashPageSizes)];
  shape.page_size = static_cast<uint32_t>(EnvU64("EMBER_CRASH_PAGE_SIZE", drawn_page_size));
  CAPTURE(seed, kills, shape.page_size);
  ScopedNoEmberTmp no_env;
  ScratchDir dir("ember-blobcrash");
  REQUIRE(dir.ok());
  const std::string db_path = dir.File("blobkill.edb");
  const std::string log_path = dir.File("commits.log");

  Options opts;
  opts.page_size = shape.page_size;
  opts.forced_writes = true;
  opts.temp_directories = {dir.Temp()};
  {
    Options create = opts;
    create.create_if_missing = true;
    std::unique_ptr<Database> db = ValueOr(Database::Open(db_path, create), "create");
    ValueOr(CreateSchema(db.get()), "create schema");
    CRASH_REQUIRE_OK(db->Close());
  }
  const uint64_t initial_size = FileSize(db_path);

  // The child's progress, shared across fork.
  void* shared =
      ::mmap(nullptr, sizeof(Progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shared != MAP_FAILED);
  Progress* progress = new (shared) Progress();
  struct Unmap {
    void* p;
    ~Unmap() { ::munmap(p, sizeof(Progress)); }
  } unmap{shared};

  Model model;
  uint64_t committed_bytes = 0, commits = 0, in_flight_seen = 0, in_flight_kept = 0;
  uint64_t unreachable = 0, stale_spill_files = 0, spills = 0;
  // Kills by where the child was: before a transaction's first step (between transactions, or
  // making the first BLOB's bytes), at a BLOB call, at a row write (storing BLOBs), in a commit.
  uint64_t landed[4] = {};
  for (uint64_t round = 0; round < kills; ++round) {
    Options child_opts = opts;
    child_opts.blob_temp_space = static_cast<int>(round % 3);
    const uint32_t caches[] = {32, 64, 256, 1024};
    child_opts.cache_pages = caches[rng() % std::size(caches)];
    // Small enough that temporary BLOBs in TempSpace spill to files (blocks are 1 MB).
    const uint64_t temp_limits[] = {0, 1 << 20, 3 << 20};
    child_opts.temp_cache_limit = temp_limits[rng() % std::size(temp_limits)];
    // Coverage: if no kill so far came after a spill (on a loaded machine the kills can all
    // come early), the last one waits for the child's first spill.
    const bool await_spill = round + 1 == kills && spills == 0;
    if (await_spill) {
      child_opts.blob_temp_space = 2;  // every temporary BLOB in temp space
      child_opts.temp_cache_limit = 1 << 20;
    }
    child_opts.use_io_uring = rng() % 2 == 0;
    const int64_t base = static_cast<int64_t>(round + 1) * 1'000'000;
    const uint64_t child_seed = rng();
    const int delay_ms = 5 + static_cast<int>(rng() % (max_delay_ms - 4));
    CAPTURE(round, child_seed, delay_ms, child_opts.blob_temp_space, child_opts.cache_pages,
            child_opts.temp_cache_limit, child_opts.use_io_uring);
    { std::ofstream truncate(log_path, std::ios::trunc); }
    progress->step.store(0);
    progress->temp_spills.store(0);
    // The delay counts from when the child has the database open (a loaded machine opens
    // slowly).
    const ChildArgs args{db_path, log_path, child_opts, kChildMaxTxns};
    ForkAndKill(
        [&](const ChildLink& link) {
          RunChild(args, link, shape, model, base, child_seed, progress);
        },
        delay_ms, /*count_from_fork=*/false,
        [&] { return !await_spill || progress->temp_spills.load() > 0; });
    const uint32_t where = std::min<uint32_t>(progress->step.load(), 3);
    ++landed[where];
    spills += progress->temp_spills.load();
    // A kill between creating a spill file and unlinking it leaves one; the reopen removes it.
    stale_spill_files += FilesIn(dir.Temp()).size();

    const SideLog<Op> log = RequireSideLog<Op>(log_path);
    Model want;
    std::optional<Model> alt;
    ExpectedStates(log, model, &want, &alt);
    uint64_t round_bytes = 0;
    for (const Effect& e : log.committed) round_bytes += StoredBytes(e);
    std::vector<int64_t> absent;
    for (int64_t id = base; id < base + 400; ++id) absent.push_back(id);
    CAPTURE(log.committed.size(), log.pending.has_value());

    Options reopen = opts;
    reopen.blob_temp_space = child_opts.blob_temp_space;
    std::unique_ptr<Database> db =
        ValueOr(Database::Open(db_path, reopen), "reopen after the kill");
    RequireNoSpillFiles(dir.Temp());
    uint64_t in_use = 0;
    unreachable += RequireValidAfterCrash(db.get(), db_path, &in_use);
    const Handles h = ValueOr(GetHandles(db.get()), "handles");
    bool kept = false;
    model = RequireState(db.get(), h, absent, rng, want, alt ? &*alt : nullptr, &kept);
    if (kept) round_bytes += StoredBytes(*log.pending);
    CRASH_REQUIRE_OK(db->Close());
    RequireNoSpillFiles(dir.Temp());
    committed_bytes += round_bytes;
    const uint64_t size = FileSize(db_path);
    RequireBoundedGrowth(size - std::min(size, initial_size), committed_bytes, shape);

    commits += log.committed.size();
    in_flight_seen += log.pending ? 1 : 0;
    in_flight_kept += kept ? 1 : 0;
    if (Verbosity() > 1) {
      std::fprintf(
          stderr,
          "[blob crash] round %llu: mode %d, delay %d ms, cache %u, killed in step %u, "
          "%zu commits, %s; %zu rows, %.1f MB live, file %.1f MB, %llu pages in use\n",
          static_cast<unsigned long long>(round), child_opts.blob_temp_space, delay_ms,
          child_opts.cache_pages, where, log.committed.size(),
          log.pending ? (kept ? "in flight: durable" : "in flight: lost") : "none in flight",
          model.size(), LiveBytes(model) / 1048576.0, size / 1048576.0,
          static_cast<unsigned long long>(in_use));
    }
  }
  // The workload must have done what the test is about.
  CHECK(commits > 0);
  CHECK(landed[1 + static_cast<int>(Step::kBlobCall)] > 0);
  CHECK(spills > 0);
  if (Verbosity() > 0) {
    std::fprintf(
        stderr,
        "[blob crash] SIGKILL: seed %llu, %llu kills (%llu before a first step, %llu at a BLOB "
        "call, %llu at a row write, %llu in a commit), %llu commits, %.1f MB of BLOBs "
        "committed, %llu in flight at the kill (%llu durable), %llu unreachable pages "
        "freed, %llu spill blocks, %llu spill files left by a kill, file %.1f MB\n",
        static_cast<unsigned long long>(seed), static_cast<unsigned long long>(kills),
        static_cast<unsigned long long>(landed[0]), static_cast<unsigned long long>(landed[1]),
        static_cast<unsigned long long>(landed[2]), static_cast<unsigned long long>(landed[3]),
        static_cast<unsigned long long>(commits), committed_bytes / 1048576.0,
        static_cast<unsigned long long>(in_flight_seen),
        static_cast<unsigned long long>(in_flight_kept),
        static_cast<unsigned long long>(unreachable), static_cast<unsigned long long>(spills),
        static_cast<unsigned long long>(stale_spill_files), FileSize(db_path) / 1048576.0);
  }
}

// ---------------------------------------------------------------- 2. power loss

struct PowerStats {
  uint64_t crashes = 0, commits = 0, in_blob = 0, in_row = 0, in_commit = 0, idle = 0;
  uint64_t during_call = 0, call_failed = 0, commit_failed = 0, in_doubt_kept = 0;
  uint64_t unreachable = 0, reverted = 0;
};

// What the fault-injecting file returns once the fault fired: EIO as io::ErrnoStatus reports it,
// or a transaction doomed by it (a failed statement whose undo met the fault too).
bool ExpectedIoError(const absl::Status& s) {
  if (s.message().find(std::strerror(EIO)) == absl::string_view::npos) return false;
  // Unknown: a commit whose sync failed and whose marking as dead failed too is in doubt until
  // the database is reopened (transaction.h); either outcome may come back.
  return absl::IsInternal(s) || absl::IsUnknown(s) ||
         (absl::IsFailedPrecondition(s) &&
          s.message().find(" is doomed ") != absl::string_view::npos);
}

// Where one run crashes: in transaction `txn`, at its `nth` step of kind `kind` (falling back to
// its commit when it has fewer), either just before that call or, `during`, inside it: a fault
// is armed in the file (a failed fsync, a failed write from then on, or the power cut at a
// write) and the crash follows as soon as the call returns. A commit is always crashed during.
// `txn` past the last transaction: the crash comes while idle.
struct CrashPlan {
  int txn = 0;
  Step kind = Step::kBlobCall;
  uint64_t nth = 1;
  bool during = false;
};

CrashPlan RandomPlan(std::mt19937_64& rng, int ntx) {
  CrashPlan p;
  p.txn = static_cast<int>(rng() % ntx);
  const uint32_t r = rng() % 100;
  if (r < 50) {
    p.kind = Step::kBlobCall;
    p.nth = 1 + rng() % 12;
    p.during = rng() % 2 == 0;
  } else if (r < 75) {
    // Storing a BLOB in a row copies it into pages (modes 1 and 2): the fault lands mid-copy.
    p.kind = Step::kRowWrite;
    p.nth = 1 + rng() % 2;
    p.during = rng() % 10 < 7;
  } else if (r < 95) {
    p.kind = Step::kCommit;
  } else {
    p.txn = ntx;
  }
  return p;
}

// One seed: a fresh database and two rounds of (random BLOB transactions up to the crash point,
// power loss, reopen and check). A fault that makes a call fail must give an I/O error; a commit
// it makes fail is lost under DropUnsynced (nothing after the last good fsync survives) and all
// or nothing under ReorderFile.
void PowerLossRun(uint64_t seed, int mode, LossModel loss, PowerStats* stats) {
  std::mt19937_64 rng(seed);
  ScratchDir dir("ember-blobcrash");
  REQUIRE(dir.ok());
  const std::string path = dir.File("power.edb");
  Shape shape;
  shape.max_len = 2 << 20;
  shape.live_budget = 8ull << 20;
  Options opts;
  DrawPageSizeAndPath(rng, &opts);
  shape.page_size = opts.page_size;
  const uint32_t caches[] = {16, 32, 64, 256};
  opts.cache_pages = caches[rng() % std::size(caches)];
  opts.forced_writes = true;
  opts.blob_temp_space = mode;
  opts.temp_directories = {dir.Temp()};
  opts.temp_cache_limit = rng() % 2 ? 0 : 1 << 20;
  CAPTURE(mode, opts.page_size, opts.use_io_uring, opts.cache_pages, opts.temp_cache_limit);
  Model committed;
  int64_t next_id = 1, next_tag = 1;
  uint64_t committed_bytes = 0;
  for (int round = 0; round < 2; ++round) {
    PowerLossDb d = OpenPowerLossDb(path, opts, loss, round == 0);
    const Handles h = round == 0 ? ValueOr(CreateSchema(d.db.get()), "create schema")
                                 : ValueOr(GetHandles(d.db.get()), "handles");
    RequireWritePath(opts.use_io_uring, d.file()->write_path_counts(), round == 0);

    const int ntx = 1 + static_cast<int>(rng() % 5);
    CrashPlan plan = RandomPlan(rng, ntx);
    CAPTURE(round, ntx, plan.txn, static_cast<int>(plan.kind), plan.nth, plan.during);
    int cur_txn = 0;
    bool crashed = false, armed = false;
    Step crash_step = Step::kBlobCall;
    auto crash = [&] {
      d.db->TEST_SimulateCrash();
      crashed = true;
      return false;
    };
    // A commit writes up to the whole cache; a BLOB call or row write only what eviction cleans
    // on the way, often a few pages.
    auto arm = [&](bool commit) {
      armed = true;
      const uint64_t nth_write = 1 + rng() % (commit ? opts.cache_pages + 8 : 24);
      if (d.reorder != nullptr) {
        d.reorder->CutPowerAtWrite(nth_write);
      } else if (rng() % 2 == 0) {
        d.fault->FailSyncAfter(1 + rng() % 2, EIO);
      } else {
        d.fault->FailWriteAfter(nth_write, EIO, /*sticky=*/true);
      }
      return true;
    };
    const Hook hook = [&](Step s) {
      if (crashed) return false;
      if (armed) return crash();  // the call the fault was armed for has returned
      if (cur_txn != plan.txn || (s != plan.kind && s != Step::kCommit)) return true;
      if (s == plan.kind && --plan.nth > 0) return true;
      crash_step = s;
      return s == Step::kCommit || plan.during ? arm(s == Step::kCommit) : crash();
    };
    std::optional<Model> in_doubt;  // the state if the commit the fault hit did commit
    std::unique_ptr<Transaction> tx;
    for (; cur_txn < ntx && !crashed; ++cur_txn) {
      tx = ValueOr(d.db->Begin(TransactionOptions{}), "Begin");
      Model view = committed;
      Effect eff;
      const absl::Status s =
          RunBlobTxn(tx.get(), h, rng, shape, next_tag++, &next_id, &view, &eff, hook);
      if (crashed) {
        INFO("the workload at the crash point: " << s.ToString());
        REQUIRE(IsStopped(s));
        break;
      }
      if (!s.ok()) {
        // Only the armed fault may fail a call, and only with the I/O error.
        INFO("the call the fault was armed for: " << s.ToString());
        REQUIRE(armed);
        REQUIRE(ExpectedIoError(s));
        ++stats->call_failed;
        crash();
        break;
      }
      hook(Step::kCommit);
      if (crashed) break;  // a fault armed in the last call, which returned fine
      const absl::Status c = tx->Commit();
      if (c.ok()) {
        committed = std::move(view);
        committed_bytes += StoredBytes(eff);
        ++stats->commits;
      } else {
        INFO("Commit: " << c.ToString());
        REQUIRE(armed);
        REQUIRE(ExpectedIoError(c));
        ++stats->commit_failed;
        if (d.reorder != nullptr || absl::IsUnknown(c)) in_doubt = std::move(view);
      }
      if (armed) {
        crash();
        break;
      }
      tx.reset();
    }
    ++stats->crashes;
    stats->during_call += armed ? 1 : 0;
    if (!crashed) {
      ++stats->idle;
      crash();
    } else if (crash_step == Step::kBlobCall) {
      ++stats->in_blob;
    } else if (crash_step == Step::kRowWrite) {
      ++stats->in_row;
    } else {
      ++stats->in_commit;
    }
    RequireWritePath(opts.use_io_uring, d.file()->write_path_counts(), round == 0);
    stats->reverted += d.LosePower(rng);
    tx.reset();  // a no-op rollback: the database is gone
    d.db.reset();

    std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen after power loss");
    RequireNoSpillFiles(dir.Temp());
    stats->unreachable += RequireValidAfterCrash(db.get(), path);
    const Handles h2 = ValueOr(GetHandles(db.get()), "handles after reopen");
    std::vector<int64_t> absent;
    for (int64_t id = 1; id < next_id + 5; ++id) absent.push_back(id);
    bool kept = false;
    const Model before = committed;
    committed =
        RequireState(db.get(), h2, absent, rng, committed, in_doubt ? &*in_doubt : nullptr, &kept);
    if (kept) {
      ++stats->in_doubt_kept;
      for (const auto& [id, r] : committed) {
        auto it = before.find(id);
        if (it == before.end() || !(it->second == r)) committed_bytes += r.len;
      }
    }
    CRASH_REQUIRE_OK(db->Close());
    RequireNoSpillFiles(dir.Temp());
    RequireBoundedGrowth(FileSize(path), committed_bytes, shape);
  }
}

void PowerLossTest(LossModel loss, const char* name) {
  ScopedNoEmberTmp no_env;
  const uint64_t seed = AnnounceSeed(name, kFixedSeed);
  const uint64_t runs = EnvU64("EMBER_BLOB_CRASH_POWER_RUNS", 30);
  const uint64_t first = EnvU64("EMBER_BLOB_CRASH_POWER_FIRST", 0);  // to replay one failed run
  PowerStats stats;
  for (uint64_t i = first; i < first + runs; ++i) {
    const uint64_t run_seed = seed * 1000003 + i + (loss == LossModel::kReorder ? 500 : 0);
    const int mode = static_cast<int>(i % 3);
    CAPTURE(seed, i, run_seed, mode);
    PowerLossRun(run_seed, mode, loss, &stats);
  }
  if (runs >= 10) {  // a replay of one run need not reach every kind of crash point
    CHECK(stats.commits > 0);
    CHECK(stats.in_blob > 0);
  }
  if (Verbosity() > 0) {
    Report("[blob crash] ", name, ": seed ", seed, ", ", runs, " runs, ", stats.crashes,
           " crashes (", stats.in_blob, " at a BLOB call, ", stats.in_row, " at a row write, ",
           stats.in_commit, " in a commit, ", stats.idle, " idle; ", stats.during_call,
           " with a fault armed in the call, ", stats.call_failed, " calls failed by it), ",
           stats.commits, " commits, ", stats.commit_failed, " commits failed by the fault (",
           stats.in_doubt_kept, " of them durable), ", stats.unreachable,
           " unreachable pages freed, ", stats.reverted, " page versions lost");
  }
}

TEST_CASE("blob crash: power loss in the middle of a BLOB write or its commit (DropUnsynced)",
          "[exhaustive][crash]") {
  PowerLossTest(LossModel::kDropUnsynced, "power loss");
}

TEST_CASE(
    "blob crash: power loss with unsynced page writes reordered, in the middle of a BLOB "
    "write or its commit",
    "[exhaustive][crash]") {
  PowerLossTest(LossModel::kReorder, "power loss, reordered");
}

// ---------------------------------------------------------------- 3. a dead transaction's BLOB

// The SIGKILL test above may kill the child after a BLOB was stored (assigned to a row: its header
// record written) and before the commit; whether the cache had written that header record by then
// is chance. Here it is certain: the cache writes the page holding the BLOB's header record (with
// the BLOB's pages, its prerequisites), and either every other dirty page too, the row's version
// included, or nothing else - eviction may pick any subset of the dirty pages - and the process
// dies. The dead transaction's BLOB is garbage then, like its row version; if it stays allocated,
// every such crash leaks a BLOB's pages for good and the file grows with the number of crashes,
// not with what was committed.
// When only the header record reached the disk (row_on_disk false) no row version names the
// BLOB, so garbage collection cannot free it: Validate() reports it as an orphan BLOB and
// free_unreachable frees it (RequireValidAfterCrash does that after every crash).
TEST_CASE("blob crash: the pages of a BLOB stored by a transaction that died are reused",
          "[crash]") {
  const int mode = GENERATE(0, 1, 2);
  const bool row_on_disk = GENERATE(true, false);
  CAPTURE(mode, row_on_disk);
  ScopedNoEmberTmp no_env;
  ScratchDir dir("ember-blobcrash");
  REQUIRE(dir.ok());
  const std::string path = dir.File("dead.edb");
  Shape shape;
  shape.max_ops = 1;
  shape.max_len = 1 << 20;
  Options opts;
  opts.page_size = shape.page_size;
  opts.cache_pages = 64;
  opts.forced_writes = true;
  opts.use_io_uring = false;
  opts.blob_temp_space = mode;
  opts.temp_directories = {dir.Temp()};
  opts.temp_cache_limit = 0;
  std::mt19937_64 rng(BaseSeed(kFixedSeed));
  Model committed;
  uint64_t committed_pages = 0, committed_bytes = 0;
  {
    Options create = opts;
    create.create_if_missing = true;
    std::unique_ptr<Database> db = ValueOr(Database::Open(path, create), "create");
    const Handles h = ValueOr(CreateSchema(db.get()), "create schema");
    std::unique_ptr<Transaction> t = ValueOr(db->Begin(), "Begin");
    const std::string data = Pattern(1, 300000);
    const BlobId b = ValueOr(BuildWithWriter(t.get(), data, rng, {}), "write a BLOB");
    const RecordId rec = ValueOr(t->Insert(h.table, Row{int64_t{1}, int64_t(data.size()),
                                                        static_cast<int64_t>(SumOf(data)), b}),
                                 "Insert");
    CRASH_REQUIRE_OK(t->Commit());
    committed[1] = RowState{rec.value, data.size(), SumOf(data)};
    committed_pages += BlobPages(data.size(), shape.page_size);
    committed_bytes += data.size();
    CRASH_REQUIRE_OK(db->Close());
  }
  const uint64_t initial_size = FileSize(path);
  constexpr int kCycles = 10;
  uint64_t in_use = 0, unreachable = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    CAPTURE(cycle);
    {
      std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "open");
      auto* impl = dynamic_cast<db::DatabaseImpl*>(db.get());
      REQUIRE(impl != nullptr);
      const Handles h = ValueOr(GetHandles(db.get()), "handles");
      std::unique_ptr<Transaction> t = ValueOr(db->Begin(), "Begin");
      const std::string data = Pattern(100 + cycle, shape.max_len);
      const BlobId b = ValueOr(BuildBlob(t.get(), data, rng, {}), "build a BLOB");
      const RecordId rec =
          ValueOr(t->Insert(h.table, Row{int64_t{100} + cycle, int64_t(data.size()),
                                         static_cast<int64_t>(SumOf(data)), b}),
                  "Insert");
      if (row_on_disk) {
        CRASH_REQUIRE_OK(impl->cache()->FlushAll());
      } else {
        const std::optional<Row> row = ValueOr(t->Get(h.table, rec), "Get");
        REQUIRE(row.has_value());
        const BlobId stored = std::get<BlobId>((*row)[3]);
        REQUIRE_FALSE(blob::IsTemp(stored.value));
        const page::PageNo header_page = blob::IdPage(stored.value);
        CRASH_REQUIRE_OK(impl->cache()->FlushPages(std::span<const page::PageNo>(&header_page, 1)));
      }
      impl->TEST_SimulateCrash();
      t.reset();  // a no-op rollback: the database is gone
    }
    std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen after the crash");
    RequireNoSpillFiles(dir.Temp());
    // Give garbage collection its chance at the dead version first.
    CRASH_REQUIRE_OK(db->CollectGarbage());
    unreachable += RequireValidAfterCrash(db.get(), path, &in_use);
    const Handles h = ValueOr(GetHandles(db.get()), "handles");
    std::vector<int64_t> absent;
    for (int64_t id = 100; id < 100 + kCycles; ++id) absent.push_back(id);
    bool kept = false;
    committed = RequireState(db.get(), h, absent, rng, committed, nullptr, &kept);
    CRASH_REQUIRE_OK(db->Close());
    if (Verbosity() > 1) {
      std::fprintf(stderr,
                   "[blob crash] dead BLOB, mode %d, row %s disk, cycle %d: %llu pages in use, "
                   "file %.1f MB\n",
                   mode, row_on_disk ? "on" : "not on", cycle,
                   static_cast<unsigned long long>(in_use), FileSize(path) / 1048576.0);
    }
  }
  // What the committed BLOB needs, plus room for the catalog, the table's data and index pages,
  // the PIP, and TIP pages (each open reserves a block of transaction ids).
  INFO(kCycles << " crashes, each after a BLOB of " << shape.max_len << " bytes was stored; "
               << unreachable << " unreachable pages freed; " << in_use << " pages in use, "
               << committed_pages << " of them for the committed BLOB");
  CHECK(in_use <= committed_pages + 32);
  const uint64_t size = FileSize(path);
  RequireBoundedGrowth(size - std::min(size, initial_size), committed_bytes, shape);
}

}  // namespace
}  // namespace ember::blobcrash
