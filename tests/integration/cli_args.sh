#!/usr/bin/env bash
# Every binary answers --help (exit 0, usage on stdout), --version (exit 0,
# one version string, the same for all) and refuses a bogus argument with
# one message on stderr and exit status 2, without starting anything. The
# scheduler's help names every setting of its table (settings.def).
#   cli_args.sh SETTINGS_DEF SCHEDULER NVSHARECTL [DEVICE_PLUGIN] [POD_WATCHER]
# The optional components are left out where they are not built.
set -u
settings_def=$1; shift
failed=0 version=
fail() { echo "FAIL: $*" >&2; failed=1; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT

for bin in "$@"; do
    name=${bin##*/}
    # A daemon that ignored its arguments would start: the timeout ends it.
    timeout 10 "$bin" --help >"$out/help" 2>"$out/err"; rc=$?
    [ $rc = 0 ] || fail "$name --help: exit $rc, $(head -c 300 "$out/err")"
    grep -q "^usage: $name" "$out/help" || fail "$name --help prints no usage line"
    timeout 10 "$bin" --version >"$out/version" 2>"$out/err"; rc=$?
    [ $rc = 0 ] || fail "$name --version: exit $rc"
    read -r prog ver _ <"$out/version"
    [ "$prog" = "$name" ] && [ -n "$ver" ] || fail "$name --version says '$(cat "$out/version")'"
    [ -z "$version" ] && version=$ver
    [ "$ver" = "$version" ] || fail "$name is version $ver, others $version"
    timeout 10 "$bin" --bogus-argument >"$out/stdout" 2>"$out/err"; rc=$?
    [ $rc = 2 ] || fail "$name --bogus-argument: exit $rc, not 2"
    grep -q -- "--bogus-argument" "$out/err" || fail "$name does not name the bogus argument"
    [ -s "$out/stdout" ] && fail "$name writes to stdout on a bogus argument"
    echo "  $name: --help, --version ($ver), --bogus-argument (exit $rc)"
done

# The table's variables, from the source, against the scheduler's help.
sched=$1
"$sched" --help >"$out/help"
vars=$(sed -n 's/.*"\(NVSHARE_[A-Z0-9_]*\)".*/\1/p' "$settings_def" | sort -u)
[ -n "$vars" ] || fail "no NVSHARE_ variable found in $settings_def"
n=0
for v in $vars; do
    n=$((n + 1))
    grep -q "^  $v" "$out/help" || fail "nvshare-scheduler --help leaves out $v"
done
echo "  nvshare-scheduler --help lists all $n settings of the table"
exit $failed
