#!/bin/sh
# demo.sh — 'make demo': the whole farm on one machine. A synthetic camera
# writes pairs of a known flow into an experiment directory, calibrated
# beforehand ('pivctl calibrate'); the watcher, the broker and two agents
# turn them into vector fields while 'pivctl status --watch' shows the
# progress; at the end (or on Ctrl-C) a summary scores the fields and the
# run's mean field (pivctl stats, in m/s) against the known flow, writes the
# HDF5 export, and every process the demo started is stopped by its PID.
# Everything lands in run/demo/.
#
# Settings (environment): PIVFARM_DEMO_PORT first of 4 loopback ports (5570),
# PIVFARM_DEMO_PAIRS (200), PIVFARM_DEMO_RATE pairs/s (5), PIVFARM_DEMO_SIZE
# (1024x1024), PIVFARM_DEMO_FLOW (lamb-oseen:6,120), PIVFARM_DEMO_HTTP_PORT
# of the status page (PIVFARM_DEMO_PORT + 10), PIVFARM_DEMO_SCALE (0.02 mm/px)
# and PIVFARM_DEMO_DT (2 ms): the calibration.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin="$here/bin"
run="$here/run/demo"
port=${PIVFARM_DEMO_PORT:-5570}
pairs=${PIVFARM_DEMO_PAIRS:-200}
rate=${PIVFARM_DEMO_RATE:-5}
size=${PIVFARM_DEMO_SIZE:-1024x1024}
flow=${PIVFARM_DEMO_FLOW:-lamb-oseen:6,120}
scale=${PIVFARM_DEMO_SCALE:-0.02 mm/px}
dt=${PIVFARM_DEMO_DT:-2 ms}
exp=demo1
conf="$run/pivfarm.conf"

say() { printf '== %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

for p in pivfarm-broker pivfarm-watcher pivfarm-agent pivctl pivfarm-synth; do
    [ -x "$bin/$p" ] || die "'$bin/$p' is missing: run 'make' first"
done
case $pairs in '' | *[!0-9]*) die "bad PIVFARM_DEMO_PAIRS '$pairs': expected a whole number" ;; esac
case $port in '' | *[!0-9]*) die "bad PIVFARM_DEMO_PORT '$port': expected a port number" ;; esac
http_port=${PIVFARM_DEMO_HTTP_PORT:-$((port + 10))}

