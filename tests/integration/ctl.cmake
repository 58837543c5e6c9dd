# nvsharectl against a real scheduler (included from CMakeLists.txt here).
add_test(NAME ctl_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ctl_test.sh $<TARGET_FILE:nvshare-scheduler> $<TARGET_FILE:nvsharectl>)
set_tests_properties(ctl_cli PROPERTIES TIMEOUT 60)
# nvsharectl top in tmux (skipped without tmux).
add_test(NAME ctl_top COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ctl_top.sh $<TARGET_FILE:nvshare-scheduler>
         $<TARGET_FILE:sim_workload> $<TARGET_FILE:nvsharectl>)
set_tests_properties(ctl_top PROPERTIES TIMEOUT 90 SKIP_RETURN_CODE 77)
# Shell completion made from the commands table.
add_test(NAME ctl_completion COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ctl_completion.sh $<TARGET_FILE:nvsharectl>)
set_tests_properties(ctl_completion PROPERTIES TIMEOUT 30)
