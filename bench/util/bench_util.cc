// Shared benchmark helpers (see bench_util.h).
#include "bench/util/bench_util.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <new>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ember/database.h"
#include "engine/util/large_alloc.h"

namespace ember::bench {

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

absl::Status Wrong(std::string_view what) {
  return absl::InternalError(absl::StrCat("wrong result: ", std::string(what)));
}

absl::Status With(const absl::Status& s, std::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(std::string(context), ": ", s.message()));
}

uint64_t FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

namespace fs = std::filesystem;

// ---------------------------------------------------------------- flags

namespace {
std::vector<Flag*>& Registry() {
  static std::vector<Flag*> flags;  // function-local: flags of other files register first
  return flags;
}
}  // namespace

Flag::Flag(const char* name, int64_t default_value, const char* help)
    : name_(name),
      help_(help),
      kind_(Kind::kInt),
      int_(default_value),
      str_(std::to_string(default_value)) {
  Registry().push_back(this);
}

Flag::Flag(const char* name, bool default_value, const char* help)
    : name_(name),
      help_(help),
      kind_(Kind::kBool),
      int_(default_value ? 1 : 0),
      str_(default_value ? "1" : "0") {
  Registry().push_back(this);
}

Flag::Flag(const char* name, const char* default_value, const char* help)
    : name_(name), help_(help), kind_(Kind::kString), str_(default_value) {
  Registry().push_back(this);
}

bool Flag::Set(std::string_view value) {
  switch (kind_) {
    case Kind::kString: str_ = std::string(value); return true;
    case Kind::kBool:
      if (value == "1" || value == "true" || value == "yes") int_ = 1;
      else if (value == "0" || value == "false" || value == "no") int_ = 0;
      else return false;
      str_ = int_ ? "1" : "0";
      return true;
    case Kind::kInt: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size()) return false;
      int_ = v;
      str_ = std::string(value);
      return true;
    }
  }
  return false;
}

Flag FLAGS_db_dir("db_dir", "",
                  "where the databases go, in a fresh ember-bench-XXXXXX subdirectory removed at "
                  "exit (default /var/tmp, else $TMPDIR or /tmp; 'ram' = /dev/shm)");
Flag FLAGS_temp_dir("temp_dir", "disk",
                    "EmberDB temp space: 'disk' = next to the databases (same file system), "
                    "'ram' = /dev/shm/ember-bench, or a directory");
Flag FLAGS_page_size("page_size", int64_t{8192}, "database page size in bytes (both engines)");
Flag FLAGS_cache_pages("cache_pages", int64_t{2048},
                       "buffer cache size in pages (SQLite: the same number of pages)");
Flag FLAGS_prefault_mb(
    "prefault_mb", int64_t{0},
    "touch, then free, this many MB of memory before the first benchmark (0: none). Where "
    "fresh memory is slow at first touch (some VMs), that cost otherwise lands on the first "
    "phases that grow the process's memory");
Flag FLAGS_forced_writes("forced_writes", true,
                         "1: fsync at commit (SQLite synchronous=FULL); 0: the OS decides "
                         "(SQLite synchronous=OFF)");
Flag FLAGS_doublewrite("doublewrite", true,
                       "EmberDB's torn-page protection (Options::doublewrite); bench/core also "
                       "runs its writing phases with it off, side by side");

// ---------------------------------------------------------------- directories

namespace {

struct Dirs {
  std::string root;          // the fresh ember-bench-XXXXXX directory (removed at exit)
  std::string temp;          // EmberDB's temp directory
  std::string temp_root;     // what to remove for the temp space when it is not under `root`
  bool temp_in_ram = false;  // temp_root is under /dev/shm/ember-bench
  std::atomic<uint64_t> next_file{0};

