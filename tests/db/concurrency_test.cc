// Concurrency tests: several threads running transactions on the same tables. Every loop has a
// fixed bound; worker threads never use Catch2 (not thread-safe) but log problems to an ErrorLog
// that the main thread checks. Meant to run clean under ThreadSanitizer too.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::ErrorLog;
using testing::OpenOrFail;
using testing::TempDb;

// Joins every thread when it goes out of scope (also when a REQUIRE throws).
class ThreadGroup {
 public:
  ~ThreadGroup() { JoinAll(); }
  template <typename Fn>
  void Spawn(Fn fn) {
    threads_.emplace_back(std::move(fn));
  }
  void JoinAll() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::vector<std::thread> threads_;
};

std::string Str(const absl::Status& s) { return s.ToString(); }

TEST_CASE("bank transfers keep the total constant for every snapshot", "[concurrency]") {
  constexpr size_t kAccounts = 16;
  constexpr int64_t kInitial = 1000;
  constexpr int kTransferThreads = 4;
  constexpr int kTransfersPerThread = 150;
  constexpr int kMaxAttempts = 2000;  // per transfer; retries only follow Aborted conflicts
  constexpr int kMaxSums =
      100000;  // the reader stops when the writers are done, at the latest here

  TempDb tmp;
  Options o = testing::CreateOptions(4096, 128);
  o.forced_writes = false;
  auto db = OpenOrFail(tmp.path(), o);
  Table acc = VALUE_OR_FAIL(db->CreateTable(
      {"accounts", {{"id", ColumnType::kInt64, false}, {"balance", ColumnType::kInt64, false}}}));
  std::vector<RecordId> ids;
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (size_t i = 0; i < kAccounts; ++i) {
      ids.push_back(VALUE_OR_FAIL(txn->Insert(acc, Row{static_cast<int64_t>(i), kInitial})));
    }
    REQUIRE_OK(txn->Commit());
  }
  const int64_t total = static_cast<int64_t>(kAccounts) * kInitial;

  ErrorLog errors;
  std::atomic<int> writers_left{kTransferThreads};
  std::atomic<uint64_t> conflicts{0}, deadlocks{0}, committed{0}, sums{0};
  ThreadGroup threads;
  for (int w = 0; w < kTransferThreads; ++w) {
    threads.Spawn([&, w] {
      std::mt19937_64 rng(1000 + w);
      for (int n = 0; n < kTransfersPerThread; ++n) {
        const size_t from = rng() % kAccounts;
        size_t to = rng() % (kAccounts - 1);
        if (to >= from) ++to;
        const int64_t amount = static_cast<int64_t>(rng() % 50) + 1;
        bool done = false;
        std::string last_error;
        for (int attempt = 0; attempt < kMaxAttempts && !done; ++attempt) {
          TransactionOptions to_opts;
          // Snapshot isolation: a read-then-write under read committed may lose an update.
          to_opts.isolation = Isolation::kSnapshot;
          to_opts.wait = (n % 4) != 0;
          absl::StatusOr<std::unique_ptr<Transaction>> t = db->Begin(to_opts);
          if (!t.ok()) {
            errors.Add("Begin: " + Str(t.status()));
            return;
          }
          absl::Status s;
          for (size_t who : {from, to}) {
            absl::StatusOr<std::optional<Row>> r = (*t)->Get(acc, ids[who]);
            if (!r.ok() || !r->has_value()) {
              errors.Add(
                  absl::StrCat("Get account ", who, ": ", r.ok() ? "missing" : Str(r.status())));
              return;
            }
            Row row = **r;
            std::get<int64_t>(row[1]) += who == from ? -amount : amount;
            s = (*t)->Update(acc, ids[who], row);
            if (!s.ok()) break;
          }
          if (s.ok()) s = (*t)->Commit();
          if (s.ok()) {
            done = true;
            committed.fetch_add(1);
          } else if (absl::IsAborted(s)) {
            last_error = Str(s);
            (std::string(s.message()).find("deadlock") != std::string::npos ? deadlocks : conflicts)
                .fetch_add(1);
            (void)(*t)->Rollback();
            // Back off before retrying: a no-wait transaction would otherwise spin through its
            // attempts while one holder keeps the row for a moment.
            std::this_thread::sleep_for(std::chrono::microseconds(50 * (1 + attempt % 20)));
          } else {
            errors.Add("transfer: " + Str(s));
            return;
          }
        }
        if (!done) {
          errors.Add(absl::StrCat("transfer ", n, " of thread ", w,
                                  " never succeeded; last: ", last_error));
        }
      }
      writers_left.fetch_sub(1);
    });
  }
  threads.Spawn([&] {
    for (int n = 0; n < kMaxSums && writers_left.load() > 0; ++n) {
      absl::StatusOr<std::unique_ptr<Transaction>> t = db->Begin();
      if (!t.ok()) return errors.Add("reader Begin: " + Str(t.status()));
      auto rows = testing::ScanAll(t->get(), acc);
      if (!rows.ok()) return errors.Add("reader scan: " + Str(rows.status()));
      int64_t sum = 0;
      for (const auto& [id, row] : *rows) sum += std::get<int64_t>(row[1]);
      if (rows->size() != kAccounts || sum != total) {
        errors.Add(absl::StrCat("snapshot sees ", rows->size(), " accounts, total ", sum));
      }
      // The same snapshot read again, row by row, gives the same total.
      int64_t again = 0;
      for (RecordId id : ids) {
        auto r = (*t)->Get(acc, id);
        if (!r.ok() || !r->has_value()) return errors.Add("reader Get failed");
        again += std::get<int64_t>((**r)[1]);
      }
      if (again != sum) errors.Add(absl::StrCat("snapshot total changed: ", sum, " then ", again));
      if (absl::Status s = (*t)->Commit(); !s.ok()) return errors.Add("reader commit: " + Str(s));
      sums.fetch_add(1);
    }
  });
  threads.JoinAll();
  testing::RequireNoErrors(errors);
  INFO("conflicts " << conflicts.load() << ", deadlocks " << deadlocks.load() << ", sums "
                    << sums.load());
  REQUIRE(committed.load() == uint64_t{kTransferThreads} * kTransfersPerThread);
  REQUIRE(sums.load() > 0);

  auto txn = VALUE_OR_FAIL(db->Begin());
  auto rows = VALUE_OR_FAIL(testing::ScanAll(txn.get(), acc));
  REQUIRE(rows.size() == kAccounts);
  int64_t sum = 0;
  for (const auto& [id, row] : rows) sum += std::get<int64_t>(row[1]);
  REQUIRE(sum == total);
  REQUIRE_OK(txn->Commit());
  txn.reset();
  ValidationReport rep = VALUE_OR_FAIL(db->Validate());
  INFO("first error: " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.ok());
  REQUIRE_OK(db->Close());
}

