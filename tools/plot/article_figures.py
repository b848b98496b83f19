# tools/plot/article_figures.py: the published figures each benchmark is compared with, as
# constants, each with where it comes from. They are the left panel of every chart ("the
# article's figure"); nothing here is measured on this machine.
#
# Sources:
#   experiments.md  = ../shared/design/experiments.md (the English digest of the articles)
#   seeds/X         = ../shared/seeds/X (the articles themselves)
#   bench/X.cc      = the reference constants a benchmark's own summary prints
#   docs/benchmarks.md "How the comparisons are made" = the Firebird 3.0.11 reference runs

# ---------------------------------------------------------------- blob_temp
# experiments.md section 1 (seeds/blob-temp-space-hqbird.ru.txt): one EXECUTE BLOCK building a
# BLOB by 750 concatenations of a 32 KB piece, then COMMIT; seconds.
BLOB_TEMP = {
    "source": "HQbird BlobTempSpace article (experiments.md section 1)",
    "chunks": 750,
    "chunk_bytes": 32768,
    # (temp storage, off block, off commit, on block, on commit)
    "times": [
        ("RAM disk", 20.9, 87.4, 9.0, 0.015),
        ("SSD 870 QVO", 21.8, 84.2, 9.1, 0.016),
    ],
    # Page writes, block + commit: off 1,127 + 1,116,358; on 36 + 3,021 (bench/blob_temp.cc's
    # summary prints the totals 1,117,485 and 3,057).
    "writes_off": 1117485,
    "writes_on": 3057,
    "growth_off_mb": 8839,
}

# ---------------------------------------------------------------- mass_update
# seeds/mass-update-2004.ru.txt (experiments.md section 2): 100K rows, page size 4096, 2048
# cache pages, index on VAL, four `update tst set val=val+0` in one transaction. The article
# gives numbers only for updates 3 and 4: about 2.5 s on Firebird 1.5 and Yaffil, ~90 s on
# InterBase 7.0 (30x), and slow-downs of 500x (Firebird 1.0) and 750x (InterBase 7.1); the
# last two are drawn as 500 x 2.5 s and 750 x 2.5 s (derived, marked so).
MASS_UPDATE_2004 = {
    "source": "iBase lab 2004 mass-UPDATE article, 100K rows, page 4096 (experiments.md section 2)",
    "rows": 100000,
    "page_size": 4096,
    # (engine, seconds of update 3 and 4 each, derived?)
    "update34": [
        ("Firebird 1.5 / Yaffil", 2.5, False),
        ("InterBase 7.0", 90.0, False),
        ("Firebird 1.0 (500x)", 2.5 * 500, True),
        ("InterBase 7.1 (750x)", 2.5 * 750, True),
    ],
}
# bench/mass_update/statements.cc kFirebird / kFirebirdSource (docs/benchmarks.md "How the
# comparisons are made"): Firebird 3.0.11 embedded on a 2-core VM of this class, page size 8192,
# 2048 cache pages, index on VAL; seconds of updates 1-4.
MASS_UPDATE_FB3 = {
    "source": "Firebird 3.0.11 embedded, 2-core VM of this class, page 8192 (bench/mass_update)",
    "page_size": 8192,
    "updates": {100000: [0.215, 0.616, 0.202, 0.218], 1000000: [2.39, 6.32, 2.27, 2.24]},
}

# ---------------------------------------------------------------- parallel_index
# experiments.md section 4 (seeds/firebird5-parallel.ru.txt, 1.1.2): CREATE INDEX on
# 4,079,052 rows, warm cache, Firebird 5: 6.798 s on 1 worker, 3.175 s on 4.
# bench/parallel_index.cc's summary: Firebird 3.0.11 embedded on a 2-core VM of this class
# (8 KiB pages, 65,536 cache pages, warm), 2026-12-02: 5.8-6.2 s for 4M rows, 1.07-1.19 s for 1M
# (one worker: Firebird 3.0 has no parallel build).
PARALLEL_INDEX = {
    "source": "Firebird 5 parallel features article (experiments.md section 4)",
    "rows": 4079052,
    "fb5": {1: 6.798, 4: 3.175},
    "fb3": {4000000: (5.8, 6.2), 1000000: (1.07, 1.19)},
}

# ---------------------------------------------------------------- parallel_sweep
# experiments.md section 4 (seeds/firebird5-parallel.ru.txt, 1.2.3): gfix -sweep after
# `update bigtable set field=field; rollback`, Firebird 5: 20.642 s on 1 worker, 9.406 s on 4
# (the article's table is larger than ours; its size is not given).
# bench/parallel_sweep.cc's summary: Firebird 3.0.11 embedded on a 2-core VM of this class
# (8 KiB pages, 2048 cache pages, gfix -sweep), 2026-12-02: 3.1-3.5 s for 1M rows with dead
# versions, 0.032 s for the second sweep.
PARALLEL_SWEEP = {
    "source": "Firebird 5 parallel features article (experiments.md section 4)",
    "fb5": {1: 20.642, 4: 9.406},
    "fb3_rows": 1000000,
    "fb3_first": (3.1, 3.5),
    "fb3_second": 0.032,
}

# ---------------------------------------------------------------- backup_restore
# experiments.md section 4 (seeds/firebird5-parallel.ru.txt, 1.2.1 and 1.2.2), Firebird 5 gbak:
# backup 35.81 s on 1 worker, 18.27 s on 4; restore 201.6 s (70.7 s data + 121.1 s indexes) on
# 1 worker, 116.7 s (26.7 + 86.1) on 4. Firebird 3.0.11 gbak on our 1M + 250K-row database
# (the lead engineer's reference run for bench/backup_restore): backup 2.2-2.4 s, restore
# 4.75-4.85 s (bench/backup_restore.cc's summary: 8 KiB pages, no BLOBs, a 101 MB database,
# 2026-12-04).
BACKUP_RESTORE = {
    "source": "Firebird 5 parallel features article (experiments.md section 4)",
    "fb5_backup": {1: 35.81, 4: 18.27},
    # workers -> (total, data, indexes)
    "fb5_restore": {1: (201.6, 70.7, 121.1), 4: (116.7, 26.7, 86.1)},
    "fb3_backup": (2.2, 2.4),
    "fb3_restore": (4.75, 4.85),
    "fb3_rows": "1M + 250K rows",
    "fb3_db": "no BLOBs, 101 MB database",
}

# ---------------------------------------------------------------- oltp_cache
# experiments.md section 3 (seeds/tuning-1.7tb-classic-cache.ru.txt): Firebird 2.5, 20
# connections, OLTP score against page buffers per connection; SuperServer (one shared cache)
# scored 169.
OLTP_CACHE = {
    "source": "Tuning a 1.7 TB Firebird 2.5 database (experiments.md section 3)",
    "buffers": [256, 512, 768, 1024, 1500, 2048],
    "classic": [299, 371, 362, 312, 390, 285],
    "superclassic": [372, 359, 386, 387, 392, 284],
    "superserver": 169,
}

# ---------------------------------------------------------------- blob_store
# experiments.md section 5 (seeds/pg-bytea-striped-lob.cs.txt): PostgreSQL 8.3, ~500 MB per
# size class. The article publishes charts, not numbers; its text quantifies only: writing,
# LOB fastest with BYTEA 50-100% slower (striped from 4 KB segments comparable to BYTEA);
# deleting, BYTEA fastest with LOB 10-20% slower; reading, striped with 8-32 KB segments best,
# then BYTEA, then LOB (no ratio given). The chart draws those ratios as ranges of time
# relative to the fastest layout.
BLOB_STORE = {
    "source": "PostgreSQL 8.3 BYTEA / striped / LOB article (experiments.md section 5)",
    "mb_per_class": 500,
    # phase -> [(layout, low, high)] time relative to the phase's fastest layout
    "relative_time": {
        "store": [("LOB", 1.0, 1.0), ("BYTEA", 1.5, 2.0), ("striped >= 4 KB", 1.5, 2.0)],
        "delete": [("BYTEA", 1.0, 1.0), ("LOB", 1.1, 1.2)],
    },
    "read_order": "read: striped 8-32 KB best, then BYTEA, then LOB (no ratio published)",
}