  ~Dirs() { Remove(); }
  void Remove() {
    std::error_code ec;  // best effort: a leftover directory must not fail the run
    if (!temp_root.empty()) {
      fs::remove_all(temp_root, ec);
      if (temp_in_ram) fs::remove("/dev/shm/ember-bench", ec);  // only when empty
    }
    if (!root.empty()) fs::remove_all(root, ec);
    temp_root.clear();
    root.clear();
  }
};

Dirs& TheDirs() {
  static Dirs d;  // destroyed at exit, which removes the directories
  return d;
}

std::string g_format = "console";
std::atomic<bool> g_failed{false};

std::string MakeUniqueDir(const std::string& parent, const char* stem) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  std::string tmpl = parent + "/" + stem + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

std::string DefaultDbParent() {
  std::error_code ec;
  if (fs::is_directory("/var/tmp", ec)) return "/var/tmp";
  std::string t = fs::temp_directory_path(ec).string();
  return t.empty() ? "/tmp" : t;
}

bool CreateDirs() {
  Dirs& d = TheDirs();
  std::string parent = FLAGS_db_dir.str();
  if (parent.empty()) parent = DefaultDbParent();
  if (parent == "ram") parent = "/dev/shm";
  d.root = MakeUniqueDir(parent, "ember-bench");
  if (d.root.empty()) {
    std::fprintf(stderr, "bench: cannot create a directory in %s: %s\n", parent.c_str(),
                 std::strerror(errno));
    return false;
  }
  const std::string& t = FLAGS_temp_dir.str();
  if (t == "disk") {
    d.temp = d.root + "/temp";
    std::error_code ec;
    fs::create_directories(d.temp, ec);
    if (ec) d.temp.clear();
  } else {
    d.temp_in_ram = t == "ram";
    d.temp = d.temp_root = MakeUniqueDir(d.temp_in_ram ? "/dev/shm/ember-bench" : t, "run");
  }
  if (d.temp.empty()) {
    std::fprintf(stderr, "bench: cannot create the temp directory for --temp_dir=%s: %s\n",
                 t.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

// Touches `bytes` of fresh memory the way the engine's large buffers get it (util::LargeAlloc),
// then frees it: the kernel hands the same, already-backed pages to the next large allocations.
bool Prefault(size_t bytes) {
  if (bytes == 0) return true;
  try {
    void* p = util::LargeAlloc(bytes, 4096);
    std::memset(p, 1, bytes);
    util::LargeFree(p, bytes, 4096);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "bench: --prefault_mb: cannot allocate %zu bytes\n", bytes);
    return false;
  }
  return true;
}

}  // namespace

bool Init(int* argc, char** argv) {
  // Our flags first: they are removed so that benchmark does not reject them.
  int out = 1;
  bool help = false;
  for (int i = 1; i < *argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "--helpfull") help = true;
    if (arg.starts_with("--benchmark_format=")) g_format = std::string(arg.substr(19));
    Flag* match = nullptr;
    std::string_view value;
    if (arg.starts_with("--")) {
      std::string_view body = arg.substr(2);
      const size_t eq = body.find('=');
      std::string_view name = body.substr(0, eq);
      for (Flag* f : Registry()) {
        if (name == f->name()) match = f;
      }
      if (match) {
        if (eq != std::string_view::npos) value = body.substr(eq + 1);
        else if (match->kind_ == Flag::Kind::kBool) value = "1";
        else {
          std::fprintf(stderr, "bench: --%s needs a value (--%s=...)\n", match->name(),
                       match->name());
          return false;
        }
      }
    }
    if (match) {
      if (!match->Set(value)) {
        std::fprintf(stderr, "bench: bad value '%.*s' for --%s\n", int(value.size()), value.data(),
                     match->name());
        return false;
      }
      continue;
    }
    argv[out++] = argv[i];
  }
  *argc = out;
  argv[out] = nullptr;
  if (help) {
    std::printf("EmberDB benchmark flags (--name=value):\n");
    for (const Flag* f : Registry()) {
      std::printf("  --%s  (default '%s')\n        %s\n", f->name(), f->str().c_str(), f->help_);
    }
    std::printf("\nGoogle Benchmark flags:\n");
    std::fflush(stdout);
  }
  benchmark::Initialize(argc, argv);  // prints its help and exits on --help
  if (benchmark::ReportUnrecognizedArguments(*argc, argv)) return false;
  if (FLAGS_page_size.i64() < 4096 || FLAGS_page_size.i64() > 32768 ||
      (FLAGS_page_size.i64() & (FLAGS_page_size.i64() - 1)) != 0) {
    std::fprintf(stderr, "bench: --page_size must be a power of two in 4096..32768\n");
    return false;
  }
  if (FLAGS_cache_pages.i64() < 16 || FLAGS_cache_pages.i64() > (int64_t{1} << 24)) {
    std::fprintf(stderr, "bench: --cache_pages must be in 16..16M\n");
    return false;
  }
  if (FLAGS_prefault_mb.i64() < 0 || FLAGS_prefault_mb.i64() > (int64_t{1} << 20)) {
    std::fprintf(stderr, "bench: --prefault_mb must be in 0..1048576\n");
    return false;
  }
  if (!CreateDirs()) return false;
  AddMachineContext();
  return Prefault(static_cast<size_t>(FLAGS_prefault_mb.i64()) << 20);
}

void Finish() {
  TheDirs().Remove();
  benchmark::Shutdown();
}

const std::string& OutputFormat() { return g_format; }
std::FILE* SummaryStream() { return g_format == "console" ? stdout : stderr; }

const std::string& DbDir() { return TheDirs().root; }
const std::string& TempDir() { return TheDirs().temp; }

std::string NewDbPath(std::string_view stem, std::string_view ext) {
  const uint64_t n = TheDirs().next_file.fetch_add(1);
  return absl::StrCat(DbDir(), "/", std::string(stem), "-", n, std::string(ext));
}

void RemoveDbFiles(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) fs::remove(path + suffix, ec);
}

