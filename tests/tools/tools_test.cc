// The command-line tools (tools/ember-*) run as a user runs them: the built binaries, started
// as child processes on databases made through the API, checked by exit code and output.
// Every test here starts processes, so all carry [fork] (tests/CMakeLists.txt: TSan leaves
// them out).
#include <catch2/catch.hpp>

#if defined(EMBER_STAT_PATH) && defined(EMBER_FIX_PATH)

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "tests/support/child_process.h"
#include "tests/support/damage_util.h"
#include "tests/support/db_util.h"

extern char** environ;

namespace ember {
namespace {

using testing::OpenOrFail;
using testing::TempDb;

struct ToolRun {
  int code = -1;
  std::string out, err;
  std::string all() const { return out + err; }
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `tool` with `args`, stdout and stderr into files of `dir` (posix_spawn: the tool is a
// separate program, as a user would run it).
ToolRun Run(const TempDb& dir, const std::string& tool, std::vector<std::string> args) {
  const std::string out = dir.File("tool.out"), err = dir.File("tool.err");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(tool.c_str()));
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, tool.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  ToolRun r;
  REQUIRE(WIFEXITED(status));
  r.code = WEXITSTATUS(status);
  r.out = Slurp(out);
  r.err = Slurp(err);
  UNSCOPED_INFO(tool << " exit " << r.code << "\n--- stdout:\n"
                     << r.out << "--- stderr:\n"
                     << r.err);
  return r;
}

const std::string kStat = EMBER_STAT_PATH;
const std::string kFix = EMBER_FIX_PATH;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Options Small() {
  Options o = testing::CreateOptions(4096, 64);
  o.gc_policy = GcPolicy::kCooperative;  // garbage stays until the sweep under test
  o.sweep_interval = 0;
  return o;
}

Options Reopen(Options o = Small()) {
  o.create_if_missing = false;
  return o;
}

// people(id, name) with a unique index on id, `n` rows committed; returns the table.
Table MakePeople(Database* db, int n) {
  Table t = VALUE_OR_FAIL(db->CreateTable(
      {"people", {{"id", ColumnType::kInt64, false}, {"name", ColumnType::kString}}}));
  VALUE_OR_FAIL(db->CreateIndex({"people_pk", "people", {"id"}, /*unique=*/true}));
  auto tx = VALUE_OR_FAIL(db->Begin());
  for (int i = 0; i < n; ++i) {
    VALUE_OR_FAIL(tx->Insert(t, {int64_t{i}, std::string("person ") + std::to_string(i)}));
  }
  REQUIRE_OK(tx->Commit());
  return t;
}

// The record ids of `t`, in scan order.
std::vector<RecordId> Ids(Database* db, const Table& t) {
  std::vector<RecordId> ids;
  auto tx = VALUE_OR_FAIL(db->Begin());
  auto cur = VALUE_OR_FAIL(tx->Scan(t));
  while (cur->Valid()) {
    ids.push_back(cur->id());
    REQUIRE_OK(cur->Next());
  }
  cur.reset();
  REQUIRE_OK(tx->Commit());
  return ids;
}

TEST_CASE("tools: --help lists every flag and exits 0", "[tools][fork]") {
  TempDb tmp;
  ToolRun s = Run(tmp, kStat, {"--help"});
  CHECK(s.code == 0);
  for (const char* f :
       {"-h ", "-d ", "-i ", "-a ", "-t ", "-retries", "-noprogress", "Exit codes"}) {
    CHECK(Has(s.out, f));
  }
  ToolRun f = Run(tmp, kFix, {"-help"});
  CHECK(f.code == 0);
  for (const char* flag :
       {"-sweep ", "-par ", "-validate", "-full", "-mend", "-sweep_interval", "Exit codes"}) {
    CHECK(Has(f.out, flag));
  }
}

TEST_CASE("tools: usage errors exit 2", "[tools][fork]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), Small());
    REQUIRE_OK(db->Close());
  }
  ToolRun r = Run(tmp, kStat, {"--bogus", tmp.path()});
  CHECK(r.code == 2);
  CHECK(Has(r.err, "unknown flag '--bogus'"));
  CHECK(Run(tmp, kStat, {}).code == 2);  // no database
  CHECK(Run(tmp, kStat, {"-retries", "x", tmp.path()}).code == 2);
  CHECK(Run(tmp, kFix, {tmp.path()}).code == 2);        // no action
  CHECK(Run(tmp, kFix, {"-h", tmp.path()}).code == 2);  // -h is not ember-fix's
  CHECK(Run(tmp, kFix, {"-sweep", "-par", "0", tmp.path()}).code == 2);
  CHECK(Run(tmp, kFix, {"-sweep", "-par", "two", tmp.path()}).code == 2);
  CHECK(Run(tmp, kFix, {"-mend", tmp.path()}).code == 2);  // -mend without -validate
}

TEST_CASE("tools: a missing database exits 3 naming the path", "[tools][fork]") {
  TempDb tmp;
  const std::string missing = tmp.File("nothing-here.edb");
  ToolRun s = Run(tmp, kStat, {"-h", missing});
  CHECK(s.code == 3);
  CHECK(Has(s.err, missing));
  ToolRun f = Run(tmp, kFix, {"-validate", missing});
  CHECK(f.code == 3);
  CHECK(Has(f.err, missing));
  CHECK_FALSE(io::FileExists(missing));  // and nothing was created
}

TEST_CASE("tools: ember-stat reads a database this process holds open and writes to",
          "[tools][fork]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), Small());
  Table t = MakePeople(db.get(), 500);
  // Uncommitted rows, some of them on disk: the 64-page cache evicts while they go in.
  auto open_tx = VALUE_OR_FAIL(db->Begin());
  for (int i = 500; i < 1500; ++i) {
    VALUE_OR_FAIL(open_tx->Insert(t, {int64_t{i}, std::string(200, 'u')}));
  }
  ToolRun h = Run(tmp, kStat, {"-h", tmp.path()});
  REQUIRE(h.code == 0);
  CHECK(Has(h.out, "Page size               4096"));
  CHECK(Has(h.out, "Sweep interval          20000"));
  CHECK(Has(h.out, "not clean (open now"));
  CHECK_FALSE(Has(h.out, "people"));  // -h: the header only

  ToolRun a = Run(tmp, kStat, {"-a", tmp.path()});
  REQUIRE(a.code == 0);
  CHECK(Has(a.out, "people ("));
  CHECK(Has(a.out, "Records: 500,"));  // committed rows only
  CHECK(Has(a.out, "Index people_pk"));
  CHECK(Has(a.out, "Fill distribution"));

  REQUIRE_OK(open_tx->Commit());
  a = Run(tmp, kStat, {"-d", tmp.path()});
  REQUIRE(a.code == 0);
  CHECK(Has(a.out, "Records: 1500,"));
  CHECK_FALSE(Has(a.out, "Index people_pk"));  // -d: no indexes
  open_tx.reset();
  REQUIRE_OK(db->Close());

  a = Run(tmp, kStat, {"-i", "-noprogress", tmp.path()});  // closed now: the index is whole
  REQUIRE(a.code == 0);
  CHECK(Has(a.out, "Entries: 1500, distinct keys: 1500"));
  CHECK(a.err.empty());
}

TEST_CASE("tools: ember-stat reports a corrupt page and goes on", "[tools][fork]") {
  TempDb tmp;
  page::PageNo bad = page::kNoPage;
  {
    auto db = OpenOrFail(tmp.path(), Small());
    Table t = MakePeople(db.get(), 3000);
    // A record in the middle: its data page is neither the first nor the last of the table.
    const std::vector<RecordId> ids = Ids(db.get(), t);
    REQUIRE(ids.size() == 3000);
    bad = VALUE_OR_FAIL(internal::TableState::From(t)->relation->RecordPage(ids[1500].value));
    REQUIRE_OK(db->Close());
  }
  {
    std::fstream f(tmp.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(bad) * 4096 + 2000);
    f.write("garbage!", 8);
  }
  ToolRun a = Run(tmp, kStat, {"-a", "-retries", "1", tmp.path()});
  CHECK(a.code == 1);
  const std::string where = "page " + std::to_string(bad) + " of " + tmp.path();
  CHECK(Has(a.out, "ERROR: " + where));
  CHECK(Has(a.err, where));
  CHECK(Has(a.out, "checksum mismatch"));
  // It went on: the table's other pages and its index are reported.
  CHECK(Has(a.out, "Index people_pk"));
  CHECK(Has(a.out, "Entries: 3000"));
  CHECK_FALSE(Has(a.out, "Records: 3000,"));
  CHECK(Has(a.out, "Records: "));
  CHECK(Has(a.out, "1 problem(s)"));
}

TEST_CASE("tools: ember-fix -validate exits 0 on a clean database and 1 on a damaged one",
          "[tools][fork]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), Small());
    MakePeople(db.get(), 200);
    REQUIRE_OK(db->Close());
  }
  ToolRun v = Run(tmp, kFix, {"-validate", tmp.path()});
  CHECK(v.code == 0);
  CHECK(Has(v.out, "Errors: 0"));
  CHECK(Has(v.out, "Unreachable pages: 0"));
  {
    auto db = OpenOrFail(tmp.path(), Reopen());
    Table t = VALUE_OR_FAIL(db->GetTable("people"));
    auto tx = VALUE_OR_FAIL(db->Begin());
    auto hit = VALUE_OR_FAIL(tx->Lookup(VALUE_OR_FAIL(db->GetIndex("people_pk")), {int64_t{7}}));
    REQUIRE(hit.has_value());
    REQUIRE_OK(tx->Commit());
    testing::DamageVersion(static_cast<db::DatabaseImpl*>(db.get()), t, hit->first);
    REQUIRE_OK(db->Close());  // writes the damaged page
  }
  v = Run(tmp, kFix, {"-validate", "-full", tmp.path()});
  CHECK(v.code == 1);
  CHECK_FALSE(Has(v.out, "Errors: 0"));
  CHECK(Has(v.out, "does not decode"));  // the error itself, naming page and line
  // -mend frees nothing over errors.
  v = Run(tmp, kFix, {"-validate", "-mend", tmp.path()});
  CHECK(v.code == 1);
  CHECK(Has(v.out, "Freed nothing"));
}

TEST_CASE("tools: ember-fix -validate -mend frees what a killed writer leaked", "[tools][fork]") {
  TempDb tmp;
  Options o = Small();
  o.blob_temp_space = 0;  // temporary BLOBs in database pages: what a crash leaks
  o.use_io_uring = false;
  {
    auto db = OpenOrFail(tmp.path(), o);
    MakePeople(db.get(), 10);
    REQUIRE_OK(db->Close());
  }
  Options child_o = Reopen(o);
  testing::ForkAndKill(
      [&](const testing::ChildLink& link) {
        auto db = testing::ValueOrDie(Database::Open(tmp.path(), child_o), "open");
        auto tx = testing::ValueOrDie(db->Begin(), "begin");
        auto blob = testing::ValueOrDie(tx->CreateBlob(), "blob");
        // 100 pages through a 64-page cache: most are written (allocated in the PIP first).
        testing::OkOrDie(blob->Write(std::string(400000, 'x')), "write");
        const char ready = 'R';
        ssize_t ignored = ::write(link.ready_fd, &ready, 1);
        (void)ignored;
        while (true) ::pause();  // killed here, mid-transaction
      },
      /*delay_ms=*/0);
  ToolRun v = Run(tmp, kFix, {"-validate", tmp.path()});
  REQUIRE(v.code == 0);  // leaked pages are not errors
  CHECK(Has(v.out, "Errors: 0"));
  CHECK_FALSE(Has(v.out, "Unreachable pages: 0"));
  v = Run(tmp, kFix, {"-validate", "-mend", tmp.path()});
  REQUIRE(v.code == 0);
  CHECK(Has(v.out, "Freed: "));
  CHECK_FALSE(Has(v.out, "Freed: 0 "));
  v = Run(tmp, kFix, {"-validate", tmp.path()});
  CHECK(v.code == 0);
  CHECK(Has(v.out, "Errors: 0"));
  CHECK(Has(v.out, "Unreachable pages: 0"));
  auto db = OpenOrFail(tmp.path(), Reopen(o));
  testing::RequireValid(db.get(), "after ember-fix -mend");
  REQUIRE_OK(db->Close());
}

TEST_CASE("tools: ember-fix -sweep -par 2 removes a table's garbage", "[tools][fork]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), Small());
    Table t = MakePeople(db.get(), 1000);
    const std::vector<RecordId> ids = Ids(db.get(), t);
    REQUIRE(ids.size() == 1000);
    auto tx = VALUE_OR_FAIL(db->Begin());
    for (const RecordId& id : ids) {
      auto row = VALUE_OR_FAIL(tx->Get(t, id));
      REQUIRE(row.has_value());
      (*row)[1] = std::string("renamed");
      REQUIRE_OK(tx->Update(t, id, *row));
    }
    REQUIRE_OK(tx->Commit());
    TransactionOptions ns;
    ns.no_savepoint = true;
    auto dead = VALUE_OR_FAIL(db->Begin(ns));
    for (size_t i = 0; i < 300; ++i) {
      auto row = VALUE_OR_FAIL(dead->Get(t, ids[i]));
      REQUIRE(row.has_value());
      (*row)[1] = std::string("never");
      REQUIRE_OK(dead->Update(t, ids[i], *row));
    }
    REQUIRE_OK(dead->Rollback());
    const TableStats before = VALUE_OR_FAIL(db->GetTableStats(t));
    REQUIRE(before.back_versions > 0);
    REQUIRE(before.dead_versions > 0);
    REQUIRE_OK(db->Close());
  }
  ToolRun s = Run(tmp, kFix, {"-sweep", "-par", "2", tmp.path()});
  REQUIRE(s.code == 0);
  CHECK(Has(s.out, "Sweep: 2 worker(s)"));
  CHECK_FALSE(Has(s.out, "Versions removed: 0,"));
  ToolRun st = Run(tmp, kStat, {"-d", tmp.path()});
  CHECK(st.code == 0);
  CHECK(Has(st.out, "Records: 1000, versions: 1000, back versions: 0"));
  CHECK(Has(st.out, "dead versions: 0, garbage (est.): 0"));
  auto db = OpenOrFail(tmp.path(), Reopen());
  const TableStats after = VALUE_OR_FAIL(db->GetTableStats(VALUE_OR_FAIL(db->GetTable("people"))));
  CHECK(after.back_versions == 0);
  CHECK(after.dead_versions == 0);
  CHECK(after.records == 1000);
  REQUIRE_OK(db->Close());
}