TEST_CASE("concurrent inserters into a unique index with concurrent index scanners",
          "[concurrency]") {
  constexpr int kInserters = 4;
  constexpr int kTxnsPerInserter = 40;
  constexpr int kRowsPerTxn = 10;
  constexpr int kScanners = 2;
  constexpr int kMaxScans = 100000;
  constexpr int64_t kStride = 1000000;

  TempDb tmp;
  Options o = testing::CreateOptions(4096, 128);
  o.forced_writes = false;
  auto db = OpenOrFail(tmp.path(), o);
  Table t = VALUE_OR_FAIL(db->CreateTable({"t",
                                           {{"key", ColumnType::kInt64, false},
                                            {"who", ColumnType::kInt64, false},
                                            {"pad", ColumnType::kString}}}));
  Index by_key = VALUE_OR_FAIL(db->CreateIndex({"t_key", "t", {"key"}, true}));

  ErrorLog errors;
  std::atomic<int> inserters_left{kInserters};
  std::atomic<uint64_t> scans{0};
  ThreadGroup threads;
  for (int w = 0; w < kInserters; ++w) {
    threads.Spawn([&, w] {
      for (int n = 0; n < kTxnsPerInserter; ++n) {
        auto txn = db->Begin();
        if (!txn.ok()) return errors.Add("Begin: " + Str(txn.status()));
        for (int i = 0; i < kRowsPerTxn; ++i) {
          const int64_t key = w * kStride + n * kRowsPerTxn + i;
          auto r = (*txn)->Insert(
              t, Row{key, int64_t{w}, std::string(static_cast<size_t>(key % 200), 'p')});
          if (!r.ok()) return errors.Add(absl::StrCat("insert ", key, ": ", Str(r.status())));
        }
        // Every third transaction also tries a key of its own that it already inserted.
        if (n % 3 == 0) {
          auto dup = (*txn)->Insert(
              t, Row{int64_t{w * kStride + n * kRowsPerTxn}, int64_t{w}, std::string()});
          if (!absl::IsAlreadyExists(dup.status())) {
            return errors.Add("duplicate insert gave " + Str(dup.status()));
          }
        }
        if (absl::Status s = (*txn)->Commit(); !s.ok()) return errors.Add("commit: " + Str(s));
      }
      inserters_left.fetch_sub(1);
    });
  }
  for (int sc = 0; sc < kScanners; ++sc) {
    threads.Spawn([&, sc] {
      std::vector<int64_t> last_seen(kInserters, 0);
      for (int n = 0; n < kMaxScans && inserters_left.load() > 0; ++n) {
        TransactionOptions to;
        to.isolation = sc == 0 ? Isolation::kSnapshot : Isolation::kReadCommitted;
        to.read_only = true;
        auto txn = db->Begin(to);
        if (!txn.ok()) return errors.Add("scanner Begin: " + Str(txn.status()));
        const bool desc = n % 2 == 1;
        auto rows = testing::IndexRange(txn->get(), by_key, {}, {}, desc);
        if (!rows.ok()) return errors.Add("scan: " + Str(rows.status()));
        std::vector<int64_t> per(kInserters, 0);
        int64_t prev = desc ? INT64_MAX : INT64_MIN;
        for (const auto& [id, row] : *rows) {
          const int64_t key = std::get<int64_t>(row[0]);
          const int64_t who = std::get<int64_t>(row[1]);
          if (desc ? key >= prev : key <= prev) {
            return errors.Add(absl::StrCat("scan order: ", key, " after ", prev));
          }
          prev = key;
          if (who < 0 || who >= kInserters || key / kStride != who) {
            return errors.Add(absl::StrCat("bad row key ", key, " who ", who));
          }
          ++per[who];
        }
        for (int w = 0; w < kInserters; ++w) {
          // A snapshot scan sees whole transactions: a multiple of kRowsPerTxn per inserter,
          // and never fewer than an earlier scan.
          if (sc == 0 && per[w] % kRowsPerTxn != 0) {
            errors.Add(absl::StrCat("inserter ", w, ": ", per[w], " rows visible"));
          }
          if (per[w] < last_seen[w]) {
            errors.Add(absl::StrCat("inserter ", w, ": ", per[w], " rows after ", last_seen[w]));
          }
          last_seen[w] = per[w];
        }
        // A lookup of an early key of each inserter agrees with the scan.
        for (int w = 0; w < kInserters; ++w) {
          auto f = (*txn)->Lookup(by_key, {int64_t{w * kStride}});
          if (!f.ok()) return errors.Add("lookup: " + Str(f.status()));
          if (sc == 0 && f->has_value() != (per[w] > 0)) {
            errors.Add(absl::StrCat("lookup of inserter ", w, "'s first key disagrees with scan"));
          }
        }
        if (absl::Status s = (*txn)->Commit(); !s.ok())
          return errors.Add("scanner commit: " + Str(s));
        scans.fetch_add(1);
      }
    });
  }
  threads.JoinAll();
  testing::RequireNoErrors(errors);
  REQUIRE(scans.load() > 0);

  auto txn = VALUE_OR_FAIL(db->Begin());
  auto rows = VALUE_OR_FAIL(testing::IndexRange(txn.get(), by_key, {}, {}));
  REQUIRE(rows.size() == size_t{kInserters} * kTxnsPerInserter * kRowsPerTxn);
  auto scan = VALUE_OR_FAIL(testing::ScanAll(txn.get(), t));
  REQUIRE(scan.size() == rows.size());
  for (int w = 0; w < kInserters; ++w) {
    for (int64_t i = 0; i < kTxnsPerInserter * kRowsPerTxn; i += 37) {
      auto f = VALUE_OR_FAIL(txn->Lookup(by_key, {w * kStride + i}));
      REQUIRE(f.has_value());
      REQUIRE(std::get<int64_t>(f->second[1]) == w);
    }
  }
  REQUIRE(
      absl::IsAlreadyExists(txn->Insert(t, Row{int64_t{5}, int64_t{0}, std::string()}).status()));
  REQUIRE_OK(txn->Rollback());
  txn.reset();
  ValidationReport rep = VALUE_OR_FAIL(db->Validate());
  INFO("first error: " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.ok());
  REQUIRE_OK(db->Close());
}