# A port some other program listens on would make the broker fail to bind:
# refuse at once, naming it (when 'ss' can tell; else the broker says so).
port_taken() {
    command -v ss >/dev/null 2>&1 && [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
}
for p in $port $((port + 1)) $((port + 2)) $((port + 3)); do
    if port_taken "$p"; then
        die "port $p on 127.0.0.1 is taken; choose 4 free ports with PIVFARM_DEMO_PORT=N (N to N+3)"
    fi
done

# ------------------------------------------------------------------ processes
pids=""        # every process the demo started, newest first
watch_pid=""   # pivctl status --watch, while the camera runs

# start NAME PROGRAM ARGS...: runs it in the background in a session of its
# own (Ctrl-C reaches the demo alone, which stops everything in order), its
# output in run/demo/NAME.log; remembers its PID as pid_NAME.
start() {
    name=$1
    shift
    setsid "$@" >"$run/$name.log" 2>&1 </dev/null &
    pids="$! $pids"
    eval "pid_$name=$!"
}

# Stops what was started, newest first (camera, agents, watcher, broker: an
# agent reports its last result before the broker goes), each by its PID
# with SIGTERM, and reaps it.
stop_all() {
    stop_watch
    for pid in $pids; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    pids=""
}
stop_watch() {
    if [ -n "$watch_pid" ]; then
        kill -TERM "$watch_pid" 2>/dev/null || true
        wait "$watch_pid" 2>/dev/null || true
        watch_pid=""
    fi
}

# Drops an exited (and so reaped) process from the list: its PID may be
# another process's by the time the demo stops.
forget() {
    rest=""
    for p in $pids; do [ "$p" = "$1" ] || rest="$rest $p"; done
    pids=$rest
}

# Fails naming the log when the process started as NAME has exited.
check_alive() {
    eval "pid=\$pid_$1"
    if ! kill -0 "$pid" 2>/dev/null; then
        forget "$pid"
        sed 's/^/   /' "$run/$1.log" >&2
        die "$1 has stopped (its log above: $run/$1.log)"
    fi
}

interrupted() {
    trap - INT TERM
    stop_watch
    [ -n "${pid_camera:-}" ] && [ -z "${camera_done:-}" ] && { kill -TERM "$pid_camera" 2>/dev/null || true; }
    printf '\n'
    say "interrupted"
    summary
    stop_all
    exit 130
}

ctl() { "$bin/pivctl" -c "$conf" "$@"; }

# One figure of the experiment in 'pivctl --json status' on stdin.
exp_figure() {
    tr -d '\n' | sed -n "s/.*\"experiment\":\"$exp\"[^}]*\"$1\":\\([0-9.]*\\).*/\\1/p"
}

# ------------------------------------------------------------------ summary
summary() {
    # Pairs and latencies from the store (through the broker): done and
    # failed pairs, latency = camera closed frame B -> result recorded, and
    # the rate over the first arrival to the last result.
    say "summary"
    written=$(find "$run/data/$exp" -name 'shot_*_a.tif' 2>/dev/null | wc -l)
    ctl --json pairs "$exp" --limit 10000 >"$run/pairs.json" 2>/dev/null || true
    tr '{' '\n' <"$run/pairs.json" | awk -v written="$written" '
        function num(key,   m) {
            if (match($0, "\"" key "\":[0-9.]+")) return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0
            return -1
        }
        /"state":"done"/ { lat[++done] = num("latency_ms") }
        /"state":"failed"/ { failed++ }
        /"state":"(pending|dispatched)"/ { waiting++ }
        /"pair":/ {
            c = num("created_ns"); f = num("finished_ns")
            if (c > 0 && (first == 0 || c < first)) first = c
            if (f > last) last = f
        }
        END {
            printf "   pairs       %d written by the camera: %d done, %d failed, %d unfinished\n",
                   written, done, failed, waiting
            if (done == 0) exit
            for (i = 2; i <= done; i++) {        # insertion sort, a few hundred values
                x = lat[i]
                for (j = i - 1; j > 0 && lat[j] > x; j--) lat[j + 1] = lat[j]
                lat[j + 1] = x
            }
            p99 = int(0.99 * done + 0.999); if (p99 > done) p99 = done
            if (last > first)
                printf "   rate        %.2f pairs/s (%d pairs from the first frame to the last result in %.1f s)\n",
                       done / ((last - first) / 1e9), done, (last - first) / 1e9
            printf "   latency     median %.0f ms, p99 %.0f ms (camera closed frame B -> result recorded)\n",
                   lat[int((done + 1) / 2)], lat[p99]
        }'
    results="$run/results/$exp"
    if [ -d "$results" ]; then
        find "$results" -name '*.txt' | sort | while read -r f; do
            "$bin/pivfarm-synth" --score "$f" --truth "$run/data/$exp/shot.flow"
        done | awk -v flow="$flow" '
            { for (i = 1; i < NF; i++) {
                  if ($i == "rms") { s += $(i + 1); if ($(i + 1) > w) w = $(i + 1) }
                  if ($i == "vectors") v += $(i + 1)
              }
              k++ }
            END { if (k) printf "   accuracy    mean RMS error %.4f px (worst field %.4f px) over %d field(s), %d vectors, against the known %s\n",
                                s / k, w, k, v, flow }'
    fi
    measurements
    echo "   results     $results/<stem>.txt (x y u v flags peak_ratio, px), store $run/pivfarm.db"
    echo "   logs        $run/*.log"
}

# The run's statistics (pivctl stats, in the calibration's units) and its
# mean field scored against the known flow in m/s; the HDF5 export. Both
# --force: the files are the demo's own in run/demo (made afresh each run),
# and a Ctrl-C during the last summary runs this a second time.
measurements() {
    calib="scale=$(printf '%s' "$scale" | tr -d ' ') dt=$(printf '%s' "$dt" | tr -d ' ')"
    if ! ctl stats "$exp" -o "$run/stats.txt" --force >"$run/stats.log" 2>&1; then
        echo "   mean field  no statistics: $(head -c 300 "$run/stats.log")"
        return 0
    fi
    ctl stats "$exp" --json >"$run/stats.json" 2>/dev/null || true
    # x y u_mean v_mean u_rms v_rms uv_mean count -> x y u v flag.
    awk '!/^#/ && NF >= 8 { ok = $8 > 0 && $3 != "nan" && $4 != "nan"
                            print $1, $2, ok ? $3 : 0, ok ? $4 : 0, ok ? 0 : 2 }' \
        "$run/stats.txt" >"$run/mean.txt"
    # "vectors N  rms R m/s  (u .., v ..)  bias (.., ..) m/s  max M m/s  (rms P px)"
    score=$("$bin/pivfarm-synth" --score "$run/mean.txt" --truth "$run/data/$exp/shot.flow" \
        --calibration "$calib" 2>&1) || score="cannot be scored: $score"
    score=$(printf '%s\n' "$score" | awk '$1 == "vectors" && $5 == "m/s" && $14 == "max" {
        printf "rms %s m/s (%s px), max %s m/s over the %s points of the mean field\n", $4, $18, $15, $2
        next } { print }')
    summary_json=$(tr -d '\n ' <"$run/stats.json")
    figure() { printf '%s' "$summary_json" | sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p"; }
    fields=$(figure fields)
    valid=$(figure valid_fraction)
    conv=$(figure convergence)
    echo "   calibration $scale, dt $dt (pivctl calibrate $exp)"
    printf '   mean field  %s fields counted, %s valid, convergence %s\n' "${fields:-?}" \
        "$(awk -v v="${valid:-nan}" 'BEGIN { if (v == "nan") print "?"; else printf "%.1f %%", 100 * v }')" \
        "$(awk -v v="${conv:-nan}" 'BEGIN { if (v == "nan" || v == "") print "not known yet"; else printf "%.2f %%", 100 * v }')"
    echo "   mean error  $score, against the exact $flow"
    echo "   statistics  $run/stats.txt (x y u_mean v_mean u_rms v_rms uv_mean count n_valid n_replaced; m, m/s)"
    if ctl export "$exp" --format hdf5 -o "$run/$exp.h5" --force >"$run/export.log" 2>&1; then
        echo "   hdf5        $run/$exp.h5 (u, v in m/s, vorticity in 1/s, stats/: doc/units-guide.md)"
    else
        echo "   hdf5        not written: $(tail -n 1 "$run/export.log")"
    fi
}

# ------------------------------------------------------------------ run
rm -rf "$run"
mkdir -p "$run/data" "$run/results"
cat >"$conf" <<EOF
# Written by deploy/demo.sh: the demo farm, on loopback.
broker
    ingest = tcp://127.0.0.1:$port
    work = tcp://127.0.0.1:$((port + 1))
    control = tcp://127.0.0.1:$((port + 2))
    publish = tcp://127.0.0.1:$((port + 3))
    store = ./pivfarm.db
    durability = normal
watcher
    root = ./data
    # The camera's truth file (shot.flow) is no frame.
    ignore = .*,*.tmp,*.part,*~,*.flow
agent
    threads = 1
    results = ./results
piv
    passes = 64,32,16
EOF

trap interrupted INT TERM
trap stop_all EXIT

say "farm on 127.0.0.1 ports $port-$((port + 3)), run directory $run"
start broker "$bin/pivfarm-broker" -c "$conf"
sleep 0.3
check_alive broker
start watcher "$bin/pivfarm-watcher" -c "$conf"
start agent1 "$bin/pivfarm-agent" -c "$conf" --id agent1
start agent2 "$bin/pivfarm-agent" -c "$conf" --id agent2
sleep 0.5
for p in watcher agent1 agent2; do check_alive "$p"; done

# The status page, when it has been built and lighttpd is there; the demo
# runs without it.
if [ ! -x "$bin/pivfarm.cgi" ] || [ ! -x "$here/deploy/dashboard.sh" ]; then
    say "status page: not built (bin/pivfarm.cgi: run 'make')"
elif ! command -v lighttpd >/dev/null 2>&1 && [ ! -x /usr/sbin/lighttpd ]; then
    say "status page: needs lighttpd ('make deps' or 'apt-get install lighttpd')"
elif port_taken "$http_port"; then
    say "status page: port $http_port is taken; choose another with PIVFARM_DEMO_HTTP_PORT=N"
else
    start dashboard "$here/deploy/dashboard.sh" -c "$conf" -p "$http_port" -d "$run/dashboard"
    sleep 0.3
    if kill -0 "$pid_dashboard" 2>/dev/null; then
        say "status page: http://127.0.0.1:$http_port/ (mean field and vorticity in m/s, 1/s: ?exp=$exp)"
    else
        say "status page: did not start (its log: $run/dashboard.log)"
    fi
fi

# The calibration goes in before the first frame lands: every result of
# the run is counted in metres and seconds.
ctl calibrate "$exp" --scale "$scale" --dt "$dt" >"$run/calibrate.log" 2>&1 \
    || die "pivctl calibrate failed: $(cat "$run/calibrate.log")"
say "calibration: $scale, dt $dt (pivctl calibrate $exp)"
say "camera: $pairs pairs of $size ($flow) at $rate pairs/s into $run/data/$exp/"
start camera "$bin/pivfarm-synth" --camera --rate "$rate" --count "$pairs" --size "$size" \
    --flow "$flow" -v -o "$run/data/$exp/shot"
if [ -t 1 ]; then
    "$bin/pivctl" -c "$conf" status --watch &
    watch_pid=$!
fi

# Until the camera has written every pair and each one is done or failed.
tick=0
camera_done=""
while :; do
    sleep 1
    tick=$((tick + 1))
    if [ -z "$camera_done" ] && ! kill -0 "$pid_camera" 2>/dev/null; then
        forget "$pid_camera"
        wait "$pid_camera" || die "the camera failed (its log: $run/camera.log)"
        camera_done=1
    fi
    for p in broker watcher agent1 agent2; do check_alive "$p"; done
    status=$(ctl --json status 2>/dev/null || true)
    done_=$(printf '%s' "$status" | exp_figure "done")
    failed=$(printf '%s' "$status" | exp_figure "failed")
    finished=$((${done_:-0} + ${failed:-0}))
    if [ -z "$watch_pid" ] && [ $((tick % 5)) -eq 0 ]; then
        echo "   $(date +%T)  $finished of $pairs pairs done or failed"
    fi
    [ -n "$camera_done" ] && [ "$finished" -ge "$pairs" ] && break
done
stop_watch
summary
stop_all
