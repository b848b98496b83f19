// TableState's helpers and the error of an undecodable version (table_state.h).
#include "engine/db/table_state.h"

#include "absl/strings/str_cat.h"
#include "engine/blob/blob_format.h"
#include "engine/page/data_page.h"
#include "engine/record/record_format.h"

namespace ember::internal {

absl::Status TableState::DamageFor(absl::string_view what) const {
  const absl::Status& d = relation->damage();
  if (d.ok()) return d;
  return absl::Status(d.code(), absl::StrCat(what, " of table ", schema.name, ": ", d.message()));
}

absl::Status TableState::AddBlobIds(std::string_view raw,
                                    absl::flat_hash_set<uint64_t>* ids) const {
  Row row;
  if (absl::Status s = record::DecodeRow(raw, schema.columns.size(), &row); !s.ok()) return s;
  for (const Value& v : row) {
    if (const auto* b = std::get_if<BlobId>(&v);
        b && b->value != 0 && !blob::IsTemp(b->value) && blob::IdRelation(b->value) == id) {
      ids->insert(b->value);
    }
  }
  return absl::OkStatus();
}

absl::Status UndecodableVersion(const TableState& t, uint64_t rec,
                                std::optional<std::pair<page::PageNo, uint16_t>> at,
                                const absl::Status& cause) {
  if (!at) {
    absl::StatusOr<page::PageNo> p = t.relation->RecordPage(rec);
    if (p.ok()) at.emplace(*p, page::RecordLine(rec));
  }
  const std::string place =
      at ? absl::StrCat("page ", at->first, " line ", at->second) : std::string("unknown page");
  return absl::DataLossError(absl::StrCat("table ", t.schema.name, " record ", rec,
                                          ": the version at ", place,
                                          " does not decode: ", cause.message()));
}

}  // namespace ember::internal
