// The maximum index key: readable through the API, and a key over it is
// refused by Insert and Update with InvalidArgument while the transaction stays usable - for a
// value just over the maximum, one between the maximum and the size at which values go out of
// line, and one stored out of line.
#include <catch2/catch.hpp>

#include <string>

#include "ember/ember.h"
#include "tests/db/db_test_util.h"

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
  Table t = VALUE_OR_FAIL(db->CreateTable(
      {"s", {{"id", ColumnType::kInt64, false}, {"name", ColumnType::kString}}}));
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

}  // namespace
}  // namespace ember
