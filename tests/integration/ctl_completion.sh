#!/usr/bin/env bash
# nvsharectl completion bash|zsh: made from the commands table, so every
# command that `nvsharectl --help` lists completes after `nvsharectl `,
# every setting of set's synopsis after `nvsharectl set `, reset's settings
# after `reset `, options after a command, directories after --sock-dir;
# zsh's script parses (where zsh is installed); another shell is refused.
#   ctl_completion.sh NVSHARECTL
set -u
CTL=$1
failed=0
fail() { echo "FAIL: $*"; failed=1; }
# shellcheck disable=SC1090
source <("$CTL" completion bash) || { echo "FAIL: the bash script does not load"; exit 1; }
complete -p nvsharectl >/dev/null || { echo "FAIL: no completion for nvsharectl"; exit 1; }
# complete WORD...: COMPREPLY for the command line "WORD... <cursor on the last>".
complete_line() {
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
    _nvsharectl
    echo "${COMPREPLY[*]}"
}
has() { # what words...
    local what=$1 got=$2; shift 2
    for w in "$@"; do
        [[ " $got " == *" $w "* ]] || fail "$what: no '$w' in '$got'"
    done
}

commands=$("$CTL" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z-]*\) .*/\1/p' | sort -u)
[ -n "$commands" ] || fail "no commands in nvsharectl --help"
# shellcheck disable=SC2086
has "nvsharectl <tab>" "$(complete_line nvsharectl '')" $commands --sock-dir --help --version
echo "  commands: $(complete_line nvsharectl '')"
has "nvsharectl s<tab>" "$(complete_line nvsharectl s)" status set
settings=$("$CTL" set --help | sed -n 's/^ *\(usage: \)\?nvsharectl set \([a-z-]*\) .*/\2/p' | sort -u)
[ "$(echo "$settings" | wc -w)" -ge 9 ] || fail "set --help lists only: $settings"
# shellcheck disable=SC2086
has "nvsharectl set <tab>" "$(complete_line nvsharectl set '')" $settings
echo "  set: $(complete_line nvsharectl set '')"
has "nvsharectl --sock-dir /tmp set <tab>" "$(complete_line nvsharectl --sock-dir /tmp set '')" tq mode
has "nvsharectl reset <tab>" "$(complete_line nvsharectl reset '')" tq anti-thrash mode switch-time
has "nvsharectl top <tab>" "$(complete_line nvsharectl top '')" --interval
has "nvsharectl status --<tab>" "$(complete_line nvsharectl status --)" --json
has "nvsharectl status --<tab>" "$(complete_line nvsharectl status --)" --settings
has "nvsharectl help <tab>" "$(complete_line nvsharectl help '')" $commands
dir=$(mktemp -d); mkdir "$dir/sockets"
has "--sock-dir <tab>" "$(complete_line nvsharectl --sock-dir "$dir/so")" "$dir/sockets"
rm -rf "$dir"

if command -v zsh >/dev/null; then
    "$CTL" completion zsh | zsh -n || fail "zsh does not parse the zsh script"
    echo "  zsh: the script parses"
else
    echo "  zsh is not installed: its script is not parsed"
fi
"$CTL" completion fish >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "completion fish: exit $rc, not 2"
[ $failed = 0 ] && echo "PASS: completion from the command table (bash; zsh through bashcompinit)"
exit $failed
