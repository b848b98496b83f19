// The BLOB contents and EMBER_TMP helpers declared in blob_util.h.
#include "tests/support/blob_util.h"

#include <stdlib.h>

#include <cstdlib>
#include <cstring>

namespace ember::testing {

std::string Pattern(uint64_t seed, size_t n) {
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

ScopedNoEmberTmp::ScopedNoEmberTmp() {
  if (const char* v = std::getenv("EMBER_TMP")) saved_ = v;
  ::unsetenv("EMBER_TMP");
}

ScopedNoEmberTmp::~ScopedNoEmberTmp() {
  if (saved_) ::setenv("EMBER_TMP", saved_->c_str(), 1);
}

}  // namespace ember::testing
