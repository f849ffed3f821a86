#!/bin/sh
# lifecycle.sh — what the store's lifecycle commands cost (doc/storage.md,
# "Backup, purge, vacuum, forgetting agents"): a store of two experiments
# of PAIRS pairs each, a result of FIELD_KB a pair (217 KB at 1024^2, the
# size the issue measured), made by the broker and filled with the sqlite3
# shell; then, through the real broker and pivctl, a backup, the purge of
# one experiment and a vacuum, each with its figures. Prints; never fails
# on time.
#
#   sh bench/lifecycle.sh [PAIRS] [FIELD_KB]      (default 250 pairs, 217 KB)
#   PIVFARM_BIN=bin (default); needs the sqlite3 shell. 'make bench' runs it.
set -eu
PAIRS=${1:-250}
FIELD_KB=${2:-217}
BIN=${PIVFARM_BIN:-bin}
BIN=$(cd "$BIN" && pwd)
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pivfarm-lifecycle.XXXXXX")
BROKER=
cleanup () {
    [ -n "$BROKER" ] && kill "$BROKER" 2>/dev/null && wait "$BROKER" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
cd "$DIR"
mkdir data
cat > pivfarm.conf <<EOF
broker
    ingest = ipc://$DIR/ingest
    work = ipc://$DIR/work
    control = ipc://$DIR/control
    publish = ipc://$DIR/publish
    store = ./farm.db
watcher
    root = ./data
EOF
start () {
    "$BIN/pivfarm-broker" -c pivfarm.conf >> broker.log 2>&1 &
    BROKER=$!
    i=0
    until "$BIN/pivctl" -c pivfarm.conf status > /dev/null 2>&1; do
        i=$((i + 1)); [ $i -lt 100 ] || { echo "the broker did not start"; cat broker.log; exit 1; }
        sleep 0.1
    done
}
stop () { kill "$BROKER"; wait "$BROKER" 2>/dev/null || true; BROKER=; }
start
stop
# Two experiments, each PAIRS pairs done with a result and its field,
# two files and a few events a pair.
sqlite3 farm.db > /dev/null <<EOF
PRAGMA journal_mode = WAL;
BEGIN;
INSERT INTO experiments (name, created_ns) VALUES ('old', 1), ('kept', 1);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $PAIRS)
INSERT INTO files (experiment, name, size, mtime_ns, seen_ns, paired)
    SELECT e.id, printf ('p_%05d_%s.tif', i, s.x), 2097152, i, i, 1 FROM n,
        experiments e, (SELECT 'a' x UNION ALL SELECT 'b') s;
INSERT INTO pairs (experiment, stem, file_a, file_b, state, attempts, created_ns, finished_ns)
    SELECT fa.experiment, substr (fa.name, 1, 7), fa.id, fb.id, 2, 1, 1, 2 FROM files fa
        JOIN files fb ON fb.experiment = fa.experiment AND fb.name = substr (fa.name, 1, 8) || 'b.tif'
        WHERE fa.name LIKE '%_a.tif';
INSERT INTO attempts (pair, attempt, agent, dispatched_ns, outcome, finished_ns)
    SELECT id, 1, 'a1', 1, 'done', 2 FROM pairs;
INSERT INTO results (pair, attempt, agent, nx, ny, compute_ns, field, recorded_ns)
    SELECT id, 1, 'a1', 127, 127, 1, randomblob ($FIELD_KB * 1024), 2 FROM pairs;
INSERT INTO events (ts_ns, kind, experiment, pair, payload)
    SELECT 1, k.kind, experiment, id, 'attempt=1 agent=a1' FROM pairs,
        (SELECT 'pair' kind UNION ALL SELECT 'dispatch' UNION ALL SELECT 'result') k;
COMMIT;
PRAGMA wal_checkpoint (TRUNCATE);
EOF
MB=$(du -m farm.db | cut -f1)
echo "store: $MB MB, 2 experiments x $PAIRS pairs, a field of $FIELD_KB KB a pair"
start
"$BIN/pivctl" -c pivfarm.conf backup "$DIR/copy.db"
t0=$(date +%s.%N)
"$BIN/pivctl" -c pivfarm.conf --timeout 600000 purge old
t1=$(date +%s.%N)
echo "purge: $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s from pivctl's start to its answer"
"$BIN/pivctl" -c pivfarm.conf vacuum
t0=$(date +%s.%N)
"$BIN/pivctl" -c pivfarm.conf status > /dev/null
t1=$(date +%s.%N)
echo "status after: $(awk "BEGIN { printf \"%.3f\", $t1 - $t0 }") s"
stop
