# k8s_device_plugin: a test kubelet in Python (python3-grpcio, python3-protobuf)
# against the real plugin, with messages compiled from the plugin's own
# deviceplugin.proto by protoc --python_out at build time.
find_program(PROTOC protoc)
set(K8S_PYTHON "")
foreach(candidate python3 /usr/bin/python3)
  find_program(py_${candidate} NAMES ${candidate} NO_CACHE)
  if(py_${candidate})
    execute_process(COMMAND ${py_${candidate}} -c "import grpc, google.protobuf"
      RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(K8S_PYTHON ${py_${candidate}})
      break()
    endif()
  endif()
endforeach()
if(NOT PROTOC OR NOT K8S_PYTHON)
  set(why "needs protobuf-compiler, python3-grpcio and python3-protobuf")
  if(NVSHARE_REQUIRE_ALL_TESTS)
    message(FATAL_ERROR "k8s_device_plugin ${why}")
  endif()
  message(STATUS "k8s_device_plugin skipped: ${why}")
  return()
endif()

set(K8S_PB2_DIR ${CMAKE_CURRENT_BINARY_DIR}/k8s)
set(K8S_PROTO ${PROJECT_SOURCE_DIR}/src/device-plugin/deviceplugin.proto)
add_custom_command(OUTPUT ${K8S_PB2_DIR}/deviceplugin_pb2.py
  COMMAND ${CMAKE_COMMAND} -E make_directory ${K8S_PB2_DIR}
  COMMAND ${PROTOC} --proto_path=${PROJECT_SOURCE_DIR}/src/device-plugin
          --python_out=${K8S_PB2_DIR} ${K8S_PROTO}
  DEPENDS ${K8S_PROTO}
  COMMENT "protoc --python_out deviceplugin.proto")
add_custom_target(k8s_device_plugin_pb2 ALL DEPENDS ${K8S_PB2_DIR}/deviceplugin_pb2.py)

set(fake_nvml_dir "")
if(CUDA_INCLUDE_DIR)
  set(fake_nvml_dir $<TARGET_FILE_DIR:fake_nvml>)
endif()
add_test(NAME k8s_device_plugin
  COMMAND ${K8S_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/k8s_device_plugin.py
          $<TARGET_FILE:nvshare-device-plugin> ${K8S_PB2_DIR} ${fake_nvml_dir})
set_tests_properties(k8s_device_plugin PROPERTIES TIMEOUT 120)
# tests/k8s's k8s_flow drives the same test kubelet.
set(K8S_PYTHON ${K8S_PYTHON} PARENT_SCOPE)
set(K8S_PB2_DIR ${K8S_PB2_DIR} PARENT_SCOPE)
