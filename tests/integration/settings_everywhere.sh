#!/usr/bin/env bash
# Every setting of the scheduler's table (settings.def) reaches everywhere it
# should: its variable in `nvshare-scheduler --help` and in README.md's
# table; each run-time one in `nvsharectl --help`, in `nvsharectl set
# --help`, in `nvsharectl reset --help`, in README.md or docs/nvsharectl.md
# (`nvsharectl set NAME`), and through
# the state file: set to the default its help shows, kept in the file, and
# read back at the next start. Every setting is in `nvsharectl status
# --settings` and `status --json`, in the table's order, with its value and
# where that comes from: the environment, the default, nvsharectl since
# this start (runtime), before it (state-file). The application's settings
# (the table in src/client/settings.c) are in README.md's table too.
#   settings_everywhere.sh SCHEDULER WORKLOAD NVSHARECTL SETTINGS_DEF REPO
source "$(dirname "$0")/lib.sh" "$1" "$2"
CTL_BIN=$3 DEF=$4 REPO=$5
export NVSHARE_STATE_FILE=$WORK/state.conf
ctl() { "$CTL_BIN" "$@"; }

rows=$(tr '\n' ' ' <"$DEF" | grep -o '\(RUNTIME_\)\?SETTING([A-Z_]*, *\(apply_[a-z_]*, *\)\?"[a-z-]*", *"NVSHARE_[A-Z_]*"')
vars=$(echo "$rows" | grep -o 'NVSHARE_[A-Z_]*')
runtime=$(echo "$rows" | grep '^RUNTIME_' | sed 's/.*, *"\([a-z-]*\)", *"NVSHARE_.*/\1/')
names=$(echo "$rows" | sed 's/.*, *"\([a-z-]*\)", *"NVSHARE_.*/\1/')
[ "$(echo "$vars" | wc -l)" -ge 15 ] || fail "found only $(echo "$vars" | wc -l) rows in $DEF"
[ "$(echo "$runtime" | wc -l)" -ge 4 ] || fail "found only these run-time rows: $runtime"

"$SCHED_BIN" --help >"$WORK/sched.help" || fail "nvshare-scheduler --help"
for v in $vars; do
    grep -q "^  $v" "$WORK/sched.help" || fail "nvshare-scheduler --help lacks $v"
    grep -q "^|.*\`$v\`" "$REPO/README.md" || fail "README.md's table lacks $v"
done
ctl --help >"$WORK/ctl.help" && ctl set --help >"$WORK/set.help" &&
    ctl reset --help >"$WORK/reset.help" || fail "nvsharectl --help"
for n in $runtime; do
    grep -q "^  set $n " "$WORK/ctl.help" || fail "nvsharectl --help lacks set $n"
    grep -q "nvsharectl set $n " "$WORK/set.help" || fail "nvsharectl set --help lacks $n"
    grep -q "^  $n " "$WORK/set.help" || fail "nvsharectl set --help explains no $n"
    grep -q "reset .*$n" "$WORK/reset.help" || fail "nvsharectl reset --help lacks $n"
    grep -q "set $n " "$REPO/README.md" "$REPO/docs/nvsharectl.md" ||
        fail "neither README.md nor docs/nvsharectl.md shows nvsharectl set $n"
done
client_vars=$(grep -o '{"NVSHARE_[A-Z_]*", C_' "$REPO/src/client/settings.c" | grep -o 'NVSHARE_[A-Z_]*')
[ "$(echo "$client_vars" | wc -l)" -ge 12 ] || fail "found only $client_vars in settings.c's table"
for v in $client_vars; do
    grep -q "^|.*\`$v\`" "$REPO/README.md" || fail "README.md's table lacks $v"
done
echo "  $(echo $vars | wc -w) scheduler variables in the help and README.md, \
$(echo $client_vars | wc -w) of the client's in README.md; run-time: $(echo $runtime)"

# status_settings "NAME VALUE SOURCE"...: `status --settings` and `status
# --json` list every row of settings.def, in its order, and show these.
status_settings() {
    ctl status --settings >"$WORK/settings.txt" || fail "status --settings"
    [ "$(sed 1d "$WORK/settings.txt" | awk '{ print $1 }')" = "$names" ] ||
        fail "status --settings lacks rows of $DEF: $(cat "$WORK/settings.txt")"
    for e in "$@"; do
        read -r n v src <<<"$e"
        awk -v n="$n" -v v="$v" -v s="$src" '$1 == n && $2 == v && $3 == s { found = 1 }
            END { exit !found }' "$WORK/settings.txt" ||
            fail "status --settings does not show $e: $(grep "^$n " "$WORK/settings.txt")"
    done
    if command -v python3 >/dev/null; then
        ctl status --json >"$WORK/status.json" || fail "status --json"
        python3 - "$WORK/status.json" "$names" "$@" <<'PY' || fail "status --json settings"
import json, sys
got = json.load(open(sys.argv[1]))["settings"]
assert list(got) == sys.argv[2].split(), f"not the table's rows: {list(got)}"
for e in sys.argv[3:]:
    n, v, src = e.split()
    assert got[n] == {"value": v, "source": src}, f"{n}: {got[n]}, expected {e}"
PY
    fi
    echo "  status --settings and --json: $(sed 1d "$WORK/settings.txt" | wc -l) settings; $(printf '%s, ' "$@")"
}

# The default each run-time setting's help shows, set at run time, survives
# a restart through the state file.
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
status_settings "gpus GPU-sim-0:16384 environment" "mode serial environment" \
    "state-file $NVSHARE_STATE_FILE environment" "tq auto default" \
    "oversub-ratio 2 default" "idle-swap-after 10s default" \
    "host-swap-budget auto default"
for n in $runtime; do
    value=$(sed -n "/^  $n /,/default/p" "$WORK/set.help" | grep -o 'default [^)]*' | head -1)
    value=${value#default }
    [ -n "$value" ] || fail "no default in nvsharectl set --help for $n"
    out=$(ctl set "$n" "$value") || fail "nvsharectl set $n $value: $out"
    echo "  set $n $value: $out"
done
out=$(ctl set tq 2s) || fail "nvsharectl set tq 2s: $out"
out=$(ctl set idle-swap-after 0) || fail "nvsharectl set idle-swap-after 0: $out"
out=$(ctl set host-swap-budget 64Gi) || fail "nvsharectl set host-swap-budget 64Gi: $out"
status_settings "tq 2s runtime" "mode auto runtime" "gpus GPU-sim-0:16384 environment" \
    "idle-swap-after 0 runtime" "host-swap-budget 64Gi runtime"
for n in $runtime; do
    grep -q "^$n " "$NVSHARE_STATE_FILE" || fail "the state file lacks $n: $(cat "$NVSHARE_STATE_FILE")"
done
stop_scheduler
: >"$WORK/sched.log"
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
line=$(grep "settings from it:" "$WORK/sched.log") || fail "the restart read no settings"
for n in $runtime; do
    [[ " ${line##*settings from it:} " == *" $n "* ]] || fail "the restart did not read $n: $line"
done
echo "  ${line##*info: }"
status_settings "tq 2s state-file" "mode auto state-file" "oversub-ratio 2 default" \
    "idle-swap-after 0 state-file" "host-swap-budget 64Gi state-file"
out=$(ctl reset tq) || fail "nvsharectl reset tq: $out"
status_settings "tq auto default"
pass "every setting of the table in both --help texts, the docs, the state file and status"
