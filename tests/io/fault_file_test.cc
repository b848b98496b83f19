// FaultFile: injected write and sync failures, and the power-loss model (DropUnsynced brings the
// file back to exactly what the last successful Sync() made durable).
#include <catch2/catch.hpp>

#include <cerrno>
#include <random>
#include <string>
#include <vector>

#include "engine/io/fault_file.h"
#include "tests/io/temp_dir.h"

using namespace ember::io;
using ember::testing::TempDir;

namespace {

constexpr size_t kPage = 4096;

std::unique_ptr<FaultFile> MakeFaultFile(const TempDir& dir) {
  FileOptions opts;
  opts.mode = OpenMode::kCreateNew;
  auto base = OpenPosixFile(dir.File("db.edb"), opts);
  REQUIRE(base.ok());
  return std::make_unique<FaultFile>(std::move(*base));
}

std::string ReadAll(File& f) {
  auto size = f.Size();
  REQUIRE(size.ok());
  std::string s(*size, '\0');
  REQUIRE(f.Read(0, s.data(), s.size()).ok());
  return s;
}

absl::Status WritePage(File& f, uint64_t page, char fill) {
  const std::string data(kPage, fill);
  return f.Write(page * kPage, data.data(), data.size());
}

}  // namespace

TEST_CASE("fault file: nth write fails with EIO and leaves the file alone", "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir);
  REQUIRE(WritePage(*f, 0, 'a').ok());
  REQUIRE(WritePage(*f, 1, 'a').ok());
  const std::string before = ReadAll(*f);

  f->FailWriteAfter(2, EIO);
  CHECK(WritePage(*f, 2, 'b').ok());  // 1st from now
  absl::Status s = WritePage(*f, 0, 'c');  // 2nd: fails
  CHECK(absl::IsInternal(s));
  CHECK(s.message().find(f->path()) != absl::string_view::npos);
  std::string expected = before + std::string(kPage, 'b');
  CHECK(ReadAll(*f) == expected);  // page 0 still 'a'
  CHECK(WritePage(*f, 0, 'd').ok());  // later writes succeed again
  expected.replace(0, kPage, kPage, 'd');
  CHECK(ReadAll(*f) == expected);
  CHECK(f->writes() == 5);
}

TEST_CASE("fault file: ENOSPC is ResourceExhausted; sticky fails every later write",
          "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir);
  f->FailWriteAfter(1, ENOSPC);
  CHECK(absl::IsResourceExhausted(WritePage(*f, 0, 'a')));
  CHECK(*f->Size() == 0);
  CHECK(WritePage(*f, 0, 'a').ok());

  f->FailWriteAfter(2, ENOSPC, /*sticky=*/true);
  CHECK(WritePage(*f, 1, 'b').ok());
  for (int i = 0; i < 5; ++i) CHECK(absl::IsResourceExhausted(WritePage(*f, 2 + i, 'c')));
  CHECK(ReadAll(*f) == std::string(kPage, 'a') + std::string(kPage, 'b'));
  f->FailWriteAfter(0, 0);  // "disk freed"
  CHECK(WritePage(*f, 2, 'c').ok());
}

TEST_CASE("fault file: WriteBatch counts each request as a write", "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir);
  std::vector<std::string> data;
  std::vector<WriteRequest> reqs;
  for (int i = 0; i < 5; ++i) data.emplace_back(kPage, static_cast<char>('0' + i));
  for (int i = 0; i < 5; ++i) reqs.push_back({i * kPage, data[i].data(), kPage});

  f->FailWriteAfter(3, EIO);
  CHECK(absl::IsInternal(f->WriteBatch(reqs)));
  CHECK(f->writes() == 5);
  const std::string got = ReadAll(*f);
  REQUIRE(got.size() == 5 * kPage);
  for (int i = 0; i < 5; ++i) {
    const char want = i == 2 ? '\0' : static_cast<char>('0' + i);  // the 3rd was never written
    CHECK(got.substr(i * kPage, kPage) == std::string(kPage, want));
  }
}

TEST_CASE("fault file: nth sync fails and keeps the writes unsynced", "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir);
  REQUIRE(WritePage(*f, 0, 'a').ok());
  f->FailSyncAfter(2, EIO);
  REQUIRE(f->Sync().ok());
  const std::string durable = ReadAll(*f);

  REQUIRE(WritePage(*f, 1, 'b').ok());
  absl::Status s = f->Sync();
  CHECK(absl::IsInternal(s));
  CHECK(f->syncs() == 2);
  // The failed sync made nothing durable: a crash now loses page 1.
  REQUIRE(f->DropUnsynced().ok());
  CHECK(ReadAll(*f) == durable);

  REQUIRE(WritePage(*f, 1, 'c').ok());
  CHECK(f->Sync().ok());  // only the 2nd failed
  REQUIRE(f->DropUnsynced().ok());
  CHECK(ReadAll(*f) == durable + std::string(kPage, 'c'));

  f->FailSyncAfter(1, ENOSPC);
  CHECK(absl::IsResourceExhausted(f->Sync()));
}

TEST_CASE("fault file: DropUnsynced restores the last sync exactly", "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir);
  REQUIRE(WritePage(*f, 0, 'a').ok());
  REQUIRE(WritePage(*f, 1, 'a').ok());
  REQUIRE(f->Sync().ok());
  const std::string durable = ReadAll(*f);

  // Overwrites, overlapping writes, a write straddling the end, growth, a hole, a truncation.
  REQUIRE(WritePage(*f, 0, 'b').ok());
  const std::string straddle(kPage, 'c');
  REQUIRE(f->Write(kPage + kPage / 2, straddle.data(), straddle.size()).ok());
  REQUIRE(WritePage(*f, 0, 'd').ok());
  REQUIRE(WritePage(*f, 9, 'e').ok());
  REQUIRE(f->Truncate(kPage / 2).ok());
  REQUIRE(f->Allocate(20 * kPage).ok());
  CHECK(*f->Size() == 20 * kPage);

  REQUIRE(f->DropUnsynced().ok());
  CHECK(*f->Size() == 2 * kPage);
  CHECK(ReadAll(*f) == durable);
  REQUIRE(f->DropUnsynced().ok());  // nothing left to undo
  CHECK(ReadAll(*f) == durable);
}

TEST_CASE("fault file: random writes across many syncs", "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir);
  std::mt19937_64 rng(5);
  std::string durable;  // content after the last successful sync
  for (int round = 0; round < 30; ++round) {
    const int ops = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < ops; ++i) {
      switch (rng() % 8) {
        case 0: REQUIRE(f->Truncate(rng() % (12 * kPage)).ok()); break;
        case 1: REQUIRE(f->Allocate(rng() % (12 * kPage)).ok()); break;
        default: {
          std::string data(1 + rng() % (2 * kPage), static_cast<char>('A' + rng() % 26));
          REQUIRE(f->Write(rng() % (10 * kPage), data.data(), data.size()).ok());
        }
      }
    }
    if (rng() % 3 == 0) {
      INFO("round " << round);
      REQUIRE(f->DropUnsynced().ok());  // crash
      REQUIRE(ReadAll(*f) == durable);
    } else {
      REQUIRE(f->Sync().ok());
      durable = ReadAll(*f);
    }
  }
}
