// Page 0, the database header: field encoding and the identity checks made at open
// (see header_page.h).
#include "engine/page/header_page.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "engine/util/coding.h"

namespace ember::page {

namespace {

// Field offsets, as documented in header_page.h.
constexpr size_t kMagicOff = 16, kVersionOff = 24, kPageSizeOff = 28, kNextTxnOff = 32,
                 kOitOff = 40, kOatOff = 48, kOstOff = 56, kPageCountOff = 64, kFirstTipOff = 68,
                 kCatalogPpOff = 72, kFlagsOff = 76, kCreateTimeOff = 80, kDwFirstOff = 88,
                 kDwSlotsOff = 92, kSweepIntervalOff = 96, kHeaderEnd = 104;
static_assert(kMagicOff == kPageHeaderSize);
static_assert(kMagicOff + 8 == kVersionOff && kDwSlotsOff + 4 == kSweepIntervalOff);
static_assert(kSweepIntervalOff + 8 == kHeaderEnd);
static_assert(kMagic.size() == 8);
static_assert(kHeaderEnd <= kMinPageSize);

const char* FileName(const char* f) { return f != nullptr ? f : "(unnamed file)"; }

// The checks shared by ReadHeader and PeekPageSize, in the order an open should report them: a
// file that is not ours at all, then one that is too new (or old), then a damaged field.
absl::Status CheckIdentity(const uint8_t* page, const char* file) {
  if (std::memcmp(page + kMagicOff, kMagic.data(), kMagic.size()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not an EmberDB database (bad magic)", FileName(file)));
  }
  if (GetType(page) != PageType::kHeader) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not an EmberDB database (page 0 has type %u, not header)",
                        FileName(file), page[hdr::kType]));
  }
  const uint32_t version = util::Get32(page + kVersionOff);
  if (version < kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: format version %u is older than this build's %u; to upgrade, back it up with "
        "the build that wrote it (ember-bak -b) and restore the backup with this one "
        "(ember-bak -c)",
        FileName(file), version, kFormatVersion));
  }
  if (version != kFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: format version %u not supported (this build reads version %u)",
                        FileName(file), version, kFormatVersion));
  }
  const uint32_t page_size = util::Get32(page + kPageSizeOff);
  if (!ValidPageSize(page_size)) {
    // The magic and version are right, so this is a damaged header rather than a foreign file.
    return absl::DataLossError(
        absl::StrFormat("%s: header holds invalid page size %u", FileName(file), page_size));
  }
  return absl::OkStatus();
}

}  // namespace

void WriteHeader(uint8_t* page, const HeaderFields& h) {
  std::memcpy(page + kMagicOff, kMagic.data(), kMagic.size());
  util::Put32(page + kVersionOff, h.format_version);
  util::Put32(page + kPageSizeOff, h.page_size);
  util::Put64(page + kNextTxnOff, h.next_txn);
  util::Put64(page + kOitOff, h.oit);
  util::Put64(page + kOatOff, h.oat);
  util::Put64(page + kOstOff, h.ost);
  util::Put32(page + kPageCountOff, h.page_count);
  util::Put32(page + kFirstTipOff, h.first_tip);
  util::Put32(page + kCatalogPpOff, h.catalog_pp);
  util::Put32(page + kFlagsOff, h.flags | kHeaderFlagSweepInterval);
  util::Put64(page + kCreateTimeOff, h.create_time_us);
  util::Put32(page + kDwFirstOff, h.dw_first);
  util::Put32(page + kDwSlotsOff, h.dw_slots);
  util::Put64(page + kSweepIntervalOff, h.sweep_interval);
}

absl::Status ReadHeader(const uint8_t* page, HeaderFields* h, const char* file_for_errors) {
  if (absl::Status s = CheckIdentity(page, file_for_errors); !s.ok()) return s;
  h->format_version = util::Get32(page + kVersionOff);
  h->page_size = util::Get32(page + kPageSizeOff);
  h->next_txn = util::Get64(page + kNextTxnOff);
  h->oit = util::Get64(page + kOitOff);
  h->oat = util::Get64(page + kOatOff);
  h->ost = util::Get64(page + kOstOff);
  h->page_count = util::Get32(page + kPageCountOff);
  h->first_tip = util::Get32(page + kFirstTipOff);
  h->catalog_pp = util::Get32(page + kCatalogPpOff);
  h->flags = util::Get32(page + kFlagsOff);
  h->create_time_us = util::Get64(page + kCreateTimeOff);
  h->dw_first = util::Get32(page + kDwFirstOff);
  h->dw_slots = util::Get32(page + kDwSlotsOff);
  // A file written before the field existed (header_page.h) runs with the default.
  h->sweep_interval = (h->flags & kHeaderFlagSweepInterval) != 0
                          ? util::Get64(page + kSweepIntervalOff)
                          : kDefaultSweepInterval;
  return absl::OkStatus();
}

absl::Status PeekPageSize(const uint8_t* first_bytes, size_t n, uint32_t* page_size,
                          const char* file_for_errors) {
  if (n < kSweepIntervalOff) {  // the format 6 header before the sweep interval
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not an EmberDB database (only %u bytes, too short for a header)",
                        FileName(file_for_errors), n));
  }
  if (absl::Status s = CheckIdentity(first_bytes, file_for_errors); !s.ok()) return s;
  *page_size = util::Get32(first_bytes + kPageSizeOff);
  return absl::OkStatus();
}

}  // namespace ember::page