TEST_CASE("tools: ember-fix -sweep_interval stores the interval in the header", "[tools][fork]") {
  TempDb tmp;
  {
    Options o = Small();
    o.sweep_interval.reset();  // the header's value
    auto db = OpenOrFail(tmp.path(), o);
    CHECK(db->stats().sweep_interval == 20000);  // Firebird's default at create
    REQUIRE_OK(db->Close());
  }
  ToolRun f = Run(tmp, kFix, {"-sweep_interval", "1234", tmp.path()});
  REQUIRE(f.code == 0);
  CHECK(Has(f.out, "Sweep interval set to 1234"));
  ToolRun h = Run(tmp, kStat, {"-h", tmp.path()});
  REQUIRE(h.code == 0);
  CHECK(Has(h.out, "Sweep interval          1234\n"));
  Options o = Reopen();
  o.sweep_interval.reset();
  {
    auto db = OpenOrFail(tmp.path(), o);
    CHECK(db->stats().sweep_interval == 1234);
    REQUIRE_OK(db->Close());
  }
  {
    Options over = o;
    over.sweep_interval = 7;  // this open only
    auto db = OpenOrFail(tmp.path(), over);
    CHECK(db->stats().sweep_interval == 7);
    REQUIRE_OK(db->Close());
  }
  {
    auto db = OpenOrFail(tmp.path(), o);
    CHECK(db->stats().sweep_interval == 1234);  // the override wrote nothing
    REQUIRE_OK(db->SetSweepInterval(0));
    CHECK(db->stats().sweep_interval == 0);
    REQUIRE_OK(db->Close());
  }
  h = Run(tmp, kStat, {"-h", "--", tmp.path()});
  CHECK(Has(h.out, "Sweep interval          0\n"));
}

