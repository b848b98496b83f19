# tools/plot/charts.py: one drawing function per benchmark, each making a figure with the
# article's published figures on the left and this run's on the right (bench_json.BenchRun),
# plus the generic bar chart for a JSON nobody here knows. Every figure ends with a footer
# naming the machine, the date, the JSON file, rows that failed, and whether the run used
# smaller sizes than the article (so a chart of a quick run cannot pass for the real one).
import math

import matplotlib

matplotlib.use("Agg")  # files only: no display on build machines
import matplotlib.pyplot as plt  # noqa: E402

import article_figures as art  # noqa: E402
from bench_json import group_median, human_count, median  # noqa: E402

ARTICLE_COLOR = "#8c6d31"
OURS_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#e377c2",
               "#7f7f7f", "#bcbd22", "#8c564b"]
SQLITE_COLOR = "#7f7f7f"


class Figure:
    """A figure under construction: the panels, and the notes that go into its footer."""

    def __init__(self, run, title, ncols=2, nrows=1, width_ratios=None, sharey=False,
                 size=None):
        self.run = run
        self.notes = []
        self.skip_settings = set()  # context settings the benchmark does not use as given
        w, h = size or (7.0 * ncols if ncols <= 2 else 4.6 * ncols, 5.2 * nrows + 0.8)
        self.fig, axes = plt.subplots(nrows, ncols, figsize=(w, h), squeeze=False,
                                      sharey=sharey, gridspec_kw=(
                                          {"width_ratios": width_ratios} if width_ratios else None))
        self.axes = axes
        self.fig.suptitle(title, fontsize=13, fontweight="bold")

    def note(self, text):
        self.notes.append(text)

    def save(self, path):
        run = self.run
        machine, settings = run.machine_lines(self.skip_settings)
        footer = ["ours: " + (machine or "machine not recorded in the JSON") + "  |  "
                  + run.path]
        if settings:
            footer.append("settings: " + settings)
        if run.failed:
            names = ", ".join(r.name for r in run.failed[:3])
            more = " and %d more" % (len(run.failed) - 3) if len(run.failed) > 3 else ""
            footer.append("%d row(s) FAILED and are not drawn: %s%s" % (len(run.failed), names,
                                                                        more))
        footer.extend(self.notes)
        text = "\n".join(footer)
        self.fig.text(0.01, 0.005, text, fontsize=8, va="bottom", ha="left", wrap=True)
        # Room at the bottom for the footer's lines, at the top for the title.
        bottom = min(0.4, (0.3 + 0.15 * len(footer)) / self.fig.get_figheight())
        self.fig.tight_layout(rect=(0, bottom, 1, 0.95))
        self.fig.savefig(path, dpi=100)
        plt.close(self.fig)


def _article_title(ax, text):
    ax.set_title("the article: " + text, fontsize=10, color=ARTICLE_COLOR)


def _ours_title(ax, text):
    ax.set_title("ours (EmberDB, this run): " + text, fontsize=10, color=OURS_COLORS[0])


def _label_bars(ax, bars, fmt="%.3g"):
    for b in bars:
        h = b.get_height()
        if h is None or (isinstance(h, float) and math.isnan(h)) or h <= 0:
            continue
        ax.annotate(fmt % h, (b.get_x() + b.get_width() / 2, b.get_y() + h), ha="center",
                    va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points")


def _seconds_fmt(s):
    if s >= 10:
        return "%.1f s" % s
    if s >= 0.1:
        return "%.2f s" % s
    if s >= 0.001:
        return "%.1f ms" % (s * 1e3)
    return "%.2f ms" % (s * 1e3)


def _workers_axis(ax, workers, cpus):
    ax.set_xlabel("workers")
    ax.set_xticks(sorted(set(workers)))
    if cpus:
        ax.axvline(cpus + 0.5, color="#bbbbbb", linestyle=":", linewidth=1)
        ax.annotate("%s cores" % cpus, (cpus + 0.5, 1), xycoords=("data", "axes fraction"),
                    ha="left", va="top", fontsize=7, color="#888888", xytext=(2, -2),
                    textcoords="offset points")


def _log_range(axes, values):
    """One log scale over `axes` that shows every value in `values` (bars start at the bottom
    of a log axis, so a bottom above the smallest value would hide its bar)."""
    values = [v for v in values if v is not None and v > 0 and not math.isnan(v)]
    if not values:
        return
    lo, hi = min(values) / 3, max(values) * 4
    for ax in axes:
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)


def _same_workers(axes, workers):
    """The article's and our panel on one worker axis, so equal worker counts line up."""
    ws = sorted(set(workers))
    for ax in axes:
        ax.set_xticks(ws)
        ax.set_xlim(min(ws) - 0.4, max(ws) + 0.6)


def _label_points(ax, xs, ys, color):
    for x, y in zip(xs, ys):
        ax.annotate(_seconds_fmt(y), (x, y), fontsize=7, color=color, xytext=(3, 3),
                    textcoords="offset points")


def _cpus(run):
    c = run.context
    try:
        return int(c.get("num_cpus"))
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- blob_temp

