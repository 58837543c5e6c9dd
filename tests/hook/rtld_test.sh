#!/usr/bin/env bash
# dlsym(RTLD_NEXT/RTLD_DEFAULT) from other objects gives the same answers
# with libnvshare preloaded as without.
# usage: rtld_test.sh LIBNVSHARE RTLD_TEST LOCAL_PROBE
set -euo pipefail
LIB=$1 TEST=$2 LOCAL=$3
native=$("$TEST" "$LOCAL") || { echo "$native"; echo "FAIL: native run"; exit 1; }
hooked=$(LD_PRELOAD=$LIB "$TEST" "$LOCAL") || { echo "$hooked"; echo "FAIL: preloaded run"; exit 1; }
echo "$hooked"
[ "$native" = "$hooked" ] || { diff <(echo "$native") <(echo "$hooked"); echo "FAIL: answers differ"; exit 1; }
echo "PASS: same answers with and without libnvshare"
