// Helpers for every test that writes BLOBs, database or not: reproducible BLOB contents, and
// keeping EMBER_TMP from redirecting the temp space a test configured.
#pragma once
#include <cstddef>
#include <cstdint>
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
std::string Pattern(uint64_t seed, size_t n);

// Options::temp_directories count only without EMBER_TMP (TempSpace::ResolveDirs), so a test
// that configures its own temp directory unsets it while it runs (restored afterwards; Catch2
// runs tests one by one). A forked child inherits the unset variable.
class ScopedNoEmberTmp {
 public:
  ScopedNoEmberTmp();
  ~ScopedNoEmberTmp();
  ScopedNoEmberTmp(const ScopedNoEmberTmp&) = delete;
  ScopedNoEmberTmp& operator=(const ScopedNoEmberTmp&) = delete;

 private:
  std::optional<std::string> saved_;
};

}  // namespace ember::testing