def plot_blob_temp(run, out):
    a = art.BLOB_TEMP
    f = Figure(run, "BLOB temp space: one BLOB built by Concat in one transaction, temporary "
                    "BLOBs in database pages (off) vs temp space (on)", ncols=2, nrows=2)
    # Article: time, off vs on, stacked block + commit.
    ax = f.axes[0][0]
    x = 0
    ticks, labels = [], []
    for medium, ob, oc, nb, nc in a["times"]:
        for label, blk, com in (("off", ob, oc), ("on", nb, nc)):
            ax.bar(x, blk, color=ARTICLE_COLOR, label="block" if x == 0 else None)
            ax.bar(x, com, bottom=blk, color=ARTICLE_COLOR, alpha=0.3, hatch="//",
                   label="commit" if x == 0 else None)
            ax.annotate(_seconds_fmt(blk + com), (x, blk + com), ha="center", va="bottom",
                        fontsize=8)
            ticks.append(x)
            labels.append("%s\n%s" % (label, medium))
            x += 1
        x += 0.5
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("seconds (block + commit)")
    ax.legend(fontsize=8)
    _article_title(ax, "Firebird/HQbird, %d x %d KB: 12.0x faster on" % (a["chunks"],
                                                                      a["chunk_bytes"] // 1024))
    # Article: page writes.
    ax = f.axes[1][0]
    bars = ax.bar([0, 1], [a["writes_off"], a["writes_on"]], color=ARTICLE_COLOR)
    ax.set_yscale("log")
    ax.set_xticks([0, 1])
    ax.set_xticklabels(["off", "on"])
    ax.set_ylabel("database page writes (log)")
    _label_bars(ax, bars, "%d")
    _article_title(ax, "page writes, %dx fewer on; off grew the database by %s MB" % (
        a["writes_off"] // a["writes_on"], format(a["growth_off_mb"], ",")))

    # Ours: every Concat / Append row, stacked block + commit, log scale (mode 0 is 100s of
    # times slower than the others: a linear axis would hide them).
    ax = f.axes[0][1]
    rows = [r for r in run.rows if r.parts[0] in ("blob_temp", "blob_append")]
    off = {}
    for r in rows:
        if r.param("mode") == "0":
            off[r.parts[0]] = r
    ticks, labels = [], []
    for i, r in enumerate(rows):
        blk = r.counter("block_s", r.seconds)
        com = r.counter("commit_s", 0.0)
        color = OURS_COLORS[0] if r.parts[0] == "blob_temp" else OURS_COLORS[2]
        ax.bar(i, blk, color=color)
        ax.bar(i, max(com, 1e-6), bottom=blk, color=color, alpha=0.35, hatch="//")
        text = _seconds_fmt(blk + com)
        base = off.get(r.parts[0])
        if base is not None and base is not r and r.seconds > 0:
            x_off = base.seconds / r.seconds
            text += ("\n%.0fx" if x_off >= 10 else "\n%.2gx") % x_off
        w = r.counter("writes")
        if w is not None:
            text += "\n%s wr" % human_count(int(w))
        ax.annotate(text, (i, blk + com), ha="center", va="bottom", fontsize=7)
        ticks.append(i)
        mode = r.param("mode", "?")
        labels.append("%s\nmode %s\n%s" % ("Concat" if r.parts[0] == "blob_temp" else "Append",
                                         mode, r.param("temp", "")))
    if rows:
        ax.set_yscale("log")
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylim(top=ax.get_ylim()[1] * 8)  # room for the labels
    ax.set_ylabel("seconds, block + commit (log)")
    _ours_title(ax, "off = mode 0, on = modes 1, 2 (x = off / on; wr = page writes)")
    # Ours: scaling with the number of pieces (mode 1).
    ax = f.axes[1][1]
    drew = False
    for kind, label, color in (("blob_temp_scaling", "Concat", OURS_COLORS[0]),
                               ("blob_append_scaling", "Append", OURS_COLORS[2])):
        pts = sorted((r.param("chunks", cast=int), r.seconds) for r in run.select(kind))
        pts = [p for p in pts if p[0]]
        if not pts:
            continue
        drew = True
        xs, ys = zip(*pts)
        ax.plot(xs, ys, "o-", color=color, label="%s, mode 1" % label)
        if kind == "blob_temp_scaling" and ys[0] > 0:
            ax.plot(xs, [ys[0] * n / xs[0] for n in xs], ":", color="#999999",
                    label="linear from the first point")
            ax.plot(xs, [ys[0] * (n / xs[0]) ** 2 for n in xs], "--", color="#cccccc",
                    label="quadratic (copying both operands)")
    if drew:
        ax.set_xlabel("pieces concatenated")
        ax.set_ylabel("seconds, block + commit")
        ax.legend(fontsize=8)
        ax.set_ylim(bottom=0)
    else:
        ax.text(0.5, 0.5, "no scaling rows in this run (--scaling=0)", ha="center",
                transform=ax.transAxes)
    _ours_title(ax, "time against the number of pieces (the article has one size only)")

    blob = median([r.counter("blob_bytes") for r in rows])
    want = a["chunks"] * a["chunk_bytes"]
    if blob is not None and abs(blob - want) > 1:
        f.note("REDUCED SIZE: this run built a %.1f MB BLOB; the article's is %d x %d B = %.1f MB"
               % (blob / 1e6, a["chunks"], a["chunk_bytes"], want / 1e6))
    f.note("the article: %s; Firebird/HQbird on its own server, not this machine" % a["source"])
    f.save(out)


# ---------------------------------------------------------------- mass_update

def plot_mass_update(run, out):
    ws_rows = [r for r in run.rows if "working_set" in r.params]
    st_rows = [r for r in run.rows if "series" in r.params]
    ncols = 3 if ws_rows else 2
    f = Figure(run, "Mass UPDATE in one transaction: `update tst set val = val + 0` four times, "
                    "seconds per statement", ncols=ncols,
               width_ratios=[1, 1, 0.9] if ws_rows else None)
    f.skip_settings.add("page_size")  # each row names its own (--page_sizes)
    ax_a, ax_o = f.axes[0][0], f.axes[0][1]
    # Article (2004) and the Firebird 3.0 reference, per statement, log scale.
    m = art.MASS_UPDATE_2004
    for i, (engine, secs, derived) in enumerate(m["update34"]):
        ax_a.plot([3, 4], [secs, secs], "s-", color=ARTICLE_COLOR, alpha=1.0 - 0.17 * i,
                  linewidth=2)
        # The last two are close on a log scale: one label above its line, one below.
        below = i == len(m["update34"]) - 2
        ax_a.annotate("%s%s: %s" % (engine, " (derived)" if derived else "", _seconds_fmt(secs)),
                      (3, secs), fontsize=7, xytext=(0, -9 if below else 3),
                      textcoords="offset points")
    fb = art.MASS_UPDATE_FB3
    for j, (rows, secs) in enumerate(sorted(fb["updates"].items())):
        ax_a.plot([1, 2, 3, 4], secs, "o--", color=OURS_COLORS[4 + j],
                  label="Firebird 3.0.11, %s rows, page %d" % (human_count(rows), fb["page_size"]))
    ax_a.plot([], [], "s-", color=ARTICLE_COLOR,
              label="2004 article, %s rows, page %d (updates 3-4 only)" % (
                  human_count(m["rows"]), m["page_size"]))
    ax_a.set_yscale("log")
    ax_a.set_xticks([1, 2, 3, 4])
    ax_a.set_xlim(0.7, 4.6)
    ax_a.set_xlabel("update statement")
    ax_a.set_ylabel("seconds per statement (log)")
    ax_a.legend(fontsize=7, loc="lower left")
    _article_title(ax_a, "2004 (updates 3-4), and the Firebird 3.0.11 reference")

    # Ours: updates 1-4 per configuration (rollback series; the commit series runs the same
    # updates), with the undo log solid and without it dashed.
    groups = {}
    for r in st_rows:
        if r.parts[-2] != "update" or r.param("series") != "rollback":
            continue
        key = (r.param("page_size", 0, int), r.param("rows", 0, int), r.param("index", "1"),
               r.param("no_savepoint", "0"))
        groups.setdefault(key, {})[int(r.parts[-1])] = r.seconds
    for i, (key, upd) in enumerate(sorted(groups.items())):
        page, rows, index, nosp = key
        xs = sorted(upd)
        color = OURS_COLORS[(sorted({k[:2] for k in groups}).index(key[:2])) % len(OURS_COLORS)]
        ax_o.plot(xs, [upd[x] for x in xs], "o-" if nosp == "0" else "x--", color=color,
                  label="%s rows, page %d%s%s" % (human_count(rows), page,
                                                  "" if index == "1" else ", no index",
                                                  ", no_savepoint" if nosp == "1" else ""))
    if groups:
        ax_o.set_yscale("log")
        # Above the lines: ours are far below the article's top, which the shared scale keeps.
        ax_o.legend(fontsize=6.5, loc="upper center", ncol=2)
    else:
        ax_o.text(0.5, 0.5, "no statements series in this run", ha="center",
                  transform=ax_o.transAxes)
    ax_o.set_xticks([1, 2, 3, 4])
    ax_o.set_xlabel("update statement")
    ax_o.set_ylabel("seconds per statement (log)")
    _ours_title(ax_o, "rollback series, index on VAL")
    if groups:
        # The same scale on both sides, so the gap to the article is what it looks like.
        lo = min(min(ax_a.get_ylim()[0], ax_o.get_ylim()[0]), 1e-3)
        hi = max(ax_a.get_ylim()[1], ax_o.get_ylim()[1])
        ax_a.set_ylim(lo, hi)
        ax_o.set_ylim(lo, hi)

    if ws_rows:
        ax = f.axes[0][2]
        # us per update by pattern: the mean of the end:rollback and end:commit series, as in
        # docs/benchmarks.md; undo log on (no_savepoint:0).
        per = group_median(
            [r for r in ws_rows if r.parts[-1] == "updates" and r.param("no_savepoint") == "0"],
            key=lambda r: (r.param("pattern"), r.param("working_set", 0, int),
                           r.param("page_size", 0, int)),
            value=lambda r: r.counter("us_per_update", float("nan")))
        patterns = []
        for (p, _, _) in per:
            if p not in patterns:
                patterns.append(p)
        configs = sorted({(ws, ps) for (_, ws, ps) in per})
        width = 0.8 / max(1, len(configs))
        for j, (ws, ps) in enumerate(configs):
            vals = [per.get((p, ws, ps), float("nan")) for p in patterns]
            bars = ax.bar([i + j * width for i in range(len(patterns))], vals, width,
                          color=OURS_COLORS[j % len(OURS_COLORS)],
                          label="working set %s, page %d" % (human_count(ws), ps))
            if len(configs) <= 2:  # more labels than that overlap
                _label_bars(ax, bars, "%.2f")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(patterns))])
        ax.set_xticklabels([p.replace("_", "\n") for p in patterns], fontsize=7)
        ax.set_ylabel("microseconds per update")
        ax.legend(fontsize=7)
        _ours_title(ax, "small statements\n(no article figure)")
        ax.title.set_fontsize(9)

    max_rows = max([g[1] for g in groups] or [0])
    if groups and max_rows < 1000000:
        f.note("REDUCED SIZES: at most %s rows here (defaults 10K, 100K, 1M; the article "
               "100K)" % human_count(max_rows))
    f.note("the article: %s. Firebird 3.0.11: %s" % (m["source"], fb["source"]))
    f.save(out)


# ---------------------------------------------------------------- parallel_index

def plot_parallel_index(run, out):
    a = art.PARALLEL_INDEX
    f = Figure(run, "Parallel CREATE INDEX on WORD_DICTIONARY(NAME), warm cache: seconds "
                    "against workers", ncols=2, sharey=True)
    # bench/parallel_index.cc sizes the cache to hold table and index, whatever --cache_pages.
    f.skip_settings.add("cache_pages")
    f.note("ours: page size 8192, a cache holding table and indexes, warmed by a scan "
           "(bench/parallel_index.cc)")
    ax = f.axes[0][0]
    ws = sorted(a["fb5"])
    ax.plot(ws, [a["fb5"][w] for w in ws], "o-", color=ARTICLE_COLOR,
            label="Firebird 5, %s rows" % format(a["rows"], ","))
    for w in ws:
        ax.annotate(_seconds_fmt(a["fb5"][w]), (w, a["fb5"][w]), fontsize=8, xytext=(4, 4),
                    textcoords="offset points")
    for j, (rows, (lo, hi)) in enumerate(sorted(a["fb3"].items(), reverse=True)):
        ax.errorbar([1], [(lo + hi) / 2], yerr=[[(hi - lo) / 2], [(hi - lo) / 2]], fmt="s",
                    capsize=5, color=OURS_COLORS[4 + j],
                    label="Firebird 3.0.11, %s rows, 1 worker: %.2f-%.2f s (2-core VM like ours)"
                    % (human_count(rows), lo, hi))
    _workers_axis(ax, ws, None)
    ax.set_ylabel("seconds")
    ax.legend(fontsize=7)
    _article_title(ax, "Firebird 5: 6.8 s on 1 worker, 3.2 s on 4")

    ax = f.axes[0][1]
    rows = [r for r in run.rows if r.parts[0] == "parallel_index"]
    lines = group_median([r for r in rows if "workers" in r.params],
                         key=lambda r: (r.param("rows", 0, int), r.param("temp", "?"),
                                        r.param("sort_mb", None, int), r.param("workers", 0, int)))
    configs = sorted({k[:3] for k in lines}, key=lambda k: (-k[0], k[1], k[2] or 0))
    all_w = []
    for i, cfg in enumerate(configs):
        pts = sorted((k[3], v) for k, v in lines.items() if k[:3] == cfg)
        xs, ys = zip(*pts)
        all_w.extend(xs)
        rows_n, temp, smb = cfg
        color = OURS_COLORS[i % len(OURS_COLORS)]
        speedup = " (%d/1: %.2fx)" % (xs[1], ys[0] / ys[1]) if len(xs) > 1 and xs[0] == 1 \
            and ys[1] > 0 else ""
        ax.plot(xs, ys, "o-" if smb is None else "x--", color=color,
                label="%s rows, temp %s%s%s" % (human_count(rows_n), temp,
                                                ", sort %d MB (spills)" % smb if smb else "",
                                                speedup))
        if smb is None:
            _label_points(ax, xs, ys, color)
    ins = [r for r in rows if r.param("build") == "insert"]
    for r in ins:
        f.note("ours, one entry at a time (build:insert), %s rows, 1 worker: %s (not drawn)"
               % (human_count(r.param("rows", 0, int)), _seconds_fmt(r.seconds)))
    _workers_axis(ax, all_w or [1], _cpus(run))
    _same_workers(f.axes[0], list(a["fb5"]) + all_w)
    ax.set_ylabel("seconds (the CreateIndex call)")
    if configs:
        ax.legend(fontsize=7)
    _ours_title(ax, "bulk build")
    max_rows = max([c[0] for c in configs] or [0])
    if configs and max_rows < 4000000:
        f.note("REDUCED SIZES: at most %s rows here (the article %s, our default 1M and 4M)"
               % (human_count(max_rows), format(a["rows"], ",")))
    f.note("the article: %s; Firebird 3.0.11 reference from bench/parallel_index's summary "
           "(2026-12-02)" % a["source"])
    f.save(out)


# ---------------------------------------------------------------- parallel_sweep

def plot_parallel_sweep(run, out):
    a = art.PARALLEL_SWEEP
    f = Figure(run, "Parallel sweep of BIGTABLE after an update of every row: seconds against "
                    "workers", ncols=2, sharey=True)
    ax = f.axes[0][0]
    ws = sorted(a["fb5"])
    ax.plot(ws, [a["fb5"][w] for w in ws], "o-", color=ARTICLE_COLOR,
            label="Firebird 5, gfix -sweep (table size not given)")
    for w in ws:
        ax.annotate(_seconds_fmt(a["fb5"][w]), (w, a["fb5"][w]), fontsize=8, xytext=(4, 4),
                    textcoords="offset points")
    lo, hi = a["fb3_first"]
    ax.errorbar([1], [(lo + hi) / 2], yerr=[[(hi - lo) / 2], [(hi - lo) / 2]], fmt="s",
                capsize=5, color=OURS_COLORS[4],
                label="Firebird 3.0.11, %s rows, dead versions, first sweep: %.1f-%.1f s"
                % (human_count(a["fb3_rows"]), lo, hi))
    ax.plot([1], [a["fb3_second"]], "v", color=OURS_COLORS[4],
            label="Firebird 3.0.11, second sweep: %s" % _seconds_fmt(a["fb3_second"]))
    ax.set_yscale("log")
    _workers_axis(ax, ws, None)
    ax.set_ylabel("seconds (log)")
    ax.legend(fontsize=7, loc="center right")
    _article_title(ax, "Firebird 5: 20.6 s on 1 worker, 9.4 s on 4")

    ax = f.axes[0][1]
    lines = group_median([r for r in run.rows if r.parts[0] == "parallel_sweep"],
                         key=lambda r: (r.param("rows", 0, int), r.param("garbage", "?"),
                                        r.param("pass", "?"), r.param("workers", 0, int)))
    configs = sorted({k[:3] for k in lines}, key=lambda k: (-k[0], k[1] != "dead", k[2]))
    all_w = []
    for cfg in configs:
        pts = sorted((k[3], v) for k, v in lines.items() if k[:3] == cfg)
        xs, ys = zip(*pts)
        all_w.extend(xs)
        rows_n, garbage, pas = cfg
        color = OURS_COLORS[(0 if garbage == "dead" else 1) + 2 * sorted(
            {c[0] for c in configs}, reverse=True).index(rows_n) % len(OURS_COLORS)]
        ys = [max(y, 1e-6) for y in ys]
        speedup = " (%d/1: %.2fx)" % (xs[1], ys[0] / ys[1]) if pas == "first" and \
            len(xs) > 1 and xs[0] == 1 else ""
        ax.plot(xs, ys, "o-" if pas == "first" else "v--", color=color,
                label="%s rows, %s versions, %s sweep%s" % (human_count(rows_n), garbage, pas,
                                                            speedup))
        _label_points(ax, xs, ys, color)
    ax.set_yscale("log")
    _workers_axis(ax, all_w or [1], _cpus(run))
    _same_workers(f.axes[0], list(a["fb5"]) + all_w)
    ax.set_ylabel("seconds (log; the Sweep call)")
    if configs:
        ax.legend(fontsize=7, loc="center right")
    _ours_title(ax, "second sweep skips pages flagged swept")
    max_rows = max([c[0] for c in configs] or [0])
    if configs and max_rows < a["fb3_rows"]:
        f.note("REDUCED SIZES: %s rows here (default and Firebird 3.0.11 reference: 1M; the "
               "article's table is larger)" % human_count(max_rows))
    f.note("the article: %s; Firebird 3.0.11 reference from bench/parallel_sweep's summary "
           "(2026-12-02)" % a["source"])
    f.save(out)


# ---------------------------------------------------------------- blob_store

_CLASSES = ["very_small", "small", "medium", "large"]


def plot_blob_store(run, out):
    a = art.BLOB_STORE
    f = Figure(run, "Files in the database: MB/s per size class and layout, EmberDB against "
                    "SQLite in the same run (higher is better)", ncols=4,
               width_ratios=[1.0, 1.2, 1.2, 1.2], size=(21, 6.2))
    ax = f.axes[0][0]
    y = 0
    yt, yl = [], []
    for phase, items in a["relative_time"].items():
        for layout, lo, hi in items:
            ax.barh(y, hi, color=ARTICLE_COLOR, alpha=0.35)
            ax.barh(y, lo, color=ARTICLE_COLOR)
            ax.annotate("%.1f-%.1fx" % (lo, hi) if hi != lo else "1 (fastest)", (hi, y),
                        fontsize=7, va="center", xytext=(3, 0), textcoords="offset points")
            yt.append(y)
            yl.append("%s: %s" % (phase, layout))
            y += 1
        y += 0.6
    ax.set_yticks(yt)
    ax.set_yticklabels(yl, fontsize=8)
    ax.set_ylim(y + 2.2, -0.7)  # top to bottom, with room under the bars for the text
    ax.set_xlim(0, 2.6)
    ax.set_xlabel("time relative to the fastest layout (range in the text)")
    ax.text(0.05, y + 1.9, a["read_order"].replace(": ", ":\n") + ".\nNo numbers: the article "
            "publishes charts only;\nthese are the ratios its text states.", fontsize=7,
            va="bottom")
    _article_title(ax, "PostgreSQL 8.3, ~%d MB per class" % a["mb_per_class"])
    ax.title.set_fontsize(9)

    rows = [r for r in run.rows if r.parts[0] == "blob_store" and len(r.parts) >= 6]
    # name: blob_store/<class>/<layout>/run:<r>/<engine>/<phase>
    mbs = group_median(rows, key=lambda r: (r.parts[5], r.parts[1], r.parts[2], r.parts[4]),
                       value=lambda r: r.counter("MB/s", float("nan")))
    layouts = []
    for r in rows:
        if r.parts[2] not in layouts:
            layouts.append(r.parts[2])
    classes = [c for c in _CLASSES if any(r.parts[1] == c for r in rows)]
    classes += sorted({r.parts[1] for r in rows} - set(classes))
    series = [(lay, eng) for lay in layouts for eng in ("ember", "sqlite")]

    def layout_label(lay):
        kind, _, n = lay.partition(":")
        size = "%d KB" % (int(n) // 1024) if n.isdigit() and int(n) >= 1024 else n + " B"
        return {"bytes": "bytes column", "striped": "striped %s" % size,
                "blob": "BLOB, %s buffer" % size}.get(kind, lay)

    width = 0.8 / max(1, len(series))
    for k, phase in enumerate(("store", "read", "delete")):
        ax = f.axes[0][k + 1]
        for j, (lay, eng) in enumerate(series):
            vals = [mbs.get((phase, c, lay, eng), float("nan")) for c in classes]
            color = OURS_COLORS[layouts.index(lay) % len(OURS_COLORS)]
            ax.bar([i + j * width for i in range(len(classes))], vals, width, color=color,
                   alpha=1.0 if eng == "ember" else 0.4, hatch=None if eng == "ember" else "..",
                   edgecolor="white" if eng == "ember" else color,
                   label="%s, %s" % (layout_label(lay), "EmberDB" if eng == "ember"
                                     else "SQLite"))
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(classes))])
        ax.set_xticklabels([c.replace("_", " ") for c in classes], fontsize=8)
        ax.set_yscale("log")  # very small files run 100x slower than large ones
        ax.set_ylabel("MB/s (file bytes / phase seconds, log)")
        if k == 0:
            ax.legend(fontsize=7, loc="upper left")
        ax.set_title("ours: %s (median of runs)" % phase, fontsize=10, color=OURS_COLORS[0])
    # Sizes: MB per class = MB/s x seconds of a store row.
    per_class = group_median([r for r in rows if r.parts[5] == "store"],
                             key=lambda r: r.parts[1],
                             value=lambda r: r.counter("MB/s", 0) * r.seconds)
    if per_class:
        mb = max(per_class.values())
        if mb < 99:
            f.note("REDUCED SIZES: at most %.1f MB per size class here (default 100 MB; the "
                   "article about 500 MB)" % mb)
    runs = run.context.get("runs")
    f.note("deletes include EmberDB's garbage collection; %s; the article: %s" % (
        "%s run(s) per comparison, alternating order" % runs if runs else "runs not recorded",
        a["source"]))
    f.save(out)