TEST_CASE("many threads committing small transactions: every row is there", "[concurrency]") {
  constexpr int kThreads = 16;
  constexpr int kTxnsPerThread = 20;

  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), testing::CreateOptions(4096, 256));  // forced writes on
  Table t = VALUE_OR_FAIL(db->CreateTable({"log",
                                           {{"thread", ColumnType::kInt64, false},
                                            {"seq", ColumnType::kInt64, false},
                                            {"note", ColumnType::kString}}}));
  const DatabaseStats before = db->stats();

  ErrorLog errors;
  std::vector<std::vector<std::pair<RecordId, Row>>> written(kThreads);
  ThreadGroup threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.Spawn([&, w] {
      std::mt19937_64 rng(w);
      for (int n = 0; n < kTxnsPerThread; ++n) {
        auto txn = db->Begin();
        if (!txn.ok()) return errors.Add("Begin: " + Str(txn.status()));
        std::vector<std::pair<RecordId, Row>> mine;
        const int rows = 1 + static_cast<int>(rng() % 3);
        for (int i = 0; i < rows; ++i) {
          Row row{int64_t{w}, int64_t{n * 10 + i},
                  std::string(static_cast<size_t>(rng() % 300), 'n')};
          auto id = (*txn)->Insert(t, row);
          if (!id.ok()) return errors.Add("insert: " + Str(id.status()));
          mine.emplace_back(*id, std::move(row));
        }
        if (absl::Status s = (*txn)->Commit(); !s.ok()) return errors.Add("commit: " + Str(s));
        for (auto& m : mine) written[w].push_back(std::move(m));
      }
    });
  }
  threads.JoinAll();
  testing::RequireNoErrors(errors);

  const DatabaseStats after = db->stats();
  const uint64_t commits = after.commits - before.commits;
  const uint64_t flushes = after.group_commit_flushes - before.group_commit_flushes;
  INFO("commits " << commits << ", group commit flushes " << flushes);
  REQUIRE(commits == uint64_t{kThreads} * kTxnsPerThread);
  REQUIRE(flushes > 0);
  REQUIRE(flushes <= commits);
  REQUIRE(after.oldest_active == after.next_transaction);

  auto check = [&](Database* d, const Table& table) {
    auto txn = VALUE_OR_FAIL(d->Begin());
    size_t total = 0;
    std::set<uint64_t> ids;
    for (int w = 0; w < kThreads; ++w) {
      REQUIRE(written[w].size() >= size_t{kTxnsPerThread});
      for (const auto& [id, row] : written[w]) {
        auto got = VALUE_OR_FAIL(txn->Get(table, id));
        REQUIRE(got.has_value());
        REQUIRE(testing::SameRow(*got, row));
        REQUIRE(ids.insert(id.value).second);  // record ids are never handed out twice
        ++total;
      }
    }
    auto rows = VALUE_OR_FAIL(testing::ScanAll(txn.get(), table));
    REQUIRE(rows.size() == total);
    REQUIRE_OK(txn->Commit());
  };
  check(db.get(), t);
  ValidationReport rep = VALUE_OR_FAIL(db->Validate());
  INFO("first error: " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.ok());
  REQUIRE_OK(db->Close());
  db.reset();
  auto again = OpenOrFail(tmp.path(), [] {
    Options o;
    o.cache_pages = 256;
    return o;
  }());
  check(again.get(), VALUE_OR_FAIL(again->GetTable("log")));
  REQUIRE_OK(again->Close());
}

