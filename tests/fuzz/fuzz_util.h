// Helpers shared by the libFuzzer targets in tests/fuzz/: a scratch directory on tmpfs, writing
// seed inputs on request, and a check that stops the run (a finding) with a message.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/options.h"

namespace ember::fuzz {

// A finding: prints what is wrong and aborts, so libFuzzer saves the input as a crash.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}
#define FUZZ_CHECK(cond, msg)                                                     \
  do {                                                                            \
    if (!(cond)) ::ember::fuzz::Fail(std::string(#cond ": ") + std::string(msg)); \
  } while (0)

// Setup a target cannot go on without (a template database, seeds): an error is a finding.
inline void MustOk(const absl::Status& s, const char* what) {
  if (!s.ok()) Fail(std::string(what) + ": " + s.ToString());
}
template <class T>
T Must(absl::StatusOr<T> v, const char* what) {
  MustOk(v.status(), what);
  return std::move(*v);
}

// A directory of this process's own on tmpfs when there is one (targets that make database
// files run hundreds of times a second), removed at exit.
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    if (const char* t = std::getenv("EMBER_FUZZ_TMP"); t && *t) base = t;
    std::string d = base + "/ember-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    static struct Cleanup {
      std::string d;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
      }
    } cleanup{d};
    return d;
  }();
  return dir;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The options of the targets' small databases: 4 KiB pages, a small cache (pages come and go
// as the run goes), no syncs, temp space in the scratch directory.
inline Options SmallDbOptions(uint32_t cache_pages) {
  Options o;
  o.page_size = 4096;
  o.cache_pages = cache_pages;
  o.forced_writes = false;
  o.temp_directories = {ScratchDir()};
  return o;
}

// With EMBER_FUZZ_MAKE_SEEDS=DIR in the environment a target writes its seed inputs (valid
// encodings made by the engine itself) to DIR and exits: `tools/dev fuzz-seeds` keeps
// tests/fuzz/corpus/ in step with the formats.
inline void MaybeWriteSeeds(const std::vector<std::string>& seeds) {
  const char* dir = std::getenv("EMBER_FUZZ_MAKE_SEEDS");
  if (dir == nullptr || *dir == '\0') return;
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < seeds.size(); ++i) {
    WriteFile(std::string(dir) + "/seed-" + std::to_string(i), seeds[i]);
  }
  std::fprintf(stderr, "wrote %zu seeds to %s\n", seeds.size(), dir);
  std::exit(0);
}

// Reads the fuzzer's bytes front to back: fixed-size fields, then what is left.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint8_t Byte() { return p_ < end_ ? *p_++ : 0; }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{Byte()} << (8 * i);
    return v;
  }
  // Up to n bytes.
  std::string_view Bytes(size_t n) {
    const size_t k = std::min<size_t>(n, static_cast<size_t>(end_ - p_));
    std::string_view s(reinterpret_cast<const char*>(p_), k);
    p_ += k;
    return s;
  }
  std::string_view Rest() { return Bytes(static_cast<size_t>(end_ - p_)); }
  bool empty() const { return p_ >= end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace ember::fuzz