# ---------------------------------------------------------------- backup_restore

def plot_backup_restore(run, out):
    a = art.BACKUP_RESTORE
    f = Figure(run, "Backup and restore: seconds against workers", ncols=2, sharey=True)
    ax = f.axes[0][0]
    ticks, labels = [], []
    x = 0
    for w in sorted(a["fb5_backup"]):
        s = a["fb5_backup"][w]
        ax.bar(x, s, color=ARTICLE_COLOR)
        ax.annotate(_seconds_fmt(s), (x, s), ha="center", va="bottom", fontsize=7)
        ticks.append(x)
        labels.append("backup\n%d worker%s" % (w, "s" if w > 1 else ""))
        x += 1
    x += 0.5
    for w in sorted(a["fb5_restore"]):
        total, data, idx = a["fb5_restore"][w]
        ax.bar(x, data, color=ARTICLE_COLOR, alpha=0.9, label="data" if w == 1 else None)
        ax.bar(x, idx, bottom=data, color=ARTICLE_COLOR, alpha=0.45, hatch="//",
               label="indexes" if w == 1 else None)
        ax.bar(x, total - data - idx, bottom=data + idx, color=ARTICLE_COLOR, alpha=0.2,
               label="rest" if w == 1 else None)
        ax.annotate(_seconds_fmt(total), (x, total), ha="center", va="bottom", fontsize=7)
        ticks.append(x)
        labels.append("restore\n%d worker%s" % (w, "s" if w > 1 else ""))
        x += 1
    x += 0.5
    for what, (lo, hi) in (("backup", a["fb3_backup"]), ("restore", a["fb3_restore"])):
        ax.errorbar([x], [(lo + hi) / 2], yerr=[[(hi - lo) / 2], [(hi - lo) / 2]], fmt="s",
                    capsize=5, color=OURS_COLORS[4])
        ax.annotate("%.2f-%.2f s" % (lo, hi), (x, hi), ha="center", va="bottom", fontsize=7)
        ticks.append(x)
        labels.append("FB 3.0.11\n%s" % what)
        x += 1
    ax.set_yscale("log")
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("seconds (log)")
    ax.legend(fontsize=7, loc="upper right")
    _article_title(ax, "Firebird 5 gbak, 1 vs 4 workers;\nFirebird 3.0.11 gbak on our %s "
                   "database" % a["fb3_rows"])
    ax.title.set_fontsize(9)

    ax = f.axes[0][1]
    rows = [r for r in run.rows if r.parts[0] == "backup_restore"]
    ops = group_median(rows, key=lambda r: (r.param("op", "?"), r.param("workers", 0, int)))
    load = group_median(rows, key=lambda r: (r.param("op", "?"), r.param("workers", 0, int)),
                        value=lambda r: r.counter("load_s"))
    index = group_median(rows, key=lambda r: (r.param("op", "?"), r.param("workers", 0, int)),
                         value=lambda r: r.counter("index_s"))
    mbps = group_median(rows, key=lambda r: (r.param("op", "?"), r.param("workers", 0, int)),
                        value=lambda r: r.counter("MBps"))
    ticks, labels = [], []
    x = 0
    stacked = False
    for op in ("backup", "restore"):
        for w in sorted(k[1] for k in ops if k[0] == op):
            s = ops[(op, w)]
            ld, ix = load.get((op, w)), index.get((op, w))
            if op == "restore" and ld is not None and ix is not None:
                first = not stacked
                stacked = True
                ax.bar(x, ld, color=OURS_COLORS[0], label="data (load_s)" if first else None)
                ax.bar(x, ix, bottom=ld, color=OURS_COLORS[0], alpha=0.45, hatch="//",
                       label="indexes (index_s)" if first else None)
                ax.bar(x, max(s - ld - ix, 0), bottom=ld + ix, color=OURS_COLORS[0], alpha=0.2,
                       label="rest" if first else None)
            else:
                ax.bar(x, s, color=OURS_COLORS[0])
            text = _seconds_fmt(s)
            if mbps.get((op, w)):
                text += "\n%.0f MB/s" % mbps[(op, w)]
            ax.annotate(text, (x, s), ha="center", va="bottom", fontsize=7)
            ticks.append(x)
            labels.append("%s\n%d worker%s" % (op, w, "s" if w > 1 else ""))
            x += 1
        x += 0.5
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("seconds (log)")
    fb5 = [v for v in a["fb5_backup"].values()] + [v for t in a["fb5_restore"].values()
                                                   for v in t]
    _log_range([f.axes[0][0], ax], fb5 + list(a["fb3_backup"]) + list(a["fb3_restore"])
               + list(ops.values()) + [v for v in load.values() if v])
    if stacked:
        ax.legend(fontsize=7, loc="upper left")
    if not rows:
        ax.text(0.5, 0.5, "no backup_restore rows", ha="center", transform=ax.transAxes)
    _ours_title(ax, "restore: data (solid) + indexes (hatched) + rest")
    ax.title.set_fontsize(9)
    size = median([r.counter("bytes") for r in rows])
    if size:
        f.note("ours: backup file of %.1f MB (the 'bytes' counter)" % (size / 1e6))
    nrows = median([r.counter("rows") for r in rows])
    if nrows is not None and nrows < 1000000:
        f.note("REDUCED SIZES: %s rows here (default --rows=1000000, with BIGTABLE a quarter of "
               "that: the Firebird 3.0.11 reference's 1M + 250K rows)" % human_count(int(nrows)))
    f.note("the article: %s; Firebird 3.0.11 reference (bench/backup_restore's summary): gbak on "
           "%s, %s" % (a["source"], a["fb3_rows"], a["fb3_db"]))
    f.save(out)


