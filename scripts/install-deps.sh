#!/usr/bin/env bash
# Installs the build (and, for `test`, test) dependencies that are missing,
# with apt-get.
#
#   scripts/install-deps.sh build|test
#
# The core needs only a C compiler, make and CMake (and the CUDA headers for
# libnvshare, which come with the CUDA toolkit). nvshare-pod-watcher needs
# libcurl and cJSON; the scheduler's /metrics, libmicrohttpd. The tests also
# use cmocka, python3, kubectl, curl, prometheus (promtool), jq and tmux;
# scripts/lint.sh, clang-format and cppcheck.
# Where nothing can be installed (a machine without a package registry) a
# missing test dependency is reported and its tests are skipped; a missing
# build tool is an error.
set -euo pipefail
mode=${1:-build}

need=() optional=()
command -v cc >/dev/null || need+=(gcc libc6-dev)
command -v make >/dev/null || need+=(make)
command -v cmake >/dev/null || need+=(cmake)
# nvshare-device-plugin (optional: skipped, with a message, without these).
[ -f /usr/include/grpc/grpc.h ] || optional+=(libgrpc-dev)
[ -f /usr/include/protobuf-c/protobuf-c.h ] || optional+=(libprotobuf-c-dev)
command -v protoc-c >/dev/null || optional+=(protobuf-c-compiler)
# nvshare-pod-watcher (optional component): libcurl and cJSON.
[ -f /usr/include/x86_64-linux-gnu/curl/curl.h ] || [ -f /usr/include/curl/curl.h ] ||
    optional+=(libcurl4-openssl-dev)
[ -f /usr/include/cjson/cJSON.h ] || optional+=(libcjson-dev)
# The scheduler's /metrics (optional: left out, with a message, without it).
[ -f /usr/include/microhttpd.h ] || optional+=(libmicrohttpd-dev)
# nvshare_spank.so, the Slurm plugin (optional component).
[ -f /usr/include/slurm/spank.h ] || optional+=(libslurm-dev)
if [ "$mode" = test ]; then
    command -v python3 >/dev/null || optional+=(python3)
    [ -f /usr/include/cmocka.h ] || optional+=(libcmocka-dev)
    # k8s_manifests and k8s_watch: the real kubectl; PyYAML reads the chart.
    command -v kubectl >/dev/null || optional+=(kubernetes-client)
    # metrics_prometheus: a real Prometheus scrapes /metrics; promtool checks it.
    command -v prometheus >/dev/null && command -v promtool >/dev/null ||
        optional+=(prometheus)
    command -v curl >/dev/null || optional+=(curl)
    python3 -c 'import yaml' 2>/dev/null || /usr/bin/python3 -c 'import yaml' 2>/dev/null ||
        optional+=(python3-yaml)
    # k8s_flow reads the test kubelet's JSON answers with jq.
    command -v jq >/dev/null || optional+=(jq)
    # ctl_top drives nvsharectl top in a terminal.
    command -v tmux >/dev/null || optional+=(tmux)
    # scripts/lint.sh, which .ci/run calls: the format check and cppcheck.
    command -v clang-format >/dev/null || optional+=(clang-format)
    command -v cppcheck >/dev/null || optional+=(cppcheck)
    # slurm_shards: a real single-node Slurm (slurmctld, slurmd, munged).
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
        command -v munged >/dev/null && command -v srun >/dev/null ||
        optional+=(slurmctld slurmd slurm-client munge)
    # k8s_device_plugin's test kubelet.
    command -v protoc >/dev/null || optional+=(protobuf-compiler)
    /usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null ||
        optional+=(python3-grpcio python3-protobuf)
fi
[ ${#need[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ] && exit 0

install() {
    command -v apt-get >/dev/null || return 1
    local sudo=
    [ "$(id -u)" = 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    # apt's own progress shows: a first install on a fresh machine takes a
    # while, and silence would read as a hang.
    $sudo apt-get install -y --no-install-recommends "$@" ||
        { echo "install-deps: updating apt's package lists, then trying again"
          $sudo apt-get update && $sudo apt-get install -y --no-install-recommends "$@"; }
}

echo "install-deps: installing ${need[*]} ${optional[*]}"
if install "${need[@]}" "${optional[@]}"; then
    exit 0
fi
if [ ${#need[@]} -gt 0 ] && ! install "${need[@]}"; then
    echo "install-deps: cannot install ${need[*]}: install them by hand" >&2
    exit 1
fi
echo "install-deps: cannot install ${optional[*]}: the tests that need them are skipped" >&2
