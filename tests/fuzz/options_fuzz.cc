// libFuzzer target: the options file parser (Firebird-style "Name = value" lines). Any text is
// either Options or an InvalidArgument naming the source and line, never a crash; what parses
// passes Options' own checks or is refused by Open with an error, which this does not test.
#include "ember/options.h"
#include "tests/fuzz/fuzz_util.h"

using namespace ember;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::MaybeWriteSeeds({
      "# a comment\nPageSize = 8192\nDefaultDbCachePages = 2048\n",
      "ForcedWrites = false\nTempDirectories = /tmp;/var/tmp\nTempCacheLimit = 64M\n",
      "BlobTempSpace = 2\nParallelWorkers = 2\nMaxParallelWorkers = 4\nGCPolicy = combined\n",
      "SweepInterval = 0\nDoubleWrite = yes\nLockHashSlots = 1009\nUndoMemoryLimit = 1G\n",
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Options> o = Options::FromConfigText(text, "fuzz.conf");
  if (!o.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(o.status()), o.status().ToString());
    FUZZ_CHECK(o.status().message().find("fuzz.conf") != std::string_view::npos,
               "an options error that does not name the file: " + o.status().ToString());
  }
  return 0;
}