# ---------------------------------------------------------------- oltp_cache

def plot_oltp_cache(run, out):
    """The article's score table, and ours drawn from whatever the rows carry: the bench did
    not exist when this was written, so its row names are guessed (a cache size param and a
    mode param) and the chart says what it plotted."""
    a = art.OLTP_CACHE
    f = Figure(run, "Page cache per connection vs shared: throughput of 20 connections against "
                    "cache size", ncols=2)
    ax = f.axes[0][0]
    ax.plot(a["buffers"], a["classic"], "o-", color=ARTICLE_COLOR, label="Classic")
    ax.plot(a["buffers"], a["superclassic"], "s--", color=ARTICLE_COLOR, alpha=0.6,
            label="SuperClassic")
    ax.axhline(a["superserver"], color="#999999", linestyle=":",
               label="SuperServer (shared cache): %d" % a["superserver"])
    ax.set_xlabel("page buffers per connection")
    ax.set_ylabel("score")
    ax.legend(fontsize=8)
    _article_title(ax, "Firebird 2.5, 1.7 TB database")

    ax = f.axes[0][1]
    size_keys = ("cache_pages", "buffers", "cache", "pages")
    mode_keys = ("mode", "cache_mode", "cache_kind")
    ykeys = ("score", "tps", "txns_per_s", "ops_per_s", "items_per_second")
    pts = {}
    ylabel = None
    for r in run.rows:
        size = next((r.param(k, None, int) for k in size_keys if k in r.params), None)
        if size is None:
            continue
        mode = next((r.params[k] for k in mode_keys if k in r.params), "ours")
        yk = next((k for k in ykeys if k in r.counters), None)
        y = r.counters[yk] if yk else r.seconds
        ylabel = yk or "seconds"
        pts.setdefault(mode, []).append((size, y))
    for i, (mode, p) in enumerate(sorted(pts.items())):
        g = group_median(p, key=lambda t: t[0], value=lambda t: t[1])
        xs = sorted(g)
        ax.plot(xs, [g[x] for x in xs], "o-", color=OURS_COLORS[i % len(OURS_COLORS)],
                label=mode)
    if pts:
        ax.set_xlabel("cache pages")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        _ours_title(ax, "%s against cache size (row names read generically)" % ylabel)
    else:
        ax.text(0.5, 0.5, "the rows carry no cache-size parameter this script knows\n(%s):"
                "\nteach plot_oltp_cache in tools/plot/charts.py the bench's row names"
                % ", ".join(size_keys), ha="center", transform=ax.transAxes, fontsize=8)
        _ours_title(ax, "not drawn")
    f.note("the article's score is its own OLTP test's, not comparable in units with ours; "
           "the article: %s" % a["source"])
    f.save(out)


