#!/usr/bin/env bash
# An idle process's memory for a newcomer, end to end on one fake GPU
# shared by the processes (FAKE_CUDA_SHARED_GPU: its 176 MiB are the
# node's, the fake refuses what does not fit beside the others' memory),
# with the real scheduler and nothing about oversubscription in the jobs'
# environment (the scheduler's default makes their memory swappable).
#
# A holder allocates 96 MiB, writes it, runs a batch of kernels and idles
# for 5 s without a CUDA call. A newcomer needing 96 MiB starts during the
# idle period: its cuMemCreate finds the GPU full, and it waits for the
# lock as a waiter for memory (its 96 MiB told to the scheduler first).
#
#  (a) idle-swap-after 1 s: a second into its idle period the holder is
#      asked to prepare (PREPARE_SWAP), alone on the GPU, and makes its
#      host copy ahead; the newcomer starts then, and the scheduler swaps
#      the idle holder out
#      (copies to the host, physical memory released), after which the
#      newcomer allocates and runs - no CUDA_ERROR_OUT_OF_MEMORY.
#      Once the newcomer is done, the holder's next kernels bring its
#      memory back: it reports its content intact at its address. The two
#      are never resident at once (the fake's traces).
#  (b) the same with the holder's pod marked `nvsharectl set idle-swap
#      default/holder off`: the holder is never swapped out, and the
#      newcomer runs once the holder has ended.
#  (c) the same with a host swap budget of 32 MiB, below the holder's
#      96 MiB: the holder stays, the newcomer's queue entry in `nvsharectl
#      status` says it waits for the host swap budget, and it runs once the
#      holder has ended.
#  (d) the same with the holder in a memory cgroup whose room (a cgroup
#      file system laid out in a directory, mounted at /sys/fs/cgroup in
#      the holder's own mount namespace) cannot take its 96 MiB host copy
#      and the margin: the holder says so in one line and stays, the
#      newcomer is shown waiting for the holder's memory that cannot move,
#      and runs once the holder has ended. Twice: the cgroup tight
#      from the start, and tightened while the holder idles with its host
#      copy made ahead, just before the newcomer comes (its swap-out is
#      then refused when asked, or held back before: either way it stays).
#      Skipped where no mount namespace can be made.
#  (e) a loader allocates 96 MiB and works on the CPU for seconds before
#      its first kernel, its memory already on the GPU (blank: never
#      written); a newcomer needing 96 MiB comes once the scheduler counts
#      the loader's memory as on the GPU (it asks the loader, idle since it
#      came, to prepare). The newcomer is not admitted into the loader's
#      memory: it waits for memory, the loader is swapped out (its blank
#      memory released, nothing copied) idle-swap-after after it came, the
#      newcomer runs, then the loader - neither refused.
#  (f) a busy holder (kernels without a pause) that has had the GPU for
#      the switch time (fixed at 1 s here), alone, with too little room
#      beside it for a job its size (158 - 120 MiB < 96), is asked to
#      prepare and makes its host copy ahead before anyone else exists;
#      a newcomer then has it leave at once, and its swap-out writes that
#      copy: nothing made twice, both intact.
#  (g) the same busy holder, its switch time (60 s) far off, while the
#      operator has set a pod `high` that has no process yet: a newcomer
#      of that pod would preempt it at any time, so it prepares a second
#      after its grant, before the newcomer exists; the newcomer then has
#      it leave at once, and its swap-out writes that copy.
#  (h) as (a), but the scheduler is killed while the holder is out and
#      the newcomer runs: the holder wakes with no scheduler (fail-open)
#      and no room on the GPU, says that its memory stays in host memory,
#      and runs no kernel until the newcomer has ended and its memory is
#      back, intact.
#  (i) as (a), but the scheduler is killed and started again while the
#      holder is out and the newcomer runs: both register again; the new
#      scheduler counts the holder's memory as in host memory (MEM_UPDATE
#      tells it as pending), so the newcomer runs on without waiting for
#      memory; the holder's memory comes back on the new scheduler's
#      grant, once the newcomer has ended, intact.
#  (j) as (a), but the operator turns anti-thrashing off (clients run
#      freely, no lock) once the newcomer has ended, while the holder is
#      out: the holder brings its memory back by itself, intact.
#
# Both jobs declare a 128 MiB limit, which keeps the credit the scheduler
# counts beyond each allocation small (8 MiB, not 64): each counts as
# 96 + 8 + 16 MiB of context overhead, and the holder's rest while it is
# swapped out (24 MiB) fits beside the newcomer in the 158 MiB admitted.
#
# usage: idle_swap_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4 CTL=$5
source "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*" >&2; tail -n 40 "$DIR/sched.log" "$WORK"/*.err >&2; exit 1; }

# scenario NAME [VAR=VALUE...]: a scheduler of its own (idle-swap-after
# 1 s) in $WORK/NAME, which DIR names from now on; restart_scheduler kills
# it (SIGKILL: a crash) and starts another one like it.
scenario() {
    DIR=$WORK/$1
    shift
    export NVSHARE_SOCK_DIR=$DIR
    SCENARIO_ENV=(NVSHARE_DEBUG=1 NVSHARE_GPUS=$UUID:176
        NVSHARE_CONTEXT_OVERHEAD=16Mi NVSHARE_IDLE_SWAP_AFTER=1s "$@")
    start_scheduler_in "$DIR" "${SCENARIO_ENV[@]}"
    await_schedulers "$DIR"
}
kill_scheduler() {
    kill -9 "${scheds[-1]}"
    wait "${scheds[-1]}" 2>/dev/null || true
    rm -f "$DIR/scheduler.sock" "$DIR/control.sock"
}
restart_scheduler() {
    kill_scheduler
    start_scheduler_in "$DIR" "${SCENARIO_ENV[@]}"
    await_schedulers "$DIR"
}

# job NAME SECONDS [VAR=VALUE...]: a 96 MiB job that writes its memory.
job() {
    local name=$1 seconds=$2 now; now=$(date +%s%N)
    shift 2
    mkdir -p "$WORK/$name"
    "${WRAP[@]}" env LD_LIBRARY_PATH="$FAKE_DIR" LD_PRELOAD="$LIB" NVSHARE_DEBUG=1 \
        FAKE_CUDA_TRACE_DIR="$WORK/$name" FAKE_CUDA_SHARED_GPU="$DIR/gpu" \
        FAKE_CUDA_MEM_MB=176 NVSHARE_GPU_MEMORY_LIMIT=128Mi \
        FAKE_JOB_MEM_MB=96 FAKE_JOB_WRITE=1 NVSHARE_POD_NAME="$name" "$@" \
        "$JOB" "$now" $(( now + seconds * 1000000000 )) \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    pids+=($!)
}

WRAP=()

# status_shows PATTERN: `nvsharectl status` shows PATTERN within 10 s (the
# last status stays in $WORK/status).
status_shows() {
    for _ in $(seq 500); do
        "$CTL" status >"$WORK/status" 2>&1 || true
        grep -q -- "$1" "$WORK/status" && return 0
        sleep 0.02
    done
    return 1
}

# await_line FILE TEXT: TEXT appears in FILE within 10 s.
await_line() {
    for _ in $(seq 500); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.02
    done
    return 1
}

# holder_then_newcomer [prepared|budget|cgroup|cgroup-tightened]: the
# holder (its first batch, 5 s idle, then kernels up to its 7th second)
# and, once it idles (prepared: once it has made its host copy ahead;
# cgroup: once it has said its memory stays; cgroup-tightened: once it has
# made its copy ahead and the cgroup is tightened), the newcomer (budget:
# which must be shown waiting for the host swap budget).
holder_then_newcomer() {
    rm -rf "$WORK/holder" "$WORK/newcomer"
    case "${1:-}" in
    cgroup) WRAP=(in_fake_cgroup) ;;
    cgroup-tightened) WRAP=(in_fake_cgroup); fake_cgroup max ;;
    esac
    job holder 7 FAKE_JOB_IDLE_MS=5000
    WRAP=()
    # Idle: it gave the GPU back unasked (a newcomer that came while it
    # held would take turns with it, which is not this test's case).
    await_line "$WORK/holder.err" "released gpu 0 (idle)" ||
        fail "the holder did not go idle after its first batch"
    case "${1:-}" in
    prepared | cgroup-tightened)
        await_line "$WORK/holder.err" "of host copies made ahead"
        grep -q "96.0 MiB of host copies made ahead" "$WORK/holder.err" ||
            fail "the idle holder made no host copy ahead" ;;
    cgroup)
        await_line "$WORK/holder.err" "96.00 MiB of GPU memory will not be swapped out" ||
            fail "the holder did not say that its memory stays" ;;
    esac
    [ "${1:-}" = cgroup-tightened ] && fake_cgroup tight
    job newcomer 1
    case "${1:-}" in
    cgroup)
        status_shows "default/holder idle [0-9.]*[a-z]* (120.00 MiB cannot move)" ||
            fail "the newcomer was not shown waiting for the holder's memory that cannot move: $(cat "$WORK/status")" ;;
    budget)
        status_shows "host swap budget (0 B of 32.00 MiB parked)" ||
            fail "the newcomer was not shown waiting for the host swap budget: $(cat "$WORK/status")" ;;
    esac
    for p in "${pids[@]}"; do wait "$p" || fail "a job failed"; done
    pids=()
}

# holder_kept WHY: the holder was never swapped out and the newcomer ran
# after it ended.
holder_kept() {
    local holder newcomer holder_last newcomer_first
    holder=$(echo "$WORK"/holder/trace.*) newcomer=$(echo "$WORK"/newcomer/trace.*)
    ! grep -q '^copy_dtoh' "$holder" || fail "$1: the holder was swapped out"
    grep -qx "lost_bytes=0" "$WORK/holder.out" || fail "$1: the holder lost content"
    holder_last=$(swap_events "$holder" holder | awk '$2 == "gone" { print $1 }')
    newcomer_first=$(swap_events "$newcomer" newcomer | awk '$2 == "unit" { print $1; exit }')
    [ -n "$newcomer_first" ] && [ "$newcomer_first" -ge "$holder_last" ] ||
        fail "$1: the newcomer ran before the holder ended"
}

# (b) first: the opted-out holder keeps its memory.
scenario off
NVSHARE_SOCK_DIR=$DIR "$CTL" set idle-swap default/holder off >/dev/null ||
    fail "nvsharectl set idle-swap failed"
holder_then_newcomer
holder_kept "idle-swap off"
echo "ok: idle-swap off: the holder kept its memory, the newcomer ran after it"

# (c) a host swap budget below the holder's memory keeps it on the GPU.
scenario budget NVSHARE_HOST_SWAP_BUDGET=32Mi
holder_then_newcomer budget
holder_kept "host swap budget"
echo "ok: host swap budget: the newcomer waited for the budget, then ran after the holder"

# fake_cgroup tight|max: the cgroup file system the holder sees, v2 and v1:
# 1 GiB with 900 MiB used (124 MiB free and available, short of the 96 MiB
# copy and the 256 MiB margin), or no limit.
FAKE_CGROUP=$WORK/cgroupfs
fake_cgroup() {
    local limit=1073741824 v1_limit=1073741824
    [ "$1" = max ] && limit=max v1_limit=9223372036854771712
    mkdir -p "$FAKE_CGROUP/memory"
    echo "$limit" >"$FAKE_CGROUP/memory.max"
    echo $((900 << 20)) >"$FAKE_CGROUP/memory.current"
    echo "inactive_file 0" >"$FAKE_CGROUP/memory.stat"
    echo "$v1_limit" >"$FAKE_CGROUP/memory/memory.limit_in_bytes"
    echo $((900 << 20)) >"$FAKE_CGROUP/memory/memory.usage_in_bytes"
    echo "total_inactive_file 0" >"$FAKE_CGROUP/memory/memory.stat"
}
# in_fake_cgroup CMD...: CMD in its own mount namespace, with $FAKE_CGROUP
# at /sys/fs/cgroup.
in_fake_cgroup() {
    "${UNSHARE[@]}" sh -c 'mount --bind "$0" /sys/fs/cgroup && exec "$@"' \
        "$FAKE_CGROUP" "$@"
}

# (d) a memory cgroup without room for the holder's host copy keeps it.
UNSHARE=()
for try in "unshare -m" "unshare -Urm"; do
    if $try sh -c 'mount --bind /tmp /sys/fs/cgroup' 2>/dev/null; then
        read -ra UNSHARE <<<"$try"
        break
    fi
done
if [ ${#UNSHARE[@]} = 0 ]; then
    echo "skip: (d) memory cgroup: no mount namespace can be made here"
else
    scenario cgroup
    fake_cgroup tight
    holder_then_newcomer cgroup
    holder_kept "memory cgroup"
    ! grep -q "of host copies made ahead" "$WORK/holder.err" ||
        fail "the holder made host copies ahead beyond its cgroup's room"
    echo "ok: memory cgroup: the holder kept its memory, the newcomer ran after it"
    holder_then_newcomer cgroup-tightened
    holder_kept "memory cgroup tightened"
    grep -q "96.00 MiB of GPU memory will not be swapped out" "$WORK/holder.err" ||
        fail "the holder did not say that its memory stays"
    echo "ok: memory cgroup tightened while idle: the holder kept its memory"
fi

# log_ms FILE TEXT: the time of TEXT's first line in FILE, in ms.
log_ms() {
    date -d "$(grep -m1 "$2" "$1" | cut -d' ' -f1)" +%s%3N
}

# (e) memory allocated before the first kernel is on the GPU.
scenario blank
rm -rf "$WORK/newcomer"
job loader 12 FAKE_JOB_DELAY_MS=6000 FAKE_JOB_WRITE=0
await_line "$WORK/loader.err" "registered with the scheduler as client" ||
    fail "the loader did not register"
loader_id=$(grep -m1 -o "registered with the scheduler as client [0-9]*" \
    "$WORK/loader.err" | awk '{ print $NF }')
await_line "$DIR/sched.log" "client $loader_id prepares to swap out" ||
    fail "the scheduler does not count the loader's memory as on the GPU"
job newcomer 2
for p in "${pids[@]}"; do wait "$p" || fail "a job failed"; done
pids=()
! grep -q "refused" "$WORK/newcomer.err" "$WORK/loader.err" ||
    fail "an allocation was refused"
grep -q "waiting for GPU memory: this process needs" "$WORK/newcomer.err" ||
    fail "the newcomer was admitted into the loader's memory"
grep -q "client $loader_id swaps out" "$DIR/sched.log" ||
    fail "the loader was not swapped out"
grep -q "swapped out 0.0 MiB" "$WORK/loader.err" ||
    fail "the loader's blank memory was copied out"
came=$(log_ms "$WORK/loader.err" "registered with the scheduler")
out=$(log_ms "$DIR/sched.log" "client $loader_id swaps out")
[ $(( out - came )) -ge 1000 ] ||
    fail "the loader was swapped out $(( out - came )) ms after it came, before idle-swap-after (1 s)"
loader=$(echo "$WORK"/loader/trace.*) newcomer=$(echo "$WORK"/newcomer/trace.*)
loader_first=$(swap_events "$loader" loader | awk '$2 == "unit" && !f { f = $1 } END { print f }')
newcomer_last=$(swap_events "$newcomer" newcomer | awk '$2 == "gone" { print $1 }')
grep -q '^sleep' "$newcomer" || fail "the newcomer ran no kernel"
[ -n "$loader_first" ] && [ "$loader_first" -gt "$newcomer_last" ] ||
    fail "the loader did not run after the newcomer"
echo "ok: memory allocated before the first kernel: the loader was swapped" \
    "out $(( out - came )) ms after it came, the newcomer ran, then the loader"

# busy_holder_prepares NEWCOMER: a busy holder makes its 96 MiB host copy
# ahead, alone, at least a second after it came (its grant follows its
# registration; 900 ms: the two logs' clocks are read by different
# processes); NEWCOMER then has it leave, and its swap-out writes that
# copy: nothing made twice, both intact. Sets PREPARED_MS (after it came).
busy_holder_prepares() {
    rm -rf "$WORK/holder" "${WORK:?}/$1"
    job holder 6 NVSHARE_STATS=1
    await_line "$WORK/holder.err" "96.0 MiB of host copies made ahead" ||
        fail "the busy holder made no host copy ahead"
    ! grep -q "released gpu 0 (idle)" "$WORK/holder.err" ||
        fail "the holder paused: this case is a busy one"
    job "$1" 1
    for p in "${pids[@]}"; do wait "$p" || fail "a job failed"; done
    pids=()
    local came prepared holder out_bytes
    came=$(log_ms "$WORK/holder.err" "registered with the scheduler")
    prepared=$(log_ms "$DIR/sched.log" "prepares to swap out")
    PREPARED_MS=$(( prepared - came ))
    [ "$PREPARED_MS" -ge 900 ] ||
        fail "the holder prepared $PREPARED_MS ms after it came, before a second"
    holder=$(echo "$WORK"/holder/trace.*)
    out_bytes=$(awk '$1 == "copy_dtoh" { s += $4 } END { print s + 0 }' "$holder")
    [ "$out_bytes" = $((96 << 20)) ] || fail "the holder copied $out_bytes bytes out, want 96 MiB"
    grep -q "stats: host-made-ahead $((96 << 20))$" "$WORK/holder.err" ||
        fail "host copies made twice or not at all: $(grep host-made-ahead "$WORK/holder.err")"
    for j in holder "$1"; do
        grep -qx "lost_bytes=0" "$WORK/$j.out" || fail "the $j lost content: $(cat "$WORK/$j.out")"
    done
}

# (f) a busy holder past the switch time (1 s) prepares before anyone comes.
scenario busy NVSHARE_SWITCH_TIME_MODE=fixed NVSHARE_SWITCH_TIME_FIXED=1s
busy_holder_prepares newcomer
echo "ok: the busy holder prepared $PREPARED_MS ms after it came," \
    "alone, and its swap-out wrote the copy made ahead"

# (g) a busy holder that a pod set high (no process yet) could preempt
# prepares a second after its grant, its switch time far off.
scenario preemptible NVSHARE_SWITCH_TIME_MODE=fixed NVSHARE_SWITCH_TIME_FIXED=60s
"$CTL" set priority svc high >/dev/null || fail "cannot set svc high"
busy_holder_prepares svc
echo "ok: the holder a pod set high could preempt prepared $PREPARED_MS ms" \
    "after it came, and its swap-out wrote the copy made ahead"

# (a) the default: the idle holder goes to the host after idle-swap-after.
scenario on
holder_then_newcomer prepared

holder=$(echo "$WORK"/holder/trace.*) newcomer=$(echo "$WORK"/newcomer/trace.*)
! grep -q "refused" "$WORK/newcomer.err" || fail "the newcomer's memory was refused"
grep -q "waiting for GPU memory" "$WORK/newcomer.err" ||
    fail "the newcomer never found the GPU full"
grep -qE "client [0-9]+ swaps out" "$DIR/sched.log" || fail "nobody was asked to swap out"
! grep -q "ignored" "$DIR/sched.log" || fail "the scheduler ignored a swap"
! grep -q "moves failed" "$WORK"/*.err || fail "a swap failed"
out_bytes=$(awk '$1 == "copy_dtoh" { s += $4 } END { print s + 0 }' "$holder")
in_bytes=$(awk '$1 == "copy_htod" { s += $4 } END { print s + 0 }' "$holder")
[ "$out_bytes" = $((96 << 20)) ] || fail "the holder copied $out_bytes bytes out, want 96 MiB"
[ "$in_bytes" = $((96 << 20)) ] || fail "the holder copied $in_bytes bytes back, want 96 MiB"
! grep -q '^copy_dtoh' "$newcomer" || fail "the newcomer was swapped out"
grep -qx "lost_bytes=0" "$WORK/holder.out" || fail "the holder lost content: $(cat "$WORK/holder.out")"
grep -qx "address_kept=1" "$WORK/holder.out" || fail "the holder's memory moved"
grep -qx "lost_bytes=0" "$WORK/newcomer.out" || fail "the newcomer lost content"

# The newcomer ran in the holder's idle period, after its swap-out, and the
# holder resumed after the newcomer.
{ swap_events "$holder" holder; swap_events "$newcomer" newcomer; } | sort -k1,1n \
    >"$WORK/events"
never_both_resident holder newcomer <"$WORK/events" || fail "both resident at once"
read -r first_batch_end swapped_out resumed < <(awk '
    $3 == "holder" && $2 == "unit" { if (!out) last = $1; else if (!resumed) resumed = $1 }
    $3 == "holder" && $2 == "out" && !out { out = $1 }
    END { print last, out, resumed }' "$WORK/events")
newcomer_first=$(awk '$3 == "newcomer" && $2 == "unit" { print $1; exit }' "$WORK/events")
newcomer_last=$(awk '$1 !~ /^(copy|prefetch)/ && $3 > e { e = $3 } END { print e }' "$newcomer")
if [ -z "$swapped_out" ] || [ -z "$resumed" ]; then
    fail "the holder was not swapped out and back"
fi
[ "$newcomer_first" -gt "$swapped_out" ] || fail "the newcomer ran before the holder's swap-out"
[ "$resumed" -gt "$newcomer_last" ] || fail "the holder resumed before the newcomer was done"
[ $(( newcomer_first - first_batch_end )) -ge 1000000000 ] ||
    fail "the holder was swapped out $(( (newcomer_first - first_batch_end) / 1000000 )) ms after it went idle, before idle-swap-after (1 s)"
# holder_out NEWCOMER_SECONDS HOLDER_SECONDS IDLE_MS: the holder and,
# once it has made its host copy ahead, the newcomer; returns once the
# holder is swapped out for it.
holder_out() {
    rm -rf "$WORK/holder" "$WORK/newcomer"
    job holder "$2" FAKE_JOB_IDLE_MS="$3"
    await_line "$WORK/holder.err" "96.0 MiB of host copies made ahead" ||
        fail "the idle holder made no host copy ahead"
    job newcomer "$1"
    await_line "$WORK/holder.err" "swapped out 96.0 MiB" ||
        fail "the holder was not swapped out for the newcomer"
}
# holder_back_intact WHY: the jobs ended, each intact, and the holder ran
# no kernel from its swap-out until it was back.
holder_back_intact() {
    for p in "${pids[@]}"; do wait "$p" || fail "$1: a job failed"; done
    pids=()
    local holder newcomer_last
    grep -qx "lost_bytes=0" "$WORK/holder.out" || fail "$1: the holder lost content: $(cat "$WORK/holder.out")"
    grep -qx "address_kept=1" "$WORK/holder.out" || fail "$1: the holder's memory moved"
    grep -qx "lost_bytes=0" "$WORK/newcomer.out" || fail "$1: the newcomer lost content"
    holder=$(echo "$WORK"/holder/trace.*)
    newcomer_last=$(swap_events "$(echo "$WORK"/newcomer/trace.*)" newcomer |
        awk '$2 == "gone" { print $1 }')
    swap_events "$holder" holder | sort -k1,1n | awk -v c="$newcomer_last" '
        $2 == "out" { out = 1 }
        $2 == "in_end" && out && !back { back = $1 }
        $2 == "unit" && out && !back { bad = 1 }
        END { exit !(out && back > c && !bad) }' ||
        fail "$1: the holder ran while its memory was out, or came back before the newcomer ended"
}

echo "PASS: the idle holder's 96 MiB went to the host for the newcomer" \
    "($(( (newcomer_first - first_batch_end) / 1000000 )) ms after its last kernel)," \
    "came back intact at its address after"

# (h) the scheduler gone while the holder is out and the GPU full.
scenario gone
holder_out 8 12 5000
kill_scheduler
await_line "$WORK/holder.err" "96.0 MiB of this process's memory found no room" ||
    fail "the holder woke without a scheduler and did not wait for room"
holder_back_intact "scheduler gone"
grep -q "all of this process's memory is back" "$WORK/holder.err" ||
    fail "the holder did not say that its memory is back"
echo "ok: scheduler gone while the holder was out: it waited for room," \
    "then came back intact"

# (i) the scheduler restarted while the holder is out.
scenario restart
holder_out 5 12 8000
restart_scheduler
await_line "$WORK/holder.err" "(reconnected)" || fail "the holder did not register again"
holder_back_intact "scheduler restarted"
holder_id=$(grep -o "client [0-9]* (reconnected)" "$WORK/holder.err" | awk '{ print $2 }')
grep -q "lease [0-9]* to client $holder_id$" "$DIR/sched.log" ||
    fail "the holder did not run on the new scheduler's grant"
! grep -q "default/newcomer) waits for memory" "$DIR/sched.log" ||
    fail "the new scheduler counted the holder's memory on the GPU: the newcomer waited"
echo "ok: scheduler restarted while the holder was out: the newcomer ran on," \
    "the holder's memory came back on the new scheduler's grant, intact"

# (j) scheduling turned off while the holder is out.
scenario free
holder_out 2 9 6000
wait "${pids[-1]}" || fail "the newcomer failed"
"$CTL" set anti-thrash off >/dev/null || fail "cannot turn anti-thrashing off"
holder_back_intact "scheduling off"
[ "$(grep -c "lease [0-9]* to client 1$" "$DIR/sched.log")" = 1 ] ||
    fail "the holder was granted the GPU again although scheduling was off"
echo "ok: scheduling turned off while the holder was out: it brought its" \
    "memory back by itself, intact"
