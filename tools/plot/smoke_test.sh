#!/usr/bin/env bash
# tools/plot/smoke_test.sh: the ctest `plot_smoke` (label plot): runs every benchmark binary
# in BENCH_DIR with tiny sizes, writing its JSON into a temporary directory, then
# tools/plot/plot_bench.py on all of them, and fails unless every benchmark exited 0 and every
# chart exists as a non-empty PNG. Only what the charts need is checked here, not the figures.
#
#   tools/plot/smoke_test.sh BENCH_DIR        (bench/CMakeLists.txt passes build/<preset>/bench)
#
# It runs the binaries it finds, so a new benchmark is covered as soon as it is built, and a
# binary without an entry in TINY below fails the test: give it flags small enough that the
# whole test stays under ~40 s on a 2-core machine (CI time is tight). Databases go to the RAM
# disk (--db_dir=ram), where a sync costs nothing: sizes and syncs are not what is tested.
set -euo pipefail
bench_dir=${1:?usage: tools/plot/smoke_test.sh BENCH_DIR}
here=$(cd "$(dirname "$0")" && pwd)
python=${EMBER_PLOT_PYTHON:-/usr/bin/python3}  # Debian's, where python3-matplotlib lives

# Tiny sizes per binary (each bench's header comment lists its flags).
declare -A TINY=(
  [backup_restore]="--rows=5000 --blob_mb=1 --workers=1,2"
  [blob_temp]="--chunks=20 --chunk_bytes=4096"
  [blob_store]="--mb_per_class=1 --runs=1"
  [core]="--rows=5000 --lookups=1000 --update_txns=20 --runs=1 --benchmark_min_time=0.01"
  [mass_update]="--rows=2000 --page_sizes=8192 --working_set=100 --passes=2 --ws_table_rows=2000"
  [parallel_index]="--rows=20000 --workers=1,2 --temps=ram --spill_sort_memory_mb=0"
  [parallel_sweep]="--rows=5000 --workers=1,2"
  [sort_keys]="--entries=20000 --runs=1,2 --temps=ram"
  [ycsb]="--records=2000 --operations=300 --max_scan_length=20 --runs=1"
)

if ! "$python" -c 'import matplotlib' 2>/dev/null; then
  echo "smoke_test: $python cannot import matplotlib: run tools/dev setup" \
       "(installs python3-matplotlib)" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ember-plot-smoke-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
names=()
binaries=0
for exe in "$bench_dir"/*; do
  if [ ! -f "$exe" ] || [ ! -x "$exe" ]; then continue; fi
  binaries=$((binaries + 1))
  name=$(basename "$exe")
  if [ -z "${TINY[$name]+set}" ]; then
    echo "smoke_test: FAIL: no tiny flags for the benchmark '$name': add it to TINY in $0" >&2
    fail=1
    continue
  fi
  start=$(date +%s%N)
  # shellcheck disable=SC2086  # the flags are words
  if "$exe" ${TINY[$name]} --db_dir=ram --benchmark_out="$tmp/$name.json" \
       --benchmark_out_format=json >"$tmp/$name.log" 2>&1; then
    printf 'smoke_test: %-15s ran in %5.1f s\n' "$name" "$(( ($(date +%s%N) - start) / 1000000 ))e-3"
  else
    echo "smoke_test: FAIL: $name ${TINY[$name]} exited non-zero; its output ends:" >&2
    tail -n 20 "$tmp/$name.log" >&2
    fail=1
  fi
  names+=("$name")
done
if [ $binaries -eq 0 ]; then
  echo "smoke_test: FAIL: no benchmark binary in $bench_dir" >&2
  exit 1
fi

jsons=()
for n in "${names[@]}"; do [ -s "$tmp/$n.json" ] && jsons+=("$tmp/$n.json"); done
if [ ${#jsons[@]} -gt 0 ]; then
  "$python" "$here/plot_bench.py" --out "$tmp/charts" "${jsons[@]}" || fail=1
fi
for n in "${names[@]}"; do
  png="$tmp/charts/$n.png"
  if [ ! -s "$png" ] || [ "$(head -c 4 "$png" | tail -c 3)" != "PNG" ]; then
    echo "smoke_test: FAIL: no chart $n.png (a non-empty PNG) from $n's JSON" >&2
    fail=1
  fi
done
[ $fail -eq 0 ] && echo "smoke_test: ${#names[@]} benchmarks, ${#names[@]} charts"
exit $fail
