#!/usr/bin/env bash
# A hooked application's stderr is its own: under a scheduler, a process
# that runs normally gets no line from nvshare (it got "info: registered
# with the scheduler as client N"); NVSHARE_LOG_LEVEL=info shows that line
# again; without a scheduler the one line saying it runs unscheduled stays;
# an unknown NVSHARE_LOG_LEVEL is named in a warning.
# usage: quiet_stderr.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR GATING_TEST
set -euo pipefail
SCHED=$1 LIB=$2 FAKE=$3 TEST=$4
source "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
app() { # stderr-file [VAR=VALUE...]
    local err=$1; shift
    env LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$LIB" "$@" "$TEST" run 5 1000 >/dev/null 2>"$err" ||
        fail "the application failed: $(cat "$err")"
}

start_scheduler_in "$WORK/s"
await_schedulers "$WORK/s"
app "$WORK/default.err" NVSHARE_SOCK_DIR="$WORK/s"
echo "  default, under a scheduler: $(wc -l <"$WORK/default.err") lines on stderr"
[ ! -s "$WORK/default.err" ] || fail "lines on the application's stderr: $(cat "$WORK/default.err")"
app "$WORK/info.err" NVSHARE_SOCK_DIR="$WORK/s" NVSHARE_LOG_LEVEL=info
grep -q "info: registered with the scheduler as client" "$WORK/info.err" ||
    fail "NVSHARE_LOG_LEVEL=info does not show the registration: $(cat "$WORK/info.err")"
echo "  NVSHARE_LOG_LEVEL=info: $(grep -c . "$WORK/info.err") lines"

app "$WORK/absent.err" NVSHARE_SOCK_DIR="$WORK/nowhere"
lines=$(grep -c . "$WORK/absent.err" || true)
echo "  without a scheduler: $(cat "$WORK/absent.err")"
[ "$lines" = 1 ] && grep -q "warning: .*running unscheduled" "$WORK/absent.err" ||
    fail "$lines lines without a scheduler, want the one warning"

app "$WORK/bad.err" NVSHARE_SOCK_DIR="$WORK/s" NVSHARE_LOG_LEVEL=loud
grep -q "NVSHARE_LOG_LEVEL=loud is not error, warning, info or debug" "$WORK/bad.err" ||
    fail "no warning for NVSHARE_LOG_LEVEL=loud: $(cat "$WORK/bad.err")"
echo "PASS: the hook writes warnings and errors only unless asked"