TEST_CASE("concurrent readers and writers on overlapping rows stay consistent", "[concurrency]") {
  // Each writer thread owns a set of rows and repeatedly rewrites all of them with the same
  // version number in one transaction; readers check that a snapshot sees one version per owner.
  constexpr int kWriters = 3;
  constexpr size_t kRowsPerWriter = 20;
  constexpr int kRounds = 40;
  constexpr int kReaders = 2;
  constexpr int kMaxReads = 100000;

  TempDb tmp;
  Options o = testing::CreateOptions(4096, 64);
  o.forced_writes = false;
  auto db = OpenOrFail(tmp.path(), o);
  Table t = VALUE_OR_FAIL(db->CreateTable({"v",
                                           {{"owner", ColumnType::kInt64, false},
                                            {"version", ColumnType::kInt64, false},
                                            {"body", ColumnType::kString}}}));
  Index by_owner = VALUE_OR_FAIL(db->CreateIndex({"v_owner", "v", {"owner", "version"}}));
  std::vector<std::vector<RecordId>> rows(kWriters);
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int w = 0; w < kWriters; ++w) {
      for (size_t i = 0; i < kRowsPerWriter; ++i) {
        rows[w].push_back(
            VALUE_OR_FAIL(txn->Insert(t, Row{int64_t{w}, int64_t{0}, std::string("init")})));
      }
    }
    REQUIRE_OK(txn->Commit());
  }
  ErrorLog errors;
  std::atomic<int> writers_left{kWriters};
  std::atomic<uint64_t> reads{0};
  ThreadGroup threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.Spawn([&, w] {
      std::mt19937_64 rng(77 + w);
      for (int64_t v = 1; v <= kRounds; ++v) {
        auto txn = db->Begin();
        if (!txn.ok()) return errors.Add("Begin: " + Str(txn.status()));
        for (RecordId id : rows[w]) {
          // Bodies of varying size: some updates move versions off the page or fragment.
          Row row{int64_t{w}, v,
                  std::string(static_cast<size_t>(rng() % 2500), static_cast<char>('a' + v % 26))};
          if (absl::Status s = (*txn)->Update(t, id, row); !s.ok()) {
            return errors.Add(absl::StrCat("writer ", w, " update: ", Str(s)));
          }
        }
        if (rng() % 5 == 0) {
          if (absl::Status s = (*txn)->Rollback(); !s.ok())
            return errors.Add("rollback: " + Str(s));
        } else if (absl::Status s = (*txn)->Commit(); !s.ok()) {
          return errors.Add("commit: " + Str(s));
        }
      }
      writers_left.fetch_sub(1);
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.Spawn([&, r] {
      for (int n = 0; n < kMaxReads && writers_left.load() > 0; ++n) {
        auto txn = db->Begin();
        if (!txn.ok()) return errors.Add("reader Begin: " + Str(txn.status()));
        const int w = n % kWriters;
        // Scan (or index range) and check the owner's rows all carry one version.
        absl::StatusOr<std::vector<std::pair<RecordId, Row>>> got =
            (n + r) % 2 ? testing::IndexRange(txn->get(), by_owner, {int64_t{w}}, {int64_t{w}})
                        : testing::ScanAll(txn->get(), t);
        if (!got.ok()) return errors.Add("reader: " + Str(got.status()));
        std::set<int64_t> versions;
        size_t count = 0;
        for (const auto& [id, row] : *got) {
          if (std::get<int64_t>(row[0]) != w) continue;
          versions.insert(std::get<int64_t>(row[1]));
          ++count;
          const std::string& body = std::get<std::string>(row[2]);
          const int64_t v = std::get<int64_t>(row[1]);
          if (v > 0 &&
              body.find_first_not_of(static_cast<char>('a' + v % 26)) != std::string::npos) {
            errors.Add(absl::StrCat("owner ", w, " version ", v, ": body does not match"));
          }
        }
        if (count != kRowsPerWriter || versions.size() != 1) {
          errors.Add(absl::StrCat("owner ", w, ": ", count, " rows, ", versions.size(),
                                  " distinct versions in one snapshot"));
        }
        if (absl::Status s = (*txn)->Commit(); !s.ok())
          return errors.Add("reader commit: " + Str(s));
        reads.fetch_add(1);
        // Leave the writers some CPU: the readers only need to overlap them.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  threads.JoinAll();
  testing::RequireNoErrors(errors);
  REQUIRE(reads.load() > 0);
  ValidationReport rep = VALUE_OR_FAIL(db->Validate());
  INFO("first error: " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.ok());
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember
