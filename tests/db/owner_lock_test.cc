// One owner per database file (io/owner_lock.h): a second Open of an open database fails with
// Unavailable, from this process (by any path) or from another one; the lock goes with Close,
// with the handle's destruction, with an Open that fails after taking it, and with a holder
// killed by SIGKILL.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::IsError;
using testing::OpenOrFail;
using testing::TempDb;

TableSchema CountsSchema() { return {"counts", {{"n", ColumnType::kInt64, false}}}; }

void InsertCommitted(Database* db, int64_t n) {
  Table t = VALUE_OR_FAIL(db->GetTable("counts"));
  auto txn = VALUE_OR_FAIL(db->Begin());
  REQUIRE_OK(txn->Insert(t, {n}).status());
  REQUIRE_OK(txn->Commit());
}

size_t CountRows(Database* db) {
  Table t = VALUE_OR_FAIL(db->GetTable("counts"));
  auto txn = VALUE_OR_FAIL(db->Begin());
  const size_t n = VALUE_OR_FAIL(testing::ScanAll(txn.get(), t)).size();
  REQUIRE_OK(txn->Commit());
  return n;
}

void RequireInUse(const absl::Status& s, const std::string& path, const char* who) {
  INFO("status: " << s.ToString());
  REQUIRE(IsError(s, absl::StatusCode::kUnavailable, "database " + path + " is in use"));
  REQUIRE(IsError(s, absl::StatusCode::kUnavailable, who));
}

TEST_CASE("owner lock: a second Open in the same process is refused", "[db][owner]") {
  TempDb tmp;
  auto first = OpenOrFail(tmp.path(), CreateOptions());
  REQUIRE_OK(first->CreateTable(CountsSchema()).status());
  InsertCommitted(first.get(), 1);

  // By the same path, by another spelling of it, through a hard link and a symbolic link:
  // device and inode decide.
  const std::string dotted = std::filesystem::path(tmp.path()).parent_path().string() + "/./" +
                             std::filesystem::path(tmp.path()).filename().string();
  const std::string hard = tmp.File("hard.edb");
  const std::string soft = tmp.File("soft.edb");
  std::filesystem::create_hard_link(tmp.path(), hard);
  std::filesystem::create_symlink(tmp.path(), soft);
  for (const std::string& p : {tmp.path(), dotted, hard, soft}) {
    CAPTURE(p);
    for (bool create : {false, true}) {
      Options o;
      o.create_if_missing = create;
      RequireInUse(Database::Open(p, o).status(), p, "another handle in this process");
    }
  }
  // The refused Opens changed nothing: the first handle goes on, and its commits survive.
  InsertCommitted(first.get(), 2);
  REQUIRE_OK(first->Close());
  auto again = OpenOrFail(tmp.path(), Options{});
  REQUIRE(CountRows(again.get()) == 2);
  RequireInUse(Database::Open(tmp.path(), Options{}).status(), tmp.path(), "in this process");
  REQUIRE_OK(again->Close());
}

TEST_CASE("owner lock: released by Close, by destruction, by a failed Open, by a crash",
          "[db][owner]") {
  TempDb tmp;
  REQUIRE_OK(OpenOrFail(tmp.path(), CreateOptions())->Close());
  SECTION("Close") {
    auto db = OpenOrFail(tmp.path(), Options{});
    REQUIRE_OK(db->Close());
    // The closed object still exists: its lock does not.
    REQUIRE_OK(OpenOrFail(tmp.path(), Options{})->Close());
  }
  SECTION("destruction without Close") {
    OpenOrFail(tmp.path(), Options{}).reset();
    REQUIRE_OK(OpenOrFail(tmp.path(), Options{})->Close());
  }
  SECTION("an Open that fails after taking the lock") {
    Options bad;
    bad.cache_pages = 3;  // refused by OpenFile, after the lock was taken
    REQUIRE(absl::IsInvalidArgument(Database::Open(tmp.path(), bad).status()));
    REQUIRE_OK(OpenOrFail(tmp.path(), Options{})->Close());
  }
  SECTION("a create that fails after creating the file") {
    const std::string fresh = tmp.File("fresh.edb");
    Options bad = CreateOptions();
    bad.cache_pages = 3;
    REQUIRE(absl::IsInvalidArgument(Database::Open(fresh, bad).status()));
    REQUIRE_FALSE(std::filesystem::exists(fresh));
    REQUIRE_OK(OpenOrFail(fresh, CreateOptions())->Close());
  }
  SECTION("a simulated crash") {
    auto db = OpenOrFail(tmp.path(), Options{});
    dynamic_cast<db::DatabaseImpl*>(db.get())->TEST_SimulateCrash();
    REQUIRE_OK(OpenOrFail(tmp.path(), Options{})->Close());
  }
}

// ---------------------------------------------------------------- another process

// The child's side: no Catch2 in a forked copy of the runner; failures are an exit code and a
// line on stderr.
constexpr int kChildFailed = 3;

[[noreturn]] void ChildFail(const std::string& what, const absl::Status& s) {
  const std::string m = "owner lock child: " + what + ": " + s.ToString() + "\n";
  ssize_t ignored = ::write(2, m.data(), m.size());
  (void)ignored;
  ::_exit(kChildFailed);
}

// Opens the database, says so on `ready_fd`, then commits rows until it is killed (so io_uring
// writes may be in flight when it dies) or orphaned.
[[noreturn]] void HoldAndCommit(const std::string& path, int ready_fd, pid_t parent) {
  Options o;
  o.use_io_uring = true;
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path, o);
  if (!db.ok()) ChildFail("open", db.status());
  absl::StatusOr<Table> t = (*db)->GetTable("counts");
  if (!t.ok()) ChildFail("table", t.status());
  bool told = false;
  for (int64_t n = 1; ::getppid() == parent && n < 10'000'000; ++n) {
    absl::StatusOr<std::unique_ptr<Transaction>> txn = (*db)->Begin();
    if (!txn.ok()) ChildFail("begin", txn.status());
    if (absl::Status s = (*txn)->Insert(*t, {n}).status(); !s.ok()) ChildFail("insert", s);
    if (absl::Status s = (*txn)->Commit(); !s.ok()) ChildFail("commit", s);
    if (!told) {  // the parent finds at least one committed row after the kill
      const char c = 'R';
      ssize_t ignored = ::write(ready_fd, &c, 1);
      (void)ignored;
      told = true;
    }
  }
  ::_exit(0);
}

TEST_CASE("owner lock: another process holding the database refuses Open until it is killed",
          "[db][owner][fork]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions());
    REQUIRE_OK(db->CreateTable(CountsSchema()).status());
    REQUIRE_OK(db->Close());
  }
  std::fflush(nullptr);
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    HoldAndCommit(tmp.path(), ready[1], parent);
  }
  ::close(ready[1]);
  char c = 0;
  struct pollfd pfd = {ready[0], POLLIN, 0};
  const bool opened = ::poll(&pfd, 1, 60000) == 1 && ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  // While the child holds it, every Open is refused, whatever the options.
  for (bool create : {false, true}) {
    Options o;
    o.create_if_missing = create;
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(tmp.path(), o);
    if (opened) RequireInUse(db.status(), tmp.path(), "another process");
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("the child's exit code (its message is on stderr): "
       << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  REQUIRE(opened);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  // The killed holder's lock went with it: the reopen right after succeeds and finds what it
  // committed.
  auto db = OpenOrFail(tmp.path(), Options{});
  REQUIRE(CountRows(db.get()) >= 1);
  REQUIRE(VALUE_OR_FAIL(db->Validate()).ok());
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember
