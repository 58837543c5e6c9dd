#!/usr/bin/env bash
# The GPU work a thread may queue is bounded by NVSHARE_MAX_BACKLOG_MS:
# 100 kernels of 2 ms launched without synchronizing leave at most a few ms
# queued (the launches themselves wait), while with the bound off all 200 ms
# stay queued. The same after a stream capture, whose launches do not run,
# made after a warm-up of short kernels (which lengthen the interval between
# checks): what follows a capture is measured afresh, and so is a graph's
# first launch.
# usage: backlog.sh LIBNVSHARE FAKE_LIB_DIR GATING_TEST
set -euo pipefail
LIB=$1 FAKE=$2 TEST=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { # budget_ms [mode]
    NVSHARE_SOCK_DIR=$dir LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LIB \
        NVSHARE_MAX_BACKLOG_MS=$1 "$TEST" "${2:-backlog}" 100 2000 2>/dev/null
}
bounded=$(run 5)
unbounded=$(run 0)
# Right after a stream capture (a CUDA graph's, before its replays), and the
# replays of a graph of one kernel.
captured=$(run 5 capture)
replayed=$(run 5 graph)
echo "budget 5 ms: $bounded"
echo "budget off:  $unbounded"
echo "budget 5 ms, after a capture: $captured"
echo "budget 5 ms, graph replays: $replayed"
queued() { sed -n 's/.*queued_ms=\([0-9.]*\).*/\1/p' <<<"$1"; }
awk "BEGIN { exit !($(queued "$bounded") <= 10) }" || { echo "FAIL: backlog not bounded"; exit 1; }
awk "BEGIN { exit !($(queued "$unbounded") >= 150) }" || { echo "FAIL: the test does not queue work"; exit 1; }
awk "BEGIN { exit !($(queued "$captured") <= 10) }" || { echo "FAIL: backlog not bounded after a capture"; exit 1; }
awk "BEGIN { exit !($(queued "$replayed") <= 10) }" || { echo "FAIL: graph replays not bounded"; exit 1; }
echo "PASS: queued $(queued "$bounded") ms with a 5 ms budget ($(queued "$captured") ms after a capture, $(queued "$replayed") ms of graph replays), $(queued "$unbounded") ms without"
