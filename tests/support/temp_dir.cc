// TempDir (temp_dir.h): a scratch directory per instance, under the system's temp directory.
#include "tests/support/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

namespace ember::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ember-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;  // best effort: a leftover directory must not fail the test
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace ember::testing
