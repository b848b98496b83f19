// Errors that happen where no caller is waiting for them: the background collector's rounds,
// the cleanup after a commit that is already durable, and a rollback run by a Transaction's
// destructor. None of them is dropped: each is counted (DatabaseStats::background_errors, with
// the newest message), and the first not yet reported is returned by the next
// Database::CollectGarbage or Close.
#pragma once
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "engine/util/mutex.h"

namespace ember::db {

class BackgroundErrors {
 public:
  // Records an error (OK is ignored).
  void Add(const absl::Status& s);
  // The first error recorded since the last Take, saying how many more followed it; OK when
  // there is none. Clears it: each error is returned once.
  absl::Status Take();
  uint64_t count() const;
  std::string last() const;

 private:
  mutable util::Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
  uint64_t since_first_ ABSL_GUARDED_BY(mu_) = 0;  // errors after first_, not returned yet
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;        // since open
  std::string last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::db
