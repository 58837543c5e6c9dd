# metrics_slow_clients: slow clients do not keep a scrape from its answer.
if(NVSHARE_METRICS)
  add_test(NAME metrics_slow_clients
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/metrics_slow_clients.sh ${SCHED} ${WORKLOAD})
  set_tests_properties(metrics_slow_clients PROPERTIES TIMEOUT 60)
endif()

# metrics_prometheus: the scheduler's /metrics against Debian's prometheus
# and promtool (`make test` installs them: scripts/install-deps.sh test).
find_program(PROMETHEUS prometheus)
find_program(PROMTOOL promtool)
find_program(CURL_TOOL curl)
set(metrics_missing "")
if(NOT NVSHARE_METRICS)
  set(metrics_missing "libmicrohttpd-dev")
endif()
foreach(tool PROMETHEUS PROMTOOL CURL_TOOL)
  if(NOT ${tool})
    string(TOLOWER ${tool} name)
    set(metrics_missing "${metrics_missing} ${name}")
  endif()
endforeach()
if(metrics_missing AND NVSHARE_REQUIRE_ALL_TESTS)
  message(FATAL_ERROR "metrics_prometheus needs ${metrics_missing}, and NVSHARE_REQUIRE_ALL_TESTS is on")
elseif(metrics_missing)
  message(STATUS "metrics_prometheus is not run: missing ${metrics_missing} "
                 "(scripts/install-deps.sh test)")
  return()
endif()
add_test(NAME metrics_prometheus
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/metrics_prometheus.sh ${SCHED} ${WORKLOAD}
          $<TARGET_FILE:nvsharectl> ${PROMETHEUS} ${PROMTOOL})
set_tests_properties(metrics_prometheus PROPERTIES TIMEOUT 60)
