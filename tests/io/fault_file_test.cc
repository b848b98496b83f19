// FaultFile: injected write, sync and read failures and short writes, and the power-loss model
// (DropUnsynced brings the file back to exactly what the last successful Sync() made durable).
// The write faults act in the file below the write-path choice, so every test runs over the pwrite
// path and over io_uring, and checks that the writes really took the path it claims.
#include "tests/support/fault_file.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <random>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

using namespace ember::io;
using ember::testing::TempDir;

namespace {

constexpr size_t kPage = 4096;

// Over a PosixFile writing batches through io_uring or through the pwrite loop.
std::unique_ptr<FaultFile> MakeFaultFile(const TempDir& dir, bool uring) {
  FileOptions opts;
  opts.mode = OpenMode::kCreateNew;
  opts.use_io_uring = uring;
  auto base = OpenPosixFile(dir.File("db.edb"), opts);
  REQUIRE(base.ok());
  return std::make_unique<FaultFile>(std::move(*base));
}

// Batches of `f` went through the path claimed, none through the other (single Writes always use
// pwrite, so a test of the io_uring path writes through WriteBatch only).
void RequireBatchPath(const FaultFile& f, bool uring) {
  const WritePathCounts c = f.write_path_counts();
  INFO("io_uring claimed: " << uring << "; requests: " << c.io_uring << " io_uring, " << c.pwrite
                            << " pwrite");
  REQUIRE((uring ? c.io_uring : c.pwrite) > 0);
  REQUIRE((uring ? c.pwrite : c.io_uring) == 0);
}

// `n` pages of kPage bytes, page i filled with the character first + i.
std::vector<std::string> PagesOf(int n, char first) {
  std::vector<std::string> data;
  for (int i = 0; i < n; ++i) data.emplace_back(kPage, static_cast<char>(first + i));
  return data;
}

absl::Status WriteBatchOfPages(File& f, uint64_t first_page, const std::vector<std::string>& data) {
  std::vector<WriteRequest> reqs;
  for (size_t i = 0; i < data.size(); ++i) {
    reqs.push_back({(first_page + i) * kPage, data[i].data(), data[i].size()});
  }
  return f.WriteBatch(reqs);
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
  auto f = MakeFaultFile(dir, /*uring=*/false);
  REQUIRE(WritePage(*f, 0, 'a').ok());
  REQUIRE(WritePage(*f, 1, 'a').ok());
  const std::string before = ReadAll(*f);

  f->FailWriteAfter(2, EIO);
  CHECK(WritePage(*f, 2, 'b').ok());       // 1st from now
  absl::Status s = WritePage(*f, 0, 'c');  // 2nd: fails
  CHECK(absl::IsInternal(s));
  CHECK(s.message().find(f->path()) != absl::string_view::npos);
  std::string expected = before + std::string(kPage, 'b');
  CHECK(ReadAll(*f) == expected);     // page 0 still 'a'
  CHECK(WritePage(*f, 0, 'd').ok());  // later writes succeed again
  expected.replace(0, kPage, kPage, 'd');
  CHECK(ReadAll(*f) == expected);
  CHECK(f->writes() == 5);
}

TEST_CASE("fault file: ENOSPC is ResourceExhausted, sticky fails every later write",
          "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir, /*uring=*/false);
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

TEST_CASE("fault file: WriteBatch counts each request as a write, on either path", "[io][fault]") {
  const bool uring = GENERATE(false, true);
  CAPTURE(uring);
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir, uring);
  const std::vector<std::string> data = PagesOf(5, '0');

  f->FailWriteAfter(3, EIO);
  CHECK(absl::IsInternal(WriteBatchOfPages(*f, 0, data)));
  CHECK(f->writes() == 5);
  RequireBatchPath(*f, uring);
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
  auto f = MakeFaultFile(dir, /*uring=*/false);
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
  auto f = MakeFaultFile(dir, /*uring=*/false);
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
  auto f = MakeFaultFile(dir, /*uring=*/false);
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

TEST_CASE("fault file: ENOSPC in the middle of an io_uring batch fails only that request",
          "[io][fault]") {
  const bool uring = GENERATE(false, true);
  CAPTURE(uring);
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir, uring);
  const std::vector<std::string> data = PagesOf(8, 'a');
  f->FailWriteAfter(4, ENOSPC);
  CHECK(absl::IsResourceExhausted(WriteBatchOfPages(*f, 0, data)));
  RequireBatchPath(*f, uring);
  const std::string got = ReadAll(*f);
  REQUIRE(got.size() == 8 * kPage);
  for (size_t i = 0; i < 8; ++i) {
    CHECK(got.substr(i * kPage, kPage) == (i == 3 ? std::string(kPage, '\0') : data[i]));
  }
  // The batch is over: a power loss undoes the seven writes that went through.
  REQUIRE(f->DropUnsynced().ok());
  CHECK(ReadAll(*f).empty());
}

// The kernel may write less than asked; the pwrite loop and the io_uring writer must both write
// the rest. Cut at several points: inside the first 512 bytes, at a 512-byte boundary, one byte
// short of the end, for the first request of a batch and for one in the middle of a run of
// adjacent pages (which io_uring writes with one writev).
TEST_CASE("fault file: a short write is completed by the file, on either path", "[io][fault]") {
  const bool uring = GENERATE(false, true);
  const size_t cut = GENERATE(size_t{1}, size_t{100}, size_t{2048}, kPage - 1);
  const uint64_t nth = GENERATE(uint64_t{1}, uint64_t{3});
  CAPTURE(uring, cut, nth);
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir, uring);
  std::mt19937_64 rng(cut * 7 + nth);
  std::vector<std::string> data;
  for (int i = 0; i < 6; ++i) {
    std::string page(kPage, '\0');
    for (char& c : page) c = static_cast<char>(rng());
    data.push_back(std::move(page));
  }
  f->ShortWriteAfter(nth, cut);
  REQUIRE(WriteBatchOfPages(*f, 2, data).ok());
  RequireBatchPath(*f, uring);
  CHECK(f->writes() == 6);
  std::string want(2 * kPage, '\0');
  for (const std::string& d : data) want += d;
  CHECK(ReadAll(*f) == want);
  // A single Write (the pwrite loop) cut short as well.
  f->ShortWriteAfter(1, cut);
  REQUIRE(f->Write(0, data[5].data(), kPage).ok());
  want.replace(0, kPage, data[5]);
  CHECK(ReadAll(*f) == want);
}

