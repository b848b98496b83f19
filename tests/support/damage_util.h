// Damage for the error-reporting tests: a record version whose bytes no longer decode as a row
// (its header intact, so only the row decoder notices), made in the cache of an open database,
// and the same undone.
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include "ember/ember.h"
#include "engine/cache/buffer_cache.h"
#include "engine/db/database_impl.h"
#include "engine/page/data_page.h"
#include "engine/record/record_format.h"

namespace ember::testing {

struct DamagedVersion {
  page::PageNo page = page::kNoPage;
  uint16_t line = 0;
  std::string original;  // the version's stored bytes before
};

// Replaces the body of the version `depth` steps down the chain of record `id` (0: the newest)
// with one byte that claims 127 columns. The page is marked dirty, so a write reseals it.
inline DamagedVersion DamageVersion(db::DatabaseImpl* impl, const Table& t, RecordId id,
                                    int depth = 0) {
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

inline void RepairVersion(db::DatabaseImpl* impl, const DamagedVersion& d) {
  absl::StatusOr<cache::PageRef> r = impl->cache()->Fetch(d.page, cache::LatchMode::kExclusive);
  REQUIRE(r.ok());
  REQUIRE(page::DpReplace(r->data(), impl->options().page_size, d.line, d.original));
  r->Mark(0);
}

// "page P line L", as errors name a version's place.
inline std::string PlaceOf(const DamagedVersion& d) {
  return "page " + std::to_string(d.page) + " line " + std::to_string(d.line);
}

}  // namespace ember::testing
