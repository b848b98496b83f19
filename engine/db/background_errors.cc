// BackgroundErrors (see background_errors.h).
#include "engine/db/background_errors.h"

#include "absl/strings/str_cat.h"

namespace ember::db {

void BackgroundErrors::Add(const absl::Status& s) {
  if (s.ok()) return;
  util::MutexLock g(mu_);
  ++count_;
  last_ = s.ToString();
  if (first_.ok()) {
    first_ = s;
  } else {
    ++since_first_;
  }
}

absl::Status BackgroundErrors::Take() {
  util::MutexLock g(mu_);
  absl::Status out = std::move(first_);
  first_ = absl::OkStatus();
  if (!out.ok() && since_first_ > 0) {
    out = absl::Status(out.code(),
                       absl::StrCat(out.message(), " (and ", since_first_,
                                    " later background error(s); the newest: ", last_, ")"));
  }
  since_first_ = 0;
  return out;
}

uint64_t BackgroundErrors::count() const {
  util::MutexLock g(mu_);
  return count_;
}

std::string BackgroundErrors::last() const {
  util::MutexLock g(mu_);
  return last_;
}

}  // namespace ember::db