TEST_CASE("fault file: nth read fails, sticky fails every later read", "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = MakeFaultFile(dir, /*uring=*/false);
  REQUIRE(WritePage(*f, 0, 'a').ok());
  REQUIRE(WritePage(*f, 1, 'b').ok());
  std::string buf(kPage, '\0');
  f->FailReadAfter(2, EIO);
  CHECK(f->Read(0, buf.data(), kPage).ok());
  absl::Status s = f->Read(kPage, buf.data(), kPage);
  CHECK(absl::IsInternal(s));
  CHECK(s.message().find(f->path()) != absl::string_view::npos);
  CHECK(f->Read(kPage, buf.data(), kPage).ok());
  CHECK(buf == std::string(kPage, 'b'));

  f->FailReadAfter(1, EIO, /*sticky=*/true);
  std::string two(2 * kPage, '\0');
  uint8_t* bufs[] = {reinterpret_cast<uint8_t*>(two.data()),
                     reinterpret_cast<uint8_t*>(two.data() + kPage)};
  CHECK(absl::IsInternal(f->ReadBlocks(0, kPage, bufs)));
  CHECK(absl::IsInternal(f->Read(0, buf.data(), kPage)));
  f->FailReadAfter(0, 0);
  REQUIRE(f->ReadBlocks(0, kPage, bufs).ok());
  CHECK(two == std::string(kPage, 'a') + std::string(kPage, 'b'));
  CHECK(f->reads() == 6);
}

// A file that does not forward SetWriteHook: FaultFile cannot see its writes, and says so
// instead of letting them through uncounted.
class NoHookFile : public File {
 public:
  explicit NoHookFile(std::unique_ptr<File> base) : base_(std::move(base)) {}
  absl::Status Read(uint64_t o, void* b, size_t n) override { return base_->Read(o, b, n); }
  absl::Status Write(uint64_t o, const void* d, size_t n) override { return base_->Write(o, d, n); }
  absl::Status WriteBatch(std::span<const WriteRequest> r) override { return base_->WriteBatch(r); }
  absl::Status Sync() override { return base_->Sync(); }
  absl::Status Allocate(uint64_t n) override { return base_->Allocate(n); }
  absl::Status Truncate(uint64_t n) override { return base_->Truncate(n); }
  absl::StatusOr<uint64_t> Size() override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  std::unique_ptr<File> base_;
};

TEST_CASE("fault file: over a file that takes no write hook, writes fail loudly", "[io][fault]") {
  TempDir dir;
  REQUIRE(dir.ok());
  FileOptions opts;
  opts.mode = OpenMode::kCreateNew;
  auto base = OpenPosixFile(dir.File("db.edb"), opts);
  REQUIRE(base.ok());
  FaultFile f(std::make_unique<NoHookFile>(std::move(*base)));
  absl::Status s = WritePage(f, 0, 'a');
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message().find("write hook") != absl::string_view::npos);
  const std::string page(kPage, 'b');
  const WriteRequest req{0, page.data(), kPage};
  CHECK(absl::IsFailedPrecondition(f.WriteBatch(std::span<const WriteRequest>(&req, 1))));
  CHECK(*f.Size() == 0);
}
