// util::LargeAlloc and LargeAllocator: alignment, every byte usable, containers growing across
// the huge-page threshold keep their contents, and frees of every size class.
#include "engine/util/large_alloc.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ember::util {
namespace {

TEST_CASE("large alloc: buffers of every size are aligned and wholly usable", "[util]") {
  for (size_t bytes : {size_t{1}, size_t{4096}, kLargeAllocMin - 1, kLargeAllocMin,
                       kLargeAllocMin + 1, size_t{5} << 20, size_t{33} << 20}) {
    for (size_t align : {size_t{8}, size_t{64}, size_t{4096}}) {
      INFO("bytes " << bytes << ", align " << align);
      void* p = LargeAlloc(bytes, align);
      REQUIRE(p != nullptr);
      CHECK(reinterpret_cast<uintptr_t>(p) % align == 0);
      auto* b = static_cast<uint8_t*>(p);
      std::memset(b, 0xA5, bytes);
      b[bytes - 1] = 0x5A;
      if (bytes > 1) {
        CHECK(b[0] == 0xA5);
        CHECK(b[bytes / 2] == 0xA5);
      }
      CHECK(b[bytes - 1] == 0x5A);
      LargeFree(p, bytes, align);
    }
  }
  LargeFree(nullptr, kLargeAllocMin);  // a no-op
}

TEST_CASE("large alloc: containers grow across the threshold and keep their contents", "[util]") {
  std::vector<uint64_t, LargeAllocator<uint64_t>> v;
  std::basic_string<char, std::char_traits<char>, LargeAllocator<char>> s;
  for (uint64_t i = 0; i < (uint64_t{3} << 20); ++i) {  // 24 MB of values, 3 MB of chars
    v.push_back(i * 2654435761u);
    s.push_back(static_cast<char>('a' + i % 26));
  }
  for (uint64_t i = 0; i < v.size(); i += 4099) REQUIRE(v[i] == i * 2654435761u);
  for (uint64_t i = 0; i < s.size(); i += 4099) REQUIRE(s[i] == static_cast<char>('a' + i % 26));
  const std::string head(std::string_view(s).substr(0, 100));
  CHECK(head.substr(0, 3) == "abc");
  v.shrink_to_fit();
  s.resize(100);
  s.shrink_to_fit();  // back below the threshold: operator new again
  CHECK(std::string_view(s) == head);
  auto moved = std::move(v);
  CHECK(moved.size() == (uint64_t{3} << 20));
  CHECK(moved.back() == ((uint64_t{3} << 20) - 1) * 2654435761u);
}

}  // namespace
}  // namespace ember::util
