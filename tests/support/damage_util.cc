// Damaging and repairing a record version (damage_util.h).
#include "tests/support/damage_util.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string_view>

#include "engine/cache/buffer_cache.h"
#include "engine/page/data_page.h"
#include "engine/record/record_format.h"

namespace ember::testing {

DamagedVersion DamageVersion(db::DatabaseImpl* impl, const Table& t, RecordId id, int depth) {
  const uint32_t ps = impl->options().page_size;
  record::Relation* rel = internal::TableState::From(t)->relation.get();
  DamagedVersion d;
  absl::StatusOr<page::PageNo> p = rel->RecordPage(id.value);
  REQUIRE(p.ok());
  d.page = *p;
  d.line = page::RecordLine(id.value);
  for (int i = 0; i < depth; ++i) {
    absl::StatusOr<cache::PageRef> r = impl->cache()->Fetch(d.page, cache::LatchMode::kShared);
    REQUIRE(r.ok());
    std::optional<std::string_view> v = page::DpGet(r->data(), ps, d.line);
    REQUIRE(v.has_value());
    record::RecordHeader h;
    REQUIRE(record::DecodeHeader(*v, &h));
    REQUIRE(h.back_page != page::kNoPage);
    d.page = h.back_page;
    d.line = h.back_line;
  }
  absl::StatusOr<cache::PageRef> r = impl->cache()->Fetch(d.page, cache::LatchMode::kExclusive);
  REQUIRE(r.ok());
  std::optional<std::string_view> v = page::DpGet(r->data(), ps, d.line);
  REQUIRE(v.has_value());
  d.original = std::string(*v);
  record::RecordHeader h;
  REQUIRE(record::DecodeHeader(d.original, &h));
  REQUIRE_FALSE(h.flags & record::kRecFragmented);
  h.flags &= static_cast<uint8_t>(~record::kRecDelta);
  h.encoding = record::BodyEncoding::kPlain;
  std::string bad;
  record::EncodeHeader(h, &bad);
  bad.push_back('\x7f');
  REQUIRE(page::DpReplace(r->data(), ps, d.line, bad));
  r->Mark(0);
  return d;
}

void RepairVersion(db::DatabaseImpl* impl, const DamagedVersion& d) {
  absl::StatusOr<cache::PageRef> r = impl->cache()->Fetch(d.page, cache::LatchMode::kExclusive);
  REQUIRE(r.ok());
  REQUIRE(page::DpReplace(r->data(), impl->options().page_size, d.line, d.original));
  r->Mark(0);
}

std::string PlaceOf(const DamagedVersion& d) {
  return "page " + std::to_string(d.page) + " line " + std::to_string(d.line);
}

}  // namespace ember::testing
