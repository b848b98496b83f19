// Stored BLOBs as a whole: the data pages a header names (through its list pages at level 2),
// and freeing a stored BLOB (its header record, then its pages) once nothing on disk points at
// it any more (garbage collection and undo hand them over through Relation's BlobFreer).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/blob/blob_format.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/record/relation.h"

namespace ember::blob {

// The data pages of a stored BLOB whose header is `h` (level 1: its page list; level 2: the
// entries of its list pages, each checked to be a list page). `list_pages` gets the list pages.
absl::Status DataPagesOf(cache::BufferCache* cache, const BlobHeader& h,
                         std::vector<page::PageNo>* data, std::vector<page::PageNo>* list_pages);

// Frees the stored BLOBs `ids` of relation `rel`: deletes their header records, writes the pages
// that held them, then returns their data and list pages to the free list (so a crash can never
// leave a header naming pages that were reused). Ids of another relation are left alone.
// `pages_freed`, when given, is raised by the number of pages freed.
absl::Status FreeStoredBlobs(cache::BufferCache* cache, cache::PageSpace* space,
                             record::Relation* rel, std::span<const uint64_t> ids,
                             uint64_t mark_txn, uint64_t* pages_freed = nullptr);

}  // namespace ember::blob