ember::Options DefaultOptions() {
  ember::Options o;
  o.create_if_missing = true;
  o.error_if_exists = true;
  o.page_size = static_cast<uint32_t>(FLAGS_page_size.i64());
  o.cache_pages = static_cast<uint32_t>(FLAGS_cache_pages.i64());
  o.forced_writes = FLAGS_forced_writes.b();
  o.doublewrite = FLAGS_doublewrite.b();
  o.temp_directories = {TempDir()};
  return o;
}

// ---------------------------------------------------------------- background work

absl::Status WaitForCollector(ember::Database& db, const std::string& path) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (db.stats().gc_pages_queued > 0) {
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(path, ": the garbage collector still had ",
                                                      db.stats().gc_pages_queued,
                                                      " pages queued after 60 s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- machine facts

namespace {

std::string FirstLineWith(const char* file, std::string_view prefix) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(prefix)) return line;
  }
  return "";
}

std::string AfterColon(const std::string& line) {
  const size_t c = line.find(':');
  if (c == std::string::npos) return "";
  size_t b = line.find_first_not_of(" \t", c + 1);
  return b == std::string::npos ? "" : line.substr(b);
}

// /proc/mounts escapes blanks and backslashes as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

struct Mount {
  std::string device, point, type;
};

Mount MountOf(const std::string& path) {
  std::error_code ec;
  std::string p = fs::weakly_canonical(path, ec).string();
  if (ec) p = path;
  Mount best;
  std::ifstream in("/proc/self/mounts");
  std::string dev, point, type, rest;
  while (in >> dev >> point >> type && std::getline(in, rest)) {
    point = Unescape(point);
    const bool under = point == "/" || p == point || p.starts_with(point + "/");
    if (under && point.size() >= best.point.size()) best = {Unescape(dev), point, type};
  }
  return best;
}

}  // namespace

std::string DescribeFileSystem(const std::string& path) {
  Mount m = MountOf(path);
  if (m.type.empty()) return "unknown";
  return absl::StrCat(m.type, " on ", m.device, " (mounted at ", m.point, ")");
}

bool IsRamFileSystem(const std::string& path) {
  const std::string t = MountOf(path).type;
  return t == "tmpfs" || t == "ramfs";
}

