# common.cmake - unit tests for src/common (wire protocol, parsing, the
# NVSHARE_GPUS parser), plus the protocol fuzz target.
# Included from tests/unit/CMakeLists.txt after it has found cmocka
# (CMOCKA_LIBRARY, CMOCKA_INCLUDE_DIR).

option(NVSHARE_FUZZ "Build the libFuzzer protocol target (needs clang)" OFF)

function(nvshare_common_test name)
  add_executable(${name} ${name}.c ${ARGN})
  target_include_directories(${name} PRIVATE ${CMOCKA_INCLUDE_DIR})
  target_link_libraries(${name} PRIVATE ${CMOCKA_LIBRARY} nvshare_common)
  nvshare_sanitize(${name})
  add_test(NAME ${name} COMMAND ${name})
endfunction()

nvshare_common_test(test_protocol)
nvshare_common_test(test_parse)
# the UTF-8 checker and JSON escaper of the log and nvsharectl
nvshare_common_test(test_text)
# docs/protocol.md's payload tables against protocol.def
nvshare_common_test(test_protocol_doc)
target_compile_definitions(test_protocol_doc PRIVATE
  PROTOCOL_DOC="${PROJECT_SOURCE_DIR}/docs/protocol.md")
nvshare_common_test(test_gpus)
target_link_libraries(test_gpus PRIVATE nvshare_gpus)
# the scheduler's settings table, alone
nvshare_common_test(test_settings ${PROJECT_SOURCE_DIR}/src/scheduler/settings.c)
target_include_directories(test_settings PRIVATE ${PROJECT_SOURCE_DIR}/src/scheduler)
# the state file: settings and pods kept across restarts
nvshare_common_test(test_state ${PROJECT_SOURCE_DIR}/src/scheduler/state.c
                    ${PROJECT_SOURCE_DIR}/src/scheduler/settings.c)
target_include_directories(test_state PRIVATE ${PROJECT_SOURCE_DIR}/src/scheduler)
target_link_libraries(test_state PRIVATE nvshare_policy)
# a process's pod and container from its cgroup file, against fixtures
nvshare_common_test(test_identity ${PROJECT_SOURCE_DIR}/src/scheduler/identity.c)
target_include_directories(test_identity PRIVATE ${PROJECT_SOURCE_DIR}/src/scheduler)
target_compile_definitions(test_identity PRIVATE
  CGROUP_CASES="${CMAKE_CURRENT_SOURCE_DIR}/cgroup_cases")
# which of NVML's processes are reported as unhooked
nvshare_common_test(test_unhooked ${PROJECT_SOURCE_DIR}/src/scheduler/unhooked.c
  ${PROJECT_SOURCE_DIR}/src/scheduler/identity.c)
target_include_directories(test_unhooked PRIVATE ${PROJECT_SOURCE_DIR}/src/scheduler)
# host-swap-budget auto from the host's meminfo
nvshare_common_test(test_host_memory ${PROJECT_SOURCE_DIR}/src/common/host_memory.c)
# the host memory a process's cgroup leaves it, from file systems laid out
# in a temporary directory
nvshare_common_test(test_cgroup_memory)

# The fuzz target as a plain program that replays the committed cases
# (protocol_cases/<expect>-*.bin). protocol.c and protocol_io.c are compiled
# in rather than linked from nvshare_common so that the sanitizers instrument
# them.
add_executable(fuzz_protocol_replay fuzz_protocol.c
  ${PROJECT_SOURCE_DIR}/src/common/protocol.c
  ${PROJECT_SOURCE_DIR}/src/common/protocol_io.c)
target_include_directories(fuzz_protocol_replay PRIVATE ${PROJECT_SOURCE_DIR}/src/common)
target_compile_definitions(fuzz_protocol_replay PRIVATE NVSHARE_FUZZ_REPLAY)
nvshare_sanitize(fuzz_protocol_replay)
add_test(NAME fuzz_protocol_replay
  COMMAND fuzz_protocol_replay ${CMAKE_CURRENT_SOURCE_DIR}/protocol_cases)

# libFuzzer itself: cmake -DNVSHARE_FUZZ=ON -DCMAKE_C_COMPILER=clang, then
#   ./fuzz_protocol -max_total_time=120 <scratch corpus dir> tests/unit/protocol_cases
if(NVSHARE_FUZZ)
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    set(NVSHARE_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=all -fno-omit-frame-pointer)
    add_executable(fuzz_protocol fuzz_protocol.c
      ${PROJECT_SOURCE_DIR}/src/common/protocol.c
      ${PROJECT_SOURCE_DIR}/src/common/protocol_io.c)
    target_include_directories(fuzz_protocol PRIVATE ${PROJECT_SOURCE_DIR}/src/common)
    target_compile_options(fuzz_protocol PRIVATE ${NVSHARE_FUZZ_FLAGS})
    target_link_options(fuzz_protocol PRIVATE ${NVSHARE_FUZZ_FLAGS})
  else()
    message(WARNING "NVSHARE_FUZZ needs clang (CMAKE_C_COMPILER_ID is ${CMAKE_C_COMPILER_ID}): fuzz_protocol is not built")
  endif()
endif()
