#!/usr/bin/env bash
# Every setting of the scheduler's table (settings.def) reaches everywhere it
# should: its variable in `nvshare-scheduler --help` and in README.md's
# table; each run-time one in `nvsharectl --help`, in `nvsharectl set
# --help`, in `nvsharectl reset --help`, in README.md or docs/nvsharectl.md
# (`nvsharectl set NAME`), and through
# the state file: set to the default its help shows, kept in the file, and
# read back at the next start. The application's settings (the table in
# src/client/client.c) are in README.md's table too.
#   settings_everywhere.sh SCHEDULER WORKLOAD NVSHARECTL SETTINGS_DEF REPO
source "$(dirname "$0")/lib.sh" "$1" "$2"
CTL_BIN=$3 DEF=$4 REPO=$5
export NVSHARE_STATE_FILE=$WORK/state.conf
ctl() { "$CTL_BIN" "$@"; }

rows=$(tr '\n' ' ' <"$DEF" | grep -o '\(RUNTIME_\)\?SETTING([A-Z_]*, *\(apply_[a-z_]*, *\)\?"[a-z-]*", *"NVSHARE_[A-Z_]*"')
vars=$(echo "$rows" | grep -o 'NVSHARE_[A-Z_]*')
runtime=$(echo "$rows" | grep '^RUNTIME_' | sed 's/.*, *"\([a-z-]*\)", *"NVSHARE_.*/\1/')
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
client_vars=$(grep -o '{"NVSHARE_[A-Z_]*", C_' "$REPO/src/client/client.c" | grep -o 'NVSHARE_[A-Z_]*')
[ "$(echo "$client_vars" | wc -l)" -ge 12 ] || fail "found only $client_vars in client.c's table"
for v in $client_vars; do
    grep -q "^|.*\`$v\`" "$REPO/README.md" || fail "README.md's table lacks $v"
done
echo "  $(echo $vars | wc -w) scheduler variables in the help and README.md, \
$(echo $client_vars | wc -w) of the client's in README.md; run-time: $(echo $runtime)"

# The default each run-time setting's help shows, set at run time, survives
# a restart through the state file.
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
for n in $runtime; do
    value=$(sed -n "/^  $n /,/default/p" "$WORK/set.help" | grep -o 'default [^)]*' | head -1)
    value=${value#default }
    [ -n "$value" ] || fail "no default in nvsharectl set --help for $n"
    out=$(ctl set "$n" "$value") || fail "nvsharectl set $n $value: $out"
    echo "  set $n $value: $out"
done
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
pass "every setting of the table in both --help texts, the docs and the state file"
