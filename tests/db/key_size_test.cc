// The maximum index key: readable through the API, and a key over it is
// refused by Insert and Update with InvalidArgument while the transaction stays usable - for a
// value just over the maximum, one between the maximum and the size at which values go out of
// line, and one stored out of line.
#include <catch2/catch.hpp>
#include <string>

#include "ember/ember.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::IsError;

TEST_CASE("key size: the maximum is readable and keys over it are refused cleanly",
          "[keysize][index]") {
  const uint32_t ps = GENERATE(4096u, 8192u);
  CAPTURE(ps);
  testing::TempDb tmp;
  auto db = testing::OpenOrFail(tmp.path(), testing::CreateOptions(ps, 128));
  const uint32_t max = db->max_key_size();
  CHECK(max == (ps == 4096 ? 789u : 1608u));  // as database.h states
  Table t = VALUE_OR_FAIL(
      db->CreateTable({"s", {{"id", ColumnType::kInt64, false}, {"name", ColumnType::kString}}}));
  Index by_name = VALUE_OR_FAIL(db->CreateIndex({"s_name", "s", {"name"}, true}));
  // A string key column takes 3 bytes besides its own (no zero bytes here).
  const std::string longest(max - 3, 'k');
  auto tx = VALUE_OR_FAIL(db->Begin());
  const RecordId kept = VALUE_OR_FAIL(tx->Insert(t, {int64_t{1}, longest}));
  const RecordId other = VALUE_OR_FAIL(tx->Insert(t, {int64_t{2}, std::string("short")}));
  const size_t over = GENERATE_COPY(size_t{max - 2}, size_t{max + 100}, size_t{ps / 4 + 10});
  CAPTURE(over);
  const std::string too_long(over, 'x');
  absl::Status ins = tx->Insert(t, {int64_t{3}, too_long}).status();
  INFO(ins.ToString());
  CHECK(IsError(ins, absl::StatusCode::kInvalidArgument, "s_name"));
  absl::Status upd = tx->Update(t, other, {int64_t{2}, too_long});
  INFO(upd.ToString());
  CHECK(IsError(upd, absl::StatusCode::kInvalidArgument, "s_name"));
  // The transaction goes on: more changes, and the commit.
  REQUIRE_OK(tx->Insert(t, {int64_t{4}, std::string("four")}).status());
  REQUIRE_OK(tx->Update(t, other, {int64_t{2}, std::string("two")}));
  REQUIRE_OK(tx->Commit());

  auto rd = VALUE_OR_FAIL(db->Begin());
  auto rows = VALUE_OR_FAIL(testing::ScanAll(rd.get(), t));
  CHECK(rows.size() == 3);
  auto hit = VALUE_OR_FAIL(rd->Lookup(by_name, {longest}));
  REQUIRE(hit.has_value());
  CHECK(hit->first == kept);
  auto two = VALUE_OR_FAIL(rd->Lookup(by_name, {std::string("two")}));
  REQUIRE(two.has_value());
  CHECK(two->first == other);
  CHECK_FALSE(VALUE_OR_FAIL(rd->Lookup(by_name, {std::string("short")})).has_value());
  REQUIRE_OK(rd->Commit());
  auto rep = VALUE_OR_FAIL(db->Validate());
  INFO((rep.errors.empty() ? std::string() : rep.errors[0]));
  CHECK(rep.ok());
  REQUIRE_OK(db->Close());
}

TEST_CASE("key size: an index built over rows with a key too long is refused and leaves nothing",
          "[keysize][index]") {
  const auto method =
      GENERATE(IndexBuildOptions::Method::kBulk, IndexBuildOptions::Method::kInsert);
  CAPTURE(static_cast<int>(method));
  IndexBuildOptions build;
  build.method = method;
  testing::TempDb tmp;
  auto db = testing::OpenOrFail(tmp.path(), testing::CreateOptions(4096, 128));
  const uint32_t max = db->max_key_size();
  Table t = VALUE_OR_FAIL(
      db->CreateTable({"s", {{"id", ColumnType::kInt64, false}, {"name", ColumnType::kString}}}));
  // Just over as a key (3 + max + 1 bytes), and long enough to be stored out of line (a BLOB
  // id in the record, which must not be taken for the key).
  const size_t len = GENERATE_COPY(size_t{max + 1}, size_t{4096 / 4 + 10});
  CAPTURE(len);
  const std::string too_long(len, 'x');
  RecordId r1;
  {  // with no index on name yet, nothing checks the length
    auto tx = VALUE_OR_FAIL(db->Begin());
    r1 = VALUE_OR_FAIL(tx->Insert(t, {int64_t{1}, too_long}));
    REQUIRE_OK(tx->Insert(t, {int64_t{2}, std::string("short")}).status());
    REQUIRE_OK(tx->Commit());
  }
  absl::Status s = db->CreateIndex({"s_name", "s", {"name"}, false}, build).status();
  INFO(s.ToString());
  CHECK(IsError(s, absl::StatusCode::kInvalidArgument, "s_name"));
  CHECK(absl::IsNotFound(db->GetIndex("s_name").status()));
  // A version only an older snapshot sees still counts: it could be read through the index.
  auto old_reader = VALUE_OR_FAIL(db->Begin());
  REQUIRE(VALUE_OR_FAIL(old_reader->Get(t, r1)).has_value());
  {
    auto tx = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(tx->Update(t, r1, {int64_t{1}, std::string("fine now")}));
    REQUIRE_OK(tx->Commit());
  }
  s = db->CreateIndex({"s_name", "s", {"name"}, false}, build).status();
  INFO(s.ToString());
  CHECK(IsError(s, absl::StatusCode::kInvalidArgument, "s_name"));
  REQUIRE_OK(old_reader->Commit());
  // Once no snapshot needs it and it is collected, the index builds. A rolled-back version
  // with a long key needs no entry at all: nobody reads it.
  REQUIRE_OK(db->Sweep().status());
  {
    TransactionOptions to;
    to.no_savepoint = true;  // the rollback marks the transaction dead and leaves its version
    auto tx = VALUE_OR_FAIL(db->Begin(to));
    REQUIRE_OK(tx->Update(t, r1, {int64_t{1}, too_long}));
    REQUIRE_OK(tx->Rollback());
  }
  Index ix = VALUE_OR_FAIL(db->CreateIndex({"s_name", "s", {"name"}, false}, build));
  auto tx = VALUE_OR_FAIL(db->Begin());
  auto hit = VALUE_OR_FAIL(tx->Lookup(ix, {std::string("fine now")}));
  REQUIRE(hit.has_value());
  CHECK(hit->first == r1);
  REQUIRE_OK(tx->Commit());
  testing::RequireValid(db.get(), "after the builds");
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember
