#!/usr/bin/env bash
# The real CUDA runtime bootstraps through the fake driver with libnvshare
# preloaded, and its lookups come through libnvshare: more than 400
# cuGetProcAddress_v2 calls reach the wrapper (without the "cuGetProcAddress"
# substitution only a handful would), and the wrapped ones are answered with
# wrappers. Runtime API calls then stop at cuGetExportTable (801), which a
# fake cannot serve.
# usage: cudart_bootstrap.sh LIBNVSHARE FAKE_LIB_DIR PROBE|none
set -euo pipefail
LIB=$1 FAKE=$2 PROBE=$3
if [ "$PROBE" = none ]; then
    echo "SKIP: no CUDA runtime (libcudart) found at configure time"
    exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LIB NVSHARE_STATS=1 "$PROBE" >"$out" 2>&1
cat "$out"
stat() { sed -n "s/.*stats: $1 \([0-9]*\).*/\1/p" "$out" | tail -n 1; }
lookups=$(stat "cuGetProcAddress_v2 calls")
wrapped=$(stat getproc-wrapped)
unmapped=$(stat getproc-unmapped)
[ "${lookups:-0}" -gt 400 ] || { echo "FAIL: ${lookups:-0} lookups seen"; exit 1; }
[ "${wrapped:-0}" -gt 90 ] || { echo "FAIL: ${wrapped:-0} lookups wrapped"; exit 1; }
[ "${unmapped:-1}" -eq 0 ] || { echo "FAIL: $unmapped lookups not mapped"; exit 1; }
echo "PASS: $lookups lookups seen, $wrapped answered with wrappers"
