# Configures weft in throwaway folders (tests and tools off: a configure only, nothing is built)
# and checks the rules of WEFT_USE_ONEDNN and WEFT_USE_CUDA: a missing oneDNN is an error unless
# OFF is asked for, an explicit CUDA ON that cannot be met is an error, and an option left to
# detection follows it on every configure instead of keeping what the first one found.
# Run by CTest: cmake -DWEFT_SOURCE_DIR=... -DWORK_DIR=... [-DGENERATOR=...] -P this file.
cmake_minimum_required(VERSION 3.22)

foreach(var WEFT_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "pass -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")

# configure(<folder> <SUCCEEDS|FAILS> [-D...]...): configures WORK_DIR/<folder>, expecting the
# given outcome; the output goes to `output`, the generated build_config.h to `config`.
function(configure folder outcome)
  set(args -S "${WEFT_SOURCE_DIR}" -B "${WORK_DIR}/${folder}" -DWEFT_BUILD_TESTS=OFF
           -DWEFT_BUILD_TOOLS=OFF -DWEFT_BUILD_BENCH=OFF)
  if(GENERATOR)
    list(APPEND args -G "${GENERATOR}")
  endif()
  foreach(v MAKE_PROGRAM C_COMPILER CXX_COMPILER)
    if(${v})
      list(APPEND args "-DCMAKE_${v}=${${v}}")
    endif()
  endforeach()
  execute_process(COMMAND "${CMAKE_COMMAND}" ${args} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(output "${out}${err}" PARENT_SCOPE)
  set(config "" PARENT_SCOPE)
  set(header "${WORK_DIR}/${folder}/generated/base/build_config.h")
  if(rc EQUAL 0 AND EXISTS "${header}")
    file(READ "${header}" text)
    set(config "${text}" PARENT_SCOPE)
  endif()
  if(outcome STREQUAL "SUCCEEDS" AND NOT rc EQUAL 0)
    message(SEND_ERROR "configure ${folder} ${ARGN}: expected success, got ${rc}:\n${out}${err}")
  elseif(outcome STREQUAL "FAILS" AND rc EQUAL 0)
    message(SEND_ERROR "configure ${folder} ${ARGN}: expected a configure error:\n${out}${err}")
  endif()
  message(STATUS "configure ${folder} ${ARGN}: exit ${rc} (expected: ${outcome})")
endfunction()

function(expect_in haystack needle what)
  string(FIND "${haystack}" "${needle}" at)
  if(at EQUAL -1)
    message(SEND_ERROR "${what}: '${needle}' not found in:\n${haystack}")
  endif()
endfunction()

# ---- oneDNN ----------------------------------------------------------------------------------
# Not installed: an error that says how to install it or how to build without it.
configure(onednn FAILS -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON)
expect_in("${output}" "apt-get install libdnnl-dev" "missing oneDNN")
expect_in("${output}" "-DWEFT_USE_ONEDNN=OFF" "missing oneDNN")
# Installed afterwards: the same folder picks it up (the first configure cached no OFF).
if(DNNL_AVAILABLE)
  configure(onednn SUCCEEDS -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=OFF)
  expect_in("${config}" "#define WEFT_USE_ONEDNN 1" "oneDNN installed after a failed configure")
endif()
# Asked to build without it: fine, and it stays off on later configures (the user's choice).
configure(no_onednn SUCCEEDS -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON -DWEFT_USE_ONEDNN=OFF)
expect_in("${config}" "#define WEFT_USE_ONEDNN 0" "-DWEFT_USE_ONEDNN=OFF")
configure(no_onednn SUCCEEDS -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=OFF)
expect_in("${config}" "#define WEFT_USE_ONEDNN 0" "an explicit OFF is kept")
if(DNNL_AVAILABLE)
  expect_in("${output}" "WEFT_USE_ONEDNN=OFF" "OFF while oneDNN is installed warns")
  # Back to detection: on again.
  configure(no_onednn SUCCEEDS -DWEFT_USE_ONEDNN=AUTO)
  expect_in("${config}" "#define WEFT_USE_ONEDNN 1" "WEFT_USE_ONEDNN=AUTO")
endif()
# Explicit ON without oneDNN fails too; nonsense values are rejected.
configure(onednn_on FAILS -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON -DWEFT_USE_ONEDNN=ON)
expect_in("${output}" "libdnnl-dev" "WEFT_USE_ONEDNN=ON without oneDNN")
configure(onednn_bad FAILS -DWEFT_USE_ONEDNN=sometimes)
expect_in("${output}" "expected AUTO, ON or OFF" "WEFT_USE_ONEDNN=sometimes")

# ---- CUDA ------------------------------------------------------------------------------------
# oneDNN off in these folders so they run on machines without it too.
set(cpu -DWEFT_USE_ONEDNN=OFF)
# Not found, not asked for: off, with a message.
configure(cuda SUCCEEDS ${cpu} -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)
expect_in("${config}" "#define WEFT_USE_CUDA 0" "CUDA not found")
expect_in("${output}" "CUDA toolkit was not found" "CUDA not found")
# Found on a later configure of the same folder: on (detection is not cached).
if(CUDA_AVAILABLE)
  configure(cuda SUCCEEDS ${cpu} -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=OFF)
  expect_in("${config}" "#define WEFT_USE_CUDA 1" "CUDA found after a configure without it")
endif()
# Asked for and not found: an error.
configure(cuda_on FAILS ${cpu} -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DWEFT_USE_CUDA=ON)
expect_in("${output}" "WEFT_USE_CUDA=ON but the CUDA toolkit was not found" "WEFT_USE_CUDA=ON")
# Explicitly off: off even where the toolkit is installed.
configure(cuda_off SUCCEEDS ${cpu} -DWEFT_USE_CUDA=OFF)
expect_in("${config}" "#define WEFT_USE_CUDA 0" "WEFT_USE_CUDA=OFF")

file(REMOVE_RECURSE "${WORK_DIR}")
