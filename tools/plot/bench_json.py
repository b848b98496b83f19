# tools/plot/bench_json.py: reads the JSON a bench/ binary writes (Google Benchmark's
# --benchmark_out format) into rows the chart code can use without knowing that format:
# each row's name split into its "key:value" parts, its time in seconds whatever unit the
# binary registered it in, its counters, and whether it failed.
import json
import os
import statistics

# Google Benchmark's time_unit values, in seconds.
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}

# Keys of a benchmark entry that are Google Benchmark's own; every other numeric key is a
# counter the binary set (state.counters).
_STANDARD_KEYS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type",
    "repetitions", "repetition_index", "threads", "iterations", "real_time", "cpu_time",
    "time_unit", "error_occurred", "error_message", "aggregate_name", "aggregate_unit",
    "label",
}


# Parts Google Benchmark adds to a row's name.
_GB_PARTS = {"manual_time", "real_time", "process_time"}
# ("threads:N" stays: rows that differ only in it are different rows.)
_GB_KEYS = {"iterations", "repeats", "min_time", "min_warmup_time"}


class Row:
    """One benchmark row (one iteration run; aggregates are skipped)."""

    def __init__(self, entry):
        self.full_name = entry["name"]
        # Google Benchmark appends its own parts to the registered name
        # ("/iterations:1/manual_time", "/real_time/threads:4"): all but threads:N are dropped
        # from the name and its parts, so a row reads as the binary named it; all are params.
        self.parts = []
        self.params = {}
        for i, p in enumerate(self.full_name.split("/")):
            k, sep, v = p.partition(":")
            if i > 0 and sep:
                self.params.setdefault(k, v)
            if i > 0 and (p in _GB_PARTS or (sep and k in _GB_KEYS)):
                continue
            self.parts.append(p)
        self.name = "/".join(self.parts)
        self.failed = bool(entry.get("error_occurred"))
        self.error = entry.get("error_message", "")
        unit = _UNIT_SECONDS.get(entry.get("time_unit", "ns"), 1e-9)
        self.seconds = float(entry.get("real_time", 0.0)) * unit
        self.cpu_seconds = float(entry.get("cpu_time", 0.0)) * unit
        self.threads = int(entry.get("threads", 1))
        self.counters = {k: float(v) for k, v in entry.items()
                         if k not in _STANDARD_KEYS and isinstance(v, (int, float))
                         and not isinstance(v, bool)}

    def param(self, key, default=None, cast=str):
        v = self.params.get(key)
        if v is None:
            return default
        try:
            return cast(v)
        except ValueError:
            return default

    def counter(self, key, default=None):
        return self.counters.get(key, default)

    def __repr__(self):
        return "Row(%r, %.6g s)" % (self.name, self.seconds)


class BenchRun:
    """The whole file: context (machine, date) and rows."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict) or "benchmarks" not in data:
            raise ValueError("%s is not Google Benchmark JSON (no 'benchmarks')" % path)
        self.context = data.get("context", {})
        entries = [e for e in data["benchmarks"] if e.get("run_type", "iteration") == "iteration"]
        self.all_rows = [Row(e) for e in entries]
        self.failed = [r for r in self.all_rows if r.failed]
        # --benchmark_repetitions gives several rows of one name: each is drawn once, with the
        # median of its repetitions' time and counters.
        by_name = {}
        for r in self.all_rows:
            if not r.failed:
                by_name.setdefault(r.name, []).append(r)
        self.repetitions = max((len(v) for v in by_name.values()), default=0)
        self.rows = []
        for same in by_name.values():
            row = same[0]
            if len(same) > 1:
                row.seconds = median([r.seconds for r in same])
                row.cpu_seconds = median([r.cpu_seconds for r in same])
                row.counters = {k: median([r.counters.get(k) for r in same])
                                for k in row.counters}
            self.rows.append(row)

    @property
    def stem(self):
        return os.path.splitext(os.path.basename(self.path))[0]

    def prefixes(self):
        return {r.parts[0] for r in self.all_rows}

    def select(self, prefix=None, **params):
        """Rows whose first name part is `prefix` and whose params equal the given values
        (compared as strings)."""
        out = []
        for r in self.rows:
            if prefix is not None and r.parts[0] != prefix:
                continue
            if all(r.params.get(k) == str(v) for k, v in params.items()):
                out.append(r)
        return out

    def machine_lines(self, skip=()):
        """Two footer lines: the machine and when; the settings the run used (without the
        context keys in `skip`: common flags a benchmark overrides per row)."""
        c = self.context
        bits = []
        if c.get("host_name"):
            bits.append("host %s" % c["host_name"])
        cpus = c.get("num_cpus")
        model = c.get("cpu_model")
        if cpus:
            bits.append("%s CPUs%s" % (cpus, " (%s)" % model if model else ""))
        if c.get("ram"):
            bits.append("RAM %s" % c["ram"])
        if c.get("date"):
            bits.append(c["date"])
        if c.get("commit"):  # tools/dev bench records it
            bits.append("commit %s" % c["commit"])
        if c.get("load_avg"):  # other work on the machine during the run shows here
            bits.append("load avg %s" % ", ".join("%.2f" % v for v in c["load_avg"]))
        settings = []
        if self.repetitions > 1:
            settings.append("medians of up to %d repetitions per row" % self.repetitions)
        # sqlite_journal: the SQLite mode of the benchmarks that compare with SQLite.
        for key in ("page_size", "cache_pages", "forced_writes", "doublewrite", "runs",
                    "sqlite_journal"):
            if key in c and key not in skip:
                settings.append("%s %s" % (key, c[key]))
        if c.get("db_fs"):  # a RAM disk makes every sync free
            settings.append("databases on %s" % c["db_fs"])
        if c.get("library_build_type") == "debug":
            settings.append("Debian's libbenchmark (no NDEBUG; rows time themselves)")
        return ", ".join(bits), ", ".join(settings)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def group_median(rows, key, value=lambda r: r.seconds):
    """{key(row): median of value(row)} over rows sharing a key (repetitions, runs)."""
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(value(r))
    return {k: median(v) for k, v in groups.items()}


def human_count(n):
    """1000000 -> '1M', 250000 -> '250K', 4079052 -> '4.08M'."""
    if n is None:
        return "?"
    for div, suffix in ((1_000_000, "M"), (1_000, "K")):
        if n >= div:
            v = n / div
            return ("%d%s" % (v, suffix)) if v == int(v) else ("%.3g%s" % (v, suffix))
    return str(n)
