// Options::FromConfigFile / FromConfigText: Firebird-style `Name = Value` configuration.
#include "ember/options.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ember {
namespace {

// Sizes may carry K, M or G suffixes (as firebird.conf allows).
bool ParseSize(absl::string_view v, uint64_t* out) {
  uint64_t mul = 1;
  if (!v.empty()) {
    char c = absl::ascii_toupper(v.back());
    if (c == 'K') mul = 1ull << 10;
    if (c == 'M') mul = 1ull << 20;
    if (c == 'G') mul = 1ull << 30;
    if (mul != 1) v.remove_suffix(1);
  }
  uint64_t n;
  if (!absl::SimpleAtoi(v, &n)) return false;
  *out = n * mul;
  return true;
}

bool ParseBool(absl::string_view v, bool* out) {
  std::string l = absl::AsciiStrToLower(v);
  if (l == "1" || l == "true" || l == "on" || l == "yes") return *out = true, true;
  if (l == "0" || l == "false" || l == "off" || l == "no") return *out = false, true;
  return false;
}

}  // namespace

absl::StatusOr<Options> Options::FromConfigText(std::string_view text_in,
                                                std::string_view source_in) {
  absl::string_view text(text_in.data(), text_in.size());
  absl::string_view source(source_in.data(), source_in.size());
  Options o;
  int lineno = 0;
  int workers_line = 0, max_workers_line = 0;  // where each was set (0: the default)
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++lineno;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    size_t eq = line.find('=');
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", lineno, ": ", why));
    };
    if (eq == absl::string_view::npos) return bad("expected Name = Value");
    std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, eq)));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    uint64_t n = 0;
    bool b = false;
    auto size = [&](auto* field, uint64_t lo, uint64_t hi) -> absl::Status {
      if (!ParseSize(value, &n) || n < lo || n > hi) {
        return bad(absl::StrCat("bad value '", value, "' (", lo, "..", hi, ")"));
      }
      *field = static_cast<std::remove_pointer_t<decltype(field)>>(n);
      return absl::OkStatus();
    };
    absl::Status s;
    if (name == "defaultdbcachepages") s = size(&o.cache_pages, 16, 1u << 30);
    else if (name == "pagesize") s = size(&o.page_size, 4096, 32768);
    else if (name == "tempcachelimit") s = size(&o.temp_cache_limit, 0, ~0ull);
    else if (name == "blobtempspace") s = size(&o.blob_temp_space, 0, 2);
    else if (name == "parallelworkers") {
      s = size(&o.parallel_workers, 1, 64);
      workers_line = lineno;
    } else if (name == "maxparallelworkers") {
      s = size(&o.max_parallel_workers, 1, 64);
      max_workers_line = lineno;
    } else if (name == "workeridletimeout") {
      uint64_t secs = 0;
      s = size(&secs, 1, 86400);
      o.worker_idle_timeout_ms = secs * 1000;
    } else if (name == "lockhashslots") s = size(&o.lock_hash_slots, 101, 65521);
    else if (name == "lockmemsize") s = size(&o.lock_mem_size, 256 << 10, 1ull << 31);
    else if (name == "sweepinterval") {
      uint64_t interval = 0;  // set: overrides the header's value for the open
      s = size(&interval, 0, ~0ull);
      o.sweep_interval = interval;
    } else if (name == "undomemorylimit") s = size(&o.undo_memory_limit, 0, ~0ull);
    else if (name == "sortmemorylimit") s = size(&o.sort_memory_limit, 64 << 10, ~0ull);
    else if (name == "forcedwrites") {
      if (!ParseBool(value, &b)) s = bad("expected a boolean");
      o.forced_writes = b;
    } else if (name == "doublewrite") {
      if (!ParseBool(value, &b)) s = bad("expected a boolean");
      o.doublewrite = b;
    } else if (name == "nosavepoint") {
      if (!ParseBool(value, &b)) s = bad("expected a boolean");
      o.no_savepoint = b;
    } else if (name == "tempdirectories") {
      o.temp_directories.clear();
      for (absl::string_view d : absl::StrSplit(value, ';', absl::SkipWhitespace())) {
        o.temp_directories.emplace_back(absl::StripAsciiWhitespace(d));
      }
    } else if (name == "gcpolicy") {
      std::string l = absl::AsciiStrToLower(value);
      if (l == "cooperative") o.gc_policy = GcPolicy::kCooperative;
      else if (l == "background") o.gc_policy = GcPolicy::kBackground;
      else if (l == "combined") o.gc_policy = GcPolicy::kCombined;
      else s = bad("GCPolicy is cooperative, background or combined");
    } else {
      s = bad(
          absl::StrCat("unknown setting '", absl::StripAsciiWhitespace(line.substr(0, eq)), "'"));
    }
    if (!s.ok()) return s;
  }
  if (o.parallel_workers > o.max_parallel_workers) {
    // Checked once the whole file is read: the two may come in either order.
    auto where = [&](int line) {
      return line == 0 ? std::string(" (the default)") : absl::StrCat(" (line ", line, ")");
    };
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", workers_line != 0 ? workers_line : max_workers_line, ": ParallelWorkers ",
        o.parallel_workers, where(workers_line), " is more than MaxParallelWorkers ",
        o.max_parallel_workers, where(max_workers_line)));
  }
  return o;
}

absl::StatusOr<Options> Options::FromConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read configuration file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return FromConfigText(ss.str(), path);
}

}  // namespace ember
