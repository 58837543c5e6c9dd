# nvsharectl against a real scheduler (included from CMakeLists.txt here).
add_test(NAME ctl_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ctl_test.sh $<TARGET_FILE:nvshare-scheduler> $<TARGET_FILE:nvsharectl>)
set_tests_properties(ctl_cli PROPERTIES TIMEOUT 60)
