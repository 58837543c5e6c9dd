#!/usr/bin/env bash
# Installs the build and test dependencies that are missing, with apt-get.
# The core needs only a C compiler, make and CMake (and the CUDA headers for
# libnvshare, which come with the CUDA toolkit or the driver's dev package);
# cmocka is needed for the unit tests, python3 for checking JSON in tests.
set -euo pipefail

need=()
command -v cc >/dev/null || need+=(gcc libc6-dev)
command -v make >/dev/null || need+=(make)
command -v cmake >/dev/null || need+=(cmake)
command -v python3 >/dev/null || need+=(python3)
[ -f /usr/include/cmocka.h ] || need+=(libcmocka-dev)
[ ${#need[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
    echo "install-deps: missing ${need[*]} and no apt-get; install them by hand" >&2
    [[ " ${need[*]} " == *" libcmocka-dev "* ]] && [ ${#need[@]} -eq 1 ] &&
        { echo "install-deps: continuing without cmocka: unit tests are skipped" >&2; exit 0; }
    exit 1
fi
sudo=
[ "$(id -u)" = 0 ] || sudo=sudo
echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y --no-install-recommends "${need[@]}" ||
    { $sudo apt-get update && $sudo apt-get install -y --no-install-recommends "${need[@]}"; }