TEST_CASE("tools: ember-fix refuses a database another process has open", "[tools][fork]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), Small());
  MakePeople(db.get(), 10);
  ToolRun f = Run(tmp, kFix, {"-validate", tmp.path()});
  CHECK(f.code == 4);
  CHECK(Has(f.err, "in use"));
  CHECK(Has(f.err, tmp.path()));
  f = Run(tmp, kFix, {"-sweep_interval", "5", tmp.path()});
  CHECK(f.code == 4);
  REQUIRE_OK(db->Close());
  CHECK(Run(tmp, kFix, {"-validate", tmp.path()}).code == 0);
}

#ifdef EMBER_BAK_PATH
const std::string kBak = EMBER_BAK_PATH;

TEST_CASE("tools: ember-bak backs up and restores, and says what is wrong", "[tools][fork]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), Small());
    MakePeople(db.get(), 500);
    REQUIRE_OK(db->Close());
  }
  ToolRun h = Run(tmp, kBak, {"--help"});
  CHECK(h.code == 0);
  for (const char* f : {"-b ", "-c ", "-par ", "-zstd ", "-page_size ", "-rep ", "Exit codes"}) {
    CHECK(Has(h.out, f));
  }
  CHECK(Run(tmp, kBak, {tmp.path(), tmp.File("x.ebk")}).code == 2);  // no -b / -c
  CHECK(Run(tmp, kBak, {"-b", "-c", tmp.path(), tmp.File("x.ebk")}).code == 2);
  CHECK(Run(tmp, kBak, {"-b", tmp.path()}).code == 2);  // one argument
  CHECK(Run(tmp, kBak, {"-c", "-page_size", "5000", "a", "b"}).code == 2);
  CHECK(Run(tmp, kBak, {"-b", "-par", "0", tmp.path(), tmp.File("x.ebk")}).code == 2);

  const std::string bak = tmp.File("people.ebk");
  ToolRun b = Run(tmp, kBak, {"-b", "-par", "2", "-noprogress", tmp.path(), bak});
  REQUIRE(b.code == 0);
  CHECK(Has(b.out, "rows: 500"));
  const std::string copy = tmp.File("copy.edb");
  ToolRun c = Run(tmp, kBak, {"-c", "-par", "2", "-page_size", "16384", "-noprogress", bak, copy});
  REQUIRE(c.code == 0);
  CHECK(Has(c.out, "rows: 500"));
  {
    auto db = OpenOrFail(copy, Reopen());
    auto tx = VALUE_OR_FAIL(db->Begin());
    Index pk = VALUE_OR_FAIL(db->GetIndex("people_pk"));
    auto hit = VALUE_OR_FAIL(tx->Lookup(pk, {int64_t{321}}));
    REQUIRE(hit.has_value());
    CHECK(std::get<std::string>(hit->second[1]) == "person 321");
    REQUIRE_OK(tx->Commit());
    testing::RequireValid(db.get(), "restored by ember-bak");
    REQUIRE_OK(db->Close());
  }
  // An existing database is kept unless -rep.
  ToolRun again = Run(tmp, kBak, {"-c", "-noprogress", bak, copy});
  CHECK(again.code == 3);
  CHECK(Has(again.err, "-rep"));
  CHECK(Run(tmp, kBak, {"-c", "-rep", "-noprogress", bak, copy}).code == 0);
  // A damaged backup: exit 1, the frame named, nothing restored.
  std::string bytes = testing::ReadFileBytes(bak);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  const std::string bad = tmp.File("bad.ebk");
  testing::WriteFileBytes(bad, bytes);
  ToolRun d = Run(tmp, kBak, {"-c", "-noprogress", bad, tmp.File("bad.edb")});
  CHECK(d.code == 1);
  CHECK(Has(d.err, "frame"));
  CHECK_FALSE(io::FileExists(tmp.File("bad.edb")));
  // A missing backup or database: exit 3 naming it.
  ToolRun m = Run(tmp, kBak, {"-c", "-noprogress", tmp.File("none.ebk"), tmp.File("n.edb")});
  CHECK(m.code == 3);
  CHECK(Has(m.err, "none.ebk"));
  // -b on a database this process holds: refused, exit 4.
  auto db = OpenOrFail(tmp.path(), Reopen());
  ToolRun busy = Run(tmp, kBak, {"-b", "-noprogress", tmp.path(), tmp.File("busy.ebk")});
  CHECK(busy.code == 4);
  CHECK(Has(busy.err, "in use"));
  CHECK(Has(busy.err, "Database::Backup"));
  REQUIRE_OK(db->Close());
}

// A key that fits 8 KB pages and not 4 KB ones: restored at 4 KB, the index cannot be built.
TEST_CASE("tools: ember-bak -c leaves an index it cannot build inactive, and -i and -strict",
          "[tools][fork]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), testing::CreateOptions(8192));
    Table t = MakePeople(db.get(), 100);
    VALUE_OR_FAIL(db->CreateIndex({"people_name", "people", {"name"}, false}));
    auto tx = VALUE_OR_FAIL(db->Begin());
    VALUE_OR_FAIL(tx->Insert(t, {int64_t{1000}, std::string(1000, 'n')}));
    REQUIRE_OK(tx->Commit());
    REQUIRE_OK(db->Close());
  }
  const std::string bak = tmp.File("people.ebk");
  REQUIRE(Run(tmp, kBak, {"-b", "-noprogress", tmp.path(), bak}).code == 0);
  ToolRun w = Run(tmp, kBak, {"-c", "-page_size", "4096", "-noprogress", bak, tmp.File("w.edb")});
  CHECK(w.code == 1);
  CHECK(Has(w.out, "rows: 101"));
  CHECK(Has(w.out, "Indexes built: 1 of 2"));
  CHECK(Has(w.err, "warning: index people_name restored inactive"));
  CHECK(Has(w.err, "longer than the maximum"));
  CHECK(io::FileExists(tmp.File("w.edb")));
  ToolRun s = Run(tmp, kBak,
                  {"-c", "-page_size", "4096", "-strict", "-noprogress", bak, tmp.File("s.edb")});
  CHECK(s.code == 1);
  CHECK(Has(s.err, "people_name"));
  CHECK(Has(s.err, "ember-bak -c -i"));
  CHECK_FALSE(io::FileExists(tmp.File("s.edb")));
  ToolRun i =
      Run(tmp, kBak, {"-c", "-page_size", "4096", "-i", "-noprogress", bak, tmp.File("i.edb")});
  CHECK(i.code == 0);
  CHECK(Has(i.out, "Indexes built: 0 of 2"));
  CHECK(i.err.empty());
  {
    Options o = testing::CreateOptions(4096);
    o.create_if_missing = false;
    auto db = OpenOrFail(tmp.File("i.edb"), o);
    CHECK(testing::IsError(db->SetIndexActive("people_name", true),
                           absl::StatusCode::kInvalidArgument, "people_name"));
    REQUIRE_OK(db->SetIndexActive("people_pk", true));
    testing::RequireValid(db.get(), "restored with -i");
    REQUIRE_OK(db->Close());
  }
  CHECK(Run(tmp, kBak, {"-c", "-i", "-strict", bak, tmp.File("x.edb")}).code == 2);
  CHECK(Run(tmp, kBak, {"-b", "-i", tmp.path(), tmp.File("x.ebk")}).code == 2);
}
#endif  // EMBER_BAK_PATH