void AddMachineContext() {
  std::string cpu = AfterColon(FirstLineWith("/proc/cpuinfo", "model name"));
  benchmark::AddCustomContext("cpu_model", cpu.empty() ? "unknown" : cpu);
  benchmark::AddCustomContext("cores", std::to_string(std::thread::hardware_concurrency()));
  std::string mem = AfterColon(FirstLineWith("/proc/meminfo", "MemTotal"));  // "24683548 kB"
  int64_t kb = 0;
  std::from_chars(mem.data(), mem.data() + mem.size(), kb);
  benchmark::AddCustomContext("ram", absl::StrFormat("%.1f GiB", kb / 1048576.0));
  struct utsname u;
  if (::uname(&u) == 0)
    benchmark::AddCustomContext("kernel", absl::StrCat(u.sysname, " ", u.release));
  benchmark::AddCustomContext("db_dir", DbDir());
  benchmark::AddCustomContext("db_fs", DescribeFileSystem(DbDir()));
  benchmark::AddCustomContext("temp_dir", TempDir());
  benchmark::AddCustomContext("temp_fs", DescribeFileSystem(TempDir()));
  benchmark::AddCustomContext("page_size", FLAGS_page_size.str());
  benchmark::AddCustomContext("cache_pages", FLAGS_cache_pages.str());
  benchmark::AddCustomContext("prefault_mb", FLAGS_prefault_mb.str());
  benchmark::AddCustomContext(
      "cache_bytes",
      absl::StrFormat("%.1f MiB", FLAGS_page_size.i64() * FLAGS_cache_pages.i64() / 1048576.0));
  benchmark::AddCustomContext("forced_writes", FLAGS_forced_writes.str());
  benchmark::AddCustomContext("doublewrite", FLAGS_doublewrite.str());
  benchmark::AddCustomContext("sqlite_version", sqlite3_libversion());
#ifdef NDEBUG
  benchmark::AddCustomContext("ember_asserts", "off");
#else
  benchmark::AddCustomContext("ember_asserts", "on (not a release build)");
#endif
  if (FLAGS_forced_writes.b() && IsRamFileSystem(DbDir())) {
    std::fprintf(stderr,
                 "bench: note: the databases are on a RAM file system; forced writes cost "
                 "nothing there\n");
  }
}

// ---------------------------------------------------------------- counters

Counters operator-(const Counters& a, const Counters& b) {
  return {a.fetches - b.fetches, a.marks - b.marks,         a.reads - b.reads,
          a.writes - b.writes,   a.dw_writes - b.dw_writes, a.cycle_writes - b.cycle_writes};
}

Counters& operator+=(Counters& a, const Counters& b) {
  a.fetches += b.fetches;
  a.marks += b.marks;
  a.reads += b.reads;
  a.writes += b.writes;
  a.dw_writes += b.dw_writes;
  a.cycle_writes += b.cycle_writes;
  return a;
}

void SetPageCounters(benchmark::State& state, const Counters& c, std::string_view prefix) {
  const std::string p(prefix);
  state.counters[p + "fetches"] = benchmark::Counter(static_cast<double>(c.fetches));
  state.counters[p + "marks"] = benchmark::Counter(static_cast<double>(c.marks));
  state.counters[p + "reads"] = benchmark::Counter(static_cast<double>(c.reads));
  state.counters[p + "writes"] = benchmark::Counter(static_cast<double>(c.writes));
  state.counters[p + "dw_writes"] = benchmark::Counter(static_cast<double>(c.dw_writes));
  state.counters[p + "cycle_writes"] = benchmark::Counter(static_cast<double>(c.cycle_writes));
}

uint64_t MinorFaults() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<uint64_t>(u.ru_minflt);
}

bool Failed(benchmark::State& state, const absl::Status& s, std::string_view what) {
  if (s.ok()) return false;
  const std::string msg = absl::StrCat(std::string(what), ": ", s.ToString());
  std::fprintf(stderr, "bench: FAILED: %s\n", msg.c_str());
  state.SkipWithError(msg.c_str());
  g_failed = true;
  return true;
}

bool AnyFailed() { return g_failed; }

}  // namespace ember::bench
