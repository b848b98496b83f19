// Helpers shared by the BLOB tests (blob/blob_test.cc, crash/blob_crash_test.cc): reproducible
// BLOB contents, and keeping EMBER_TMP from redirecting the temp space a test configured.
//
// Header-only on purpose: tests/CMakeLists.txt compiles only *_test.cc files.
#pragma once
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace ember::testing {

// SplitMix64's output function: every input bit affects every output bit.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t SplitMix(uint64_t* x) { return Mix64(*x += 0x9E3779B97F4A7C15ull); }

// `n` pseudo-random bytes, different for every seed and every offset: a misplaced page, or a page
// of zeros, shows.
inline std::string Pattern(uint64_t seed, size_t n) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x2545F4914F6CDD1Dull + 17;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = SplitMix(&x);
    std::memcpy(&s[i], &v, 8);
  }
  if (i < n) {
    const uint64_t v = SplitMix(&x);
    std::memcpy(&s[i], &v, n - i);
  }
  return s;
}

// Options::temp_directories count only without EMBER_TMP (TempSpace::ResolveDirs), so a test
// that configures its own temp directory unsets it while it runs (restored afterwards; Catch2
// runs tests one by one). A forked child inherits the unset variable.
class ScopedNoEmberTmp {
 public:
  ScopedNoEmberTmp() {
    if (const char* v = std::getenv("EMBER_TMP")) saved_ = v;
    ::unsetenv("EMBER_TMP");
  }
  ~ScopedNoEmberTmp() {
    if (saved_) ::setenv("EMBER_TMP", saved_->c_str(), 1);
  }
  ScopedNoEmberTmp(const ScopedNoEmberTmp&) = delete;
  ScopedNoEmberTmp& operator=(const ScopedNoEmberTmp&) = delete;

 private:
  std::optional<std::string> saved_;
};

}  // namespace ember::testing
