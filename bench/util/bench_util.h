// Helpers shared by every benchmark binary under bench/: our own command-line flags, the
// directories the databases and the temp space live in, machine facts in the benchmark context,
// and EmberDB's page counters as benchmark user counters.
//
// A benchmark main looks like:
//
//   int main(int argc, char** argv) {
//     if (!ember::bench::Init(&argc, argv)) return 1;   // our flags, then benchmark's
//     ... register benchmarks (or use BENCHMARK macros) ...
//     benchmark::RunSpecifiedBenchmarks();
//     ember::bench::Finish();                            // removes the directories
//   }
//
// Flags (ours are --name=value; anything --benchmark_* goes to Google Benchmark):
//   --db_dir=DIR      where the databases are created, in a fresh `ember-bench-XXXXXX`
//                     subdirectory removed at exit (default /var/tmp, else $TMPDIR or /tmp;
//                     `ram` means /dev/shm)
//   --temp_dir=WHERE  EmberDB's temp space (Options::temp_directories): `disk` (default) = a
//                     directory next to the databases, on the database's file system; `ram` =
//                     the RAM disk /dev/shm/ember-bench; or any directory
//   --page_size=N --cache_pages=N --forced_writes=0|1 --doublewrite=0|1
//                                                       the ember::Options of the databases
// plus the flags a binary declares itself with Flag (e.g. --rows=N).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "ember/options.h"
#include "ember/stats.h"

namespace ember {
class Database;
}  // namespace ember

namespace ember::bench {

// Wall-clock timing for the benchmarks' manual times.
using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b);
// CPU time of the whole process (every thread, including the engine's own): on a shared machine
// the CPU ratio is steadier than the wall-clock ratio.
double ProcessCpuSeconds();
// CPU time of the calling thread alone (for an engine that does all its work on the caller's
// thread, like SQLite, while another engine's idle threads live in the same process).
double ThreadCpuSeconds();

// ---------------------------------------------------------------- data and checks

// splitmix64: a fast, well-mixed 64-bit hash, the source of the benchmarks' generated data.
uint64_t Mix(uint64_t x);
// An InternalError "wrong result: <what>": a benchmark's answer differs from what it must be.
absl::Status Wrong(std::string_view what);
// `s` with `context` in front of its message (same code); OK stays OK.
absl::Status With(const absl::Status& s, std::string_view context);
// The size of the file at `path` in bytes (0 when it does not exist).
uint64_t FileBytes(const std::string& path);

// ---------------------------------------------------------------- flags

// One --name=value flag. Declare them as globals (static storage) so they exist before Init():
//   ember::bench::Flag FLAGS_rows("rows", 1000000, "rows inserted by the bulk insert");
// Values are checked by Init(): an int flag that does not parse is an error.
class Flag {
 public:
  Flag(const char* name, int64_t default_value, const char* help);      // an integer flag
  Flag(const char* name, bool default_value, const char* help);         // 0/1/true/false
  Flag(const char* name, const char* default_value, const char* help);  // a string flag
  Flag(const Flag&) = delete;
  Flag& operator=(const Flag&) = delete;

  // A binary's own default for a common flag (call before Init; the command line still wins).
  void SetDefault(int64_t v) {
    int_ = v;
    str_ = std::to_string(v);
  }
  int64_t i64() const { return int_; }
  bool b() const { return int_ != 0; }
  const std::string& str() const { return str_; }
  const char* name() const { return name_; }

 private:
  friend bool Init(int* argc, char** argv);
  enum class Kind { kInt, kBool, kString };
  bool Set(std::string_view value);  // false when the value does not parse
  const char* name_;
  const char* help_;
  Kind kind_;
  int64_t int_ = 0;
  std::string str_;
};

// The flags every binary has (defined in bench_util.cc).
extern Flag FLAGS_db_dir;
extern Flag FLAGS_temp_dir;
extern Flag FLAGS_page_size;
extern Flag FLAGS_cache_pages;
extern Flag FLAGS_forced_writes;
extern Flag FLAGS_doublewrite;

// Parses and removes our flags from argv, then hands the rest to benchmark::Initialize and
// rejects what nobody knows. Creates the benchmark directories and adds the machine facts to the
// context. --help prints our flags before benchmark's. Returns false (after printing why) when
// the program should exit with an error.
bool Init(int* argc, char** argv);
// Removes the directories Init created (also done at exit) and shuts benchmark down.
void Finish();

// The --benchmark_format the user asked for ("console" unless given): where to print extra
// tables without corrupting JSON/CSV on stdout.
const std::string& OutputFormat();
// stdout for the console format, stderr otherwise.
std::FILE* SummaryStream();

// ---------------------------------------------------------------- directories

// The run's database directory (a fresh subdirectory of --db_dir) and EmberDB's temp directory.
const std::string& DbDir();
const std::string& TempDir();
// A fresh file name in DbDir(): "<DbDir>/<stem>-<n><ext>" (n counts up, so repetitions never reuse
// a file). Nothing is created.
std::string NewDbPath(std::string_view stem, std::string_view ext = ".edb");
// Removes `path` and the side files SQLite and EmberDB may leave next to it (-journal, -wal,
// -shm). Missing files are not errors.
void RemoveDbFiles(const std::string& path);

// ember::Options from the common flags, for a new database at a fresh path.
ember::Options DefaultOptions();

// ---------------------------------------------------------------- background work

// Waits (untimed) until the background garbage collector of `db` has nothing queued, so that it
// does not work during a later phase of any engine; DeadlineExceeded after 60 s, naming `path`.
// Its rounds after a Database::CollectGarbage find nothing to do.
absl::Status WaitForCollector(ember::Database& db, const std::string& path);

// ---------------------------------------------------------------- machine facts

// Adds to benchmark's context (printed in the console header and in JSON "context"): cpu_model,
// cores, ram, db_dir and its file system (type and device), temp_dir and its file system,
// page_size, cache_pages, forced_writes, sqlite_version. Called by Init().
void AddMachineContext();
// "ext4 on /dev/vda (mounted at /)" for the file system holding `path`.
std::string DescribeFileSystem(const std::string& path);
bool IsRamFileSystem(const std::string& path);  // tmpfs / ramfs: fsync costs nothing

// ---------------------------------------------------------------- counters

Counters operator-(const Counters& a, const Counters& b);
Counters& operator+=(Counters& a, const Counters& b);

// Puts fetches, marks, reads, writes, dw_writes, cycle_writes and syncs into state.counters (as
// plain totals for the run; prefix names them, e.g. "commit_" -> commit_fetches).
void SetPageCounters(benchmark::State& state, const Counters& c, std::string_view prefix = "");

// Minor page faults of the process so far (getrusage): the difference over a phase shows how
// much fresh memory it touched (a first touch costs microseconds per 4 KB page on some VMs).
uint64_t MinorFaults();

// Reports a failed status on the state (SkipWithError) and remembers that the run failed, so
// the binary exits non-zero. Returns true when `s` is an error.
bool Failed(benchmark::State& state, const absl::Status& s, std::string_view what);
// Whether any benchmark of the run failed.
bool AnyFailed();

}  // namespace ember::bench