// Builds before the empty BLOB was id 0 stored a BLOB of no bytes as a record: ember-stat
// counts those apart.
TEST_CASE("tools: ember-stat counts zero-length BLOB records an earlier build stored",
          "[tools][fork]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), Small());
    Table t = VALUE_OR_FAIL(db->CreateTable(
        {"docs", {{"id", ColumnType::kInt64, false}, {"body", ColumnType::kBlob}}}));
    auto* impl = static_cast<db::DatabaseImpl*>(db.get());
    auto tx = VALUE_OR_FAIL(db->Begin());
    impl->TEST_store_empty_blobs = true;
    for (int64_t i = 0; i < 3; ++i) {
      auto w = VALUE_OR_FAIL(tx->CreateBlob());
      VALUE_OR_FAIL(tx->Insert(t, {i, w->id()}));
    }
    impl->TEST_store_empty_blobs = false;
    auto w = VALUE_OR_FAIL(tx->CreateBlob());
    REQUIRE_OK(w->Write("body"));
    VALUE_OR_FAIL(tx->Insert(t, {int64_t{3}, w->id()}));
    auto empty = VALUE_OR_FAIL(tx->CreateBlob());  // stored as the empty BLOB: no record
    VALUE_OR_FAIL(tx->Insert(t, {int64_t{4}, empty->id()}));
    REQUIRE_OK(tx->Commit());
    REQUIRE_OK(db->Close());
  }
  ToolRun a = Run(tmp, kStat, {"-d", "-noprogress", tmp.path()});
  REQUIRE(a.code == 0);
  CHECK(Has(a.out, "BLOBs: 4,"));
  CHECK(Has(a.out, "BLOBs of zero bytes: 3"));
}

}  // namespace
}  // namespace ember

#endif  // EMBER_STAT_PATH && EMBER_FIX_PATH
