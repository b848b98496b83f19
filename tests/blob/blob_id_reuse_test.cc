// A stored BLOB id freed inside a transaction (the row that stored it undone by a savepoint
// rollback) can be given to the next BLOB the transaction stores. If the transaction had read
// the first BLOB, the new one must still read as itself, not as the first one (the transaction
// keeps decoded headers by id). The model test (tests/db/model_test.cc) covers this at random.
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "ember/ember.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

std::string ReadWhole(Transaction* t, BlobId id) {
  std::unique_ptr<BlobReader> r = VALUE_OR_FAIL(t->OpenBlob(id));
  std::string out(r->size(), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const size_t n = VALUE_OR_FAIL(r->Read(out.data() + got, out.size() - got));
    if (n == 0) break;
    got += n;
  }
  out.resize(got);
  return out;
}

TEST_CASE("blob: an id freed by a savepoint rollback and reused reads as the new BLOB", "[blob]") {
  const bool empty_first = GENERATE(false, true);
  const bool statement = GENERATE(false, true);  // undone by a failed statement instead
  CAPTURE(empty_first, statement);
  testing::TempDb tmp;
  std::unique_ptr<Database> db = testing::OpenOrFail(tmp.path(), testing::CreateOptions(4096, 64));
  const Table t = VALUE_OR_FAIL(
      db->CreateTable({"x", {{"id", ColumnType::kInt64, false}, {"b", ColumnType::kBlob}}}));
  std::unique_ptr<Transaction> w = VALUE_OR_FAIL(db->Begin());
  BlobId a{};
  REQUIRE_OK(w->Append(&a, std::string(3000, 'a')));
  const RecordId r1 = VALUE_OR_FAIL(w->Insert(t, Row{int64_t{1}, a}));
  REQUIRE_OK(w->Commit());

  w = VALUE_OR_FAIL(db->Begin());
  const std::string first_bytes = empty_first ? std::string() : std::string(20, 'e');
  BlobId first{};
  auto store_and_read_first = [&]() -> absl::Status {
    std::unique_ptr<BlobWriter> bw = VALUE_OR_FAIL(w->CreateBlob());
    REQUIRE_OK(bw->Write(first_bytes));
    const RecordId r2 = VALUE_OR_FAIL(w->Insert(t, Row{int64_t{2}, bw->id()}));
    first = std::get<BlobId>((*VALUE_OR_FAIL(w->Get(t, r2)))[1]);
    REQUIRE(ReadWhole(w.get(), first) == first_bytes);  // its header is now cached
    return absl::AbortedError("undo the insert");
  };
  if (statement) {
    REQUIRE(absl::IsAborted(w->RunStatement(store_and_read_first)));
  } else {
    REQUIRE_OK(w->Savepoint("s"));
    REQUIRE(absl::IsAborted(store_and_read_first()));
    REQUIRE_OK(w->RollbackToSavepoint("s"));
  }

  const std::string bytes(11182, 'q');
  BlobId b{};
  REQUIRE_OK(w->Append(&b, bytes));
  REQUIRE_OK(w->Update(t, r1, Row{int64_t{1}, b}));
  const BlobId second = std::get<BlobId>((*VALUE_OR_FAIL(w->Get(t, r1)))[1]);
  // The case this test is about; if the engine stops reusing the id, it still must read right.
  INFO("first stored id " << first.value << ", second " << second.value);
  CHECK(ReadWhole(w.get(), second) == bytes);
  REQUIRE_OK(w->Commit());
  std::unique_ptr<Transaction> r = VALUE_OR_FAIL(db->Begin());
  CHECK(ReadWhole(r.get(), std::get<BlobId>((*VALUE_OR_FAIL(r->Get(t, r1)))[1])) == bytes);
  REQUIRE_OK(r->Commit());
}

}  // namespace
}  // namespace ember
