#!/usr/bin/python3
# tools/plot/plot_bench.py: PNG charts of the JSON the bench/ binaries write
# (--benchmark_out=FILE --benchmark_out_format=json; `tools/dev bench NAME` writes
# build/bench-results/NAME.json). For each file, one figure: the article's published figures on
# the left, this run's on the right (charts.py); a JSON from a benchmark this script does not
# know gets a bar chart of real time per row.
#
#   /usr/bin/python3 tools/plot/plot_bench.py [--out DIR] FILE.json...     (tools/dev plot)
#
# Writes DIR/<bench>.png (default docs/charts) and prints each path written. Exit status: 0 when
# every file was plotted, 1 when one could not be (unreadable JSON, no successful row), 2 on a
# usage error. Run it with Debian's /usr/bin/python3, where python3-matplotlib is installed
# (tools/dev setup installs it); another python3 on PATH may lack matplotlib.
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import charts  # noqa: E402
except ImportError as e:  # matplotlib missing: say how to get it
    sys.stderr.write("plot_bench: %s\nplot_bench: run it with /usr/bin/python3 after "
                     "`tools/dev setup` (installs python3-matplotlib)\n" % e)
    sys.exit(2)
from bench_json import BenchRun  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description="PNG charts of bench/ JSON files")
    ap.add_argument("--out", default="docs/charts", help="directory for the PNG files")
    ap.add_argument("json", nargs="+", help="Google Benchmark JSON files")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    status = 0
    written = set()
    for path in args.json:
        try:
            run = BenchRun(path)
        except (OSError, ValueError) as e:
            sys.stderr.write("plot_bench: %s: %s\n" % (path, e))
            status = 1
            continue
        if not run.rows:
            sys.stderr.write("plot_bench: %s: no row ran without error (%d failed); nothing to "
                             "plot\n" % (path, len(run.failed)))
            status = 1
            continue
        bench = charts.recognise(run)
        name = bench or run.stem
        if name in written:  # two files of one benchmark in one call: keep both charts
            name = run.stem if run.stem not in written else "%s-%d" % (name, len(written))
        out = os.path.join(args.out, name + ".png")
        try:
            if bench is None:
                charts.plot_generic(run, out, "not a benchmark this script knows (row names "
                                    "%s): real time per row" % ", ".join(sorted(run.prefixes())))
            else:
                charts.PLOTTERS[bench](run, out)
        except Exception as e:  # noqa: BLE001 - one bad file must not stop the others
            sys.stderr.write("plot_bench: %s: drawing %s failed: %s: %s\n"
                             % (path, bench or "generic", type(e).__name__, e))
            status = 1
            continue
        written.add(name)
        print(out)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