# ---------------------------------------------------------------- core (no article)

def plot_core(run, out):
    f = Figure(run, "Storage core: EmberDB against SQLite doing the same work in the same run "
                    "(no article figure: the peer is SQLite)", ncols=2)
    ax = f.axes[0][0]
    ops = ["insert", "lookup", "update", "scan"]
    rows = [r for r in run.rows if r.parts[0] == "core" and len(r.parts) == 4
            and r.parts[1] in ops]
    t = group_median(rows, key=lambda r: (r.parts[1], r.parts[3]))
    engines = [e for e in ("ember", "ember_nodw", "sqlite") if any(k[1] == e for k in t)]
    names = {"ember": "EmberDB", "ember_nodw": "EmberDB, no torn-page protection",
             "sqlite": "SQLite"}
    colors = {"ember": OURS_COLORS[0], "ember_nodw": OURS_COLORS[9], "sqlite": SQLITE_COLOR}
    width = 0.8 / max(1, len(engines))
    for j, e in enumerate(engines):
        vals = [t.get((op, e), float("nan")) for op in ops]
        bars = ax.bar([i + j * width for i in range(len(ops))], vals, width, color=colors[e],
                      label=names[e])
        _label_bars(ax, bars, "%.3g")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(ops))])
    ax.set_xticklabels(ops)
    ax.set_ylabel("seconds (median of runs)")
    ax.legend(fontsize=8)
    ax.set_title("one-shot phases (lower is better)", fontsize=10)

    ax = f.axes[0][1]
    commits = {}
    for r in run.rows:
        if r.parts[:2] == ["core", "commit"]:
            commits.setdefault(r.param("dw", "1"), []).append(
                (r.param("threads", r.threads, int), r.counter("commits_per_s")))
    for dw, p in sorted(commits.items(), reverse=True):
        p = sorted(x for x in p if x[1] is not None)
        if p:
            xs, ys = zip(*p)
            ax.plot(xs, ys, "o-" if dw == "1" else "x--",
                    color=OURS_COLORS[0] if dw == "1" else OURS_COLORS[9],
                    label="doublewrite %s" % ("on" if dw == "1" else "off"))
    if commits:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({x for p in commits.values() for x, _ in p}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.legend(fontsize=8)
    ax.set_xlabel("threads committing one-insert transactions")
    ax.set_ylabel("commits per second (forced writes)")
    fetch = [r for r in run.rows if r.parts[:2] == ["core", "cache_fetch"]]
    hits = ", ".join("%.1f ns with %d thread%s" % (r.counter("ns_per_fetch", float("nan")),
                                                   r.param("threads", r.threads, int),
                                                   "s" if r.param("threads", 1, int) > 1 else "")
                     for r in fetch)
    ax.set_title("group commit" + ("\n(buffer cache hit: %s)" % hits if hits else ""),
                 fontsize=10)
    # rows/s is items_per_second: the rows inserted = that x the seconds.
    rows_flag = median([r.counter("items_per_second", 0) * r.seconds for r in rows
                        if r.parts[1] == "insert"])
    if rows_flag and rows_flag < 999000:
        f.note("REDUCED SIZES: %s rows (default 1M)" % human_count(int(round(rows_flag))))
    f.save(out)


# ---------------------------------------------------------------- sort_keys (no article)

def plot_sort_keys(run, out):
    f = Figure(run, "The index build's sorter alone (random words): seconds per configuration "
                    "(no article figure: the budget is the issue's)", ncols=2, sharey=True,
               width_ratios=[0.35, 1])
    # The sorter alone: no database, so no page or durability settings apply.
    f.skip_settings.update({"page_size", "cache_pages", "forced_writes", "doublewrite"})
    rows = [r for r in run.rows if r.parts[0] == "sort_keys"]
    entries = max([r.param("entries", 0, int) for r in rows] or [0])
    ax = f.axes[0][0]
    ax.bar([0], [0.1], bottom=[0.3], color=ARTICLE_COLOR, alpha=0.5, width=0.6)
    ax.annotate("sort + merge of\n4M entries,\none core", (0, 0.4), ha="center", va="bottom",
                fontsize=8)
    ax.set_xlim(-0.6, 0.6)
    ax.set_xticks([])
    ax.set_ylabel("seconds")
    ax.set_title("budget (bench/sort_keys.cc):\n300-400 ms", fontsize=10, color=ARTICLE_COLOR)
    ax = f.axes[0][1]
    labels = []
    for i, r in enumerate(rows):
        bottom = 0
        for k, (c, color) in enumerate((("add_s", OURS_COLORS[0]), ("sort_s", OURS_COLORS[1]),
                                        ("merge_s", OURS_COLORS[2]))):
            v = r.counter(c, 0.0)
            ax.bar(i, v, bottom=bottom, color=color, label=c if i == 0 else None)
            bottom += v
        ax.annotate(_seconds_fmt(r.seconds), (i, r.seconds), ha="center", va="bottom",
                    fontsize=7)
        labels.append("/".join(r.parts[2:]).replace("/", "\n"))
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("seconds (add + sort + merge)")
    if rows:
        ax.legend(fontsize=8)
    _ours_title(ax, "%s entries" % human_count(entries))
    if entries and entries < 4000000:
        f.note("REDUCED SIZES: %s entries (the budget is for 4M)" % human_count(entries))
    f.save(out)


# ---------------------------------------------------------------- generic

def plot_generic(run, out, why):
    rows = run.rows
    f = Figure(run, "%s: real time per benchmark row" % run.stem, ncols=1,
               size=(11, max(3.5, 0.28 * len(rows) + 2.2)))
    ax = f.axes[0][0]
    secs = [r.seconds for r in rows]
    ax.barh(range(len(rows)), secs, color=OURS_COLORS[0])
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.name for r in rows], fontsize=7)
    ax.invert_yaxis()
    positive = [s for s in secs if s > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_xscale("log")
    ax.set_xlabel("seconds (real time)")
    f.note(why)
    f.save(out)


PLOTTERS = {
    "blob_temp": plot_blob_temp,
    "mass_update": plot_mass_update,
    "parallel_index": plot_parallel_index,
    "parallel_sweep": plot_parallel_sweep,
    "blob_store": plot_blob_store,
    "backup_restore": plot_backup_restore,
    "oltp_cache": plot_oltp_cache,
    "core": plot_core,
    "sort_keys": plot_sort_keys,
}

# The first part of a row's name -> the benchmark it belongs to.
PREFIXES = {
    "blob_temp": "blob_temp", "blob_append": "blob_temp", "blob_temp_scaling": "blob_temp",
    "blob_append_scaling": "blob_temp", "mass_update": "mass_update",
    "parallel_index": "parallel_index", "parallel_sweep": "parallel_sweep",
    "blob_store": "blob_store", "backup_restore": "backup_restore", "oltp_cache": "oltp_cache",
    "core": "core", "sort_keys": "sort_keys",
}


def recognise(run):
    """The benchmark a JSON file is from: by its rows' names, else by its file name."""
    names = {PREFIXES.get(p) for p in run.prefixes()}
    names.discard(None)
    if len(names) == 1:
        return names.pop()
    if run.stem in PLOTTERS:
        return run.stem
    return None
