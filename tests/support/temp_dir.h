// A scratch directory for file tests: unique per instance (mkdtemp), removed with its contents
// when the test ends, so tests can run in parallel and leave nothing behind.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace ember::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ember-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;  // best effort: a leftover directory must not fail the test
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ember::testing
