// A scratch directory for file tests: unique per instance (mkdtemp), removed with its contents
// when the test ends, so tests can run in parallel and leave nothing behind.
#pragma once
#include <string>

namespace ember::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ember::testing
