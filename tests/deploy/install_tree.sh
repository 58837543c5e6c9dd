#!/usr/bin/env bash
# install_tree: `cmake --install` puts every file where docs/operations.md
# (Install) says, README's LD_PRELOAD path is the installed libnvshare.so,
# and the systemd unit starts the installed daemon, whatever the prefix.
#
#   install_tree.sh SOURCE_DIR BUILD_DIR BUILT_OPTIONAL...
# BUILT_OPTIONAL: the optional files this build has (e.g. lib/libnvshare.so),
# relative to the prefix; the documented others must then be absent.
set -euo pipefail
SRC=$1 BUILD=$2; shift 2
built_optional=" $* "
WORK=$(mktemp -d /tmp/nvshare-install.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }

# The default prefix, /usr/local, staged under DESTDIR.
DESTDIR=$WORK/stage cmake --install "$BUILD" --prefix /usr/local >"$WORK/install.log" ||
    fail "cmake --install failed: $(cat "$WORK/install.log")"
# The paths of docs/operations.md's Install section, e.g. `/usr/local/bin/nvsharectl`.
documented=$(sed -n '/^## Install/,/^## /p' "$SRC/docs/operations.md" |
             grep -o '`/usr/local/[^` ]*`' | tr -d '`' | sort -u)
[ "$(echo "$documented" | wc -l)" -ge 4 ] || fail "docs/operations.md lists no install paths"
for path in $documented; do
    rel=${path#/usr/local/}
    row=$(grep -F "\`$path\`" "$SRC/docs/operations.md" | head -n 1)
    if [[ $row == *"(optional)"* ]] && [[ $built_optional != *" $rel "* ]]; then
        [ ! -e "$WORK/stage$path" ] || fail "$path installed but this build lacks it"
        continue
    fi
    [ -f "$WORK/stage$path" ] || fail "$path is documented but not installed: $(cat "$WORK/install.log")"
done
for rel in $built_optional; do
    echo "$documented" | grep -qx "/usr/local/$rel" || fail "$rel is installed but not documented"
done
installed=$(cd "$WORK/stage" && find . -type f | sed 's/^\.//' | sort)
extra=$(comm -13 <(echo "$documented") <(echo "$installed"))
[ -z "$extra" ] || fail "installed but not documented: $extra"
pass "every installed file is where docs/operations.md says"

preload=$(grep -o 'LD_PRELOAD=/[^ ]*libnvshare\.so' "$SRC/README.md" | sort -u)
[ "$(echo "$preload" | wc -l)" = 1 ] || fail "README preloads several paths: $preload"
preload=${preload#LD_PRELOAD=}
[ "$preload" = /usr/local/lib/libnvshare.so ] || fail "README preloads $preload, not the installed /usr/local/lib/libnvshare.so"
if [[ $built_optional == *" lib/libnvshare.so "* ]]; then
    [ -f "$WORK/stage$preload" ] || fail "README's $preload is not installed"
fi
pass "README's LD_PRELOAD path is the installed one"

unit=lib/systemd/system/nvshare-scheduler.service
grep -qx 'ExecStart=/usr/local/bin/nvshare-scheduler' "$WORK/stage/usr/local/$unit" ||
    fail "the unit does not start /usr/local/bin/nvshare-scheduler: $(grep Exec "$WORK/stage/usr/local/$unit")"
cmake --install "$BUILD" --prefix "$WORK/root" >/dev/null || fail "install to a prefix failed"
grep -qx "ExecStart=$WORK/root/bin/nvshare-scheduler" "$WORK/root/$unit" ||
    fail "with --prefix the unit still names $(grep Exec "$WORK/root/$unit")"
[ -x "$WORK/root/bin/nvshare-scheduler" ] && "$WORK/root/bin/nvsharectl" --version >/dev/null ||
    fail "the installed programs do not run"
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify "$WORK/root/$unit" 2>"$WORK/verify.err" ||
        fail "systemd-analyze verify: $(cat "$WORK/verify.err")"
fi
pass "the systemd unit starts the daemon of the prefix installed to"
