# Build options. KOLO_WITH_<DEP> is AUTO (use it when found), ON (required) or OFF.

option(KOLO_WERROR "Treat compiler warnings as errors (CI turns this on)" OFF)
option(KOLO_BUILD_TESTS "Build the test suite" ON)
set(KOLO_SANITIZE "" CACHE STRING "Sanitizer: address, undefined, thread or empty")
set_property(CACHE KOLO_SANITIZE PROPERTY STRINGS "" address undefined thread)
# libFuzzer targets of kolo's parsers (tests/fuzz/, run by scripts/fuzz.sh); Clang only. They
# carry their own -fsanitize=fuzzer,address,undefined; the rest of the build is unchanged.
option(KOLO_FUZZ "Build the libFuzzer targets in tests/fuzz (needs Clang)" OFF)

# kolo_dependency(NAME FOUND_VAR): resolves KOLO_WITH_NAME from AUTO/ON/OFF and FOUND_VAR.
macro(kolo_dependency name found)
  set(KOLO_WITH_${name} AUTO CACHE STRING "Use ${name}: AUTO, ON or OFF")
  set_property(CACHE KOLO_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
  if(KOLO_WITH_${name} STREQUAL "OFF")
    set(KOLO_HAVE_${name} OFF)
  elseif(${found})
    set(KOLO_HAVE_${name} ON)
  elseif(KOLO_WITH_${name} STREQUAL "ON")
    message(FATAL_ERROR "KOLO_WITH_${name}=ON but ${name} was not found")
  else()
    set(KOLO_HAVE_${name} OFF)
  endif()
  message(STATUS "kolo: ${name} ${KOLO_HAVE_${name}}")
endmacro()

find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(nlohmann_json 3.10 REQUIRED)

find_package(MPI COMPONENTS C QUIET)
kolo_dependency(MPI MPI_C_FOUND)

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(GLOO QUIET IMPORTED_TARGET gloo)
endif()
if(NOT GLOO_FOUND)
  find_path(GLOO_INCLUDE_DIR gloo/allreduce_ring.h)
  find_library(GLOO_LIBRARY gloo)
  if(GLOO_INCLUDE_DIR AND GLOO_LIBRARY)
    set(GLOO_FOUND ON)
  endif()
endif()
kolo_dependency(GLOO GLOO_FOUND)
# OpenBLAS: GEMM for the trainer's CPU kernels (Debian: libopenblas-dev).
set(OPENBLAS_FOUND OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
endif()
kolo_dependency(OPENBLAS OPENBLAS_FOUND)
# UCX: the ucx transport (Debian: libucx-dev). A sanitizer build skips it under AUTO: UCX's
# libucm replaces mmap/munmap when it is loaded, which the sanitizers' runtimes do not survive
# (ThreadSanitizer crashed in the engine tests).
set(UCX_FOUND OFF)
if(PkgConfig_FOUND AND NOT (KOLO_SANITIZE AND NOT KOLO_WITH_UCX STREQUAL "ON"))
  pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
endif()
kolo_dependency(UCX UCX_FOUND)
# hwloc: kolorun's --topology and --bind (Debian: libhwloc-dev).
set(HWLOC_FOUND OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
endif()
kolo_dependency(HWLOC HWLOC_FOUND)
# Python bindings (bindings/python: kolo._core, kolo.torch) for /usr/bin/python3 by default
# (Debian: pybind11-dev, python3-dev; kolo.torch needs python3-torch); another interpreter with
# -DPython_EXECUTABLE=... A sanitizer build skips them under AUTO: the interpreter would need
# the sanitizer's runtime preloaded.
set(KOLO_PYTHON_FOUND OFF)
set(KOLO_PYTHON_MISSING "")
if(KOLO_SANITIZE AND NOT KOLO_WITH_PYTHON STREQUAL "ON")
  set(KOLO_PYTHON_MISSING "KOLO_SANITIZE=${KOLO_SANITIZE} (set KOLO_WITH_PYTHON=ON to build them)")
elseif(NOT KOLO_WITH_PYTHON STREQUAL "OFF")
  if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python 3.8 COMPONENTS Interpreter Development.Module QUIET)
  if(NOT Python_FOUND)
    set(KOLO_PYTHON_MISSING "no Python with development headers (Debian: python3-dev)")
  else()
    find_package(pybind11 2.6 CONFIG QUIET)
    if(NOT pybind11_FOUND)
      set(KOLO_PYTHON_MISSING "pybind11 not found (Debian: pybind11-dev)")
    else()
      set(KOLO_PYTHON_FOUND ON)
    endif()
  endif()
endif()
if(KOLO_PYTHON_MISSING)
  message(STATUS "kolo: Python bindings skipped: ${KOLO_PYTHON_MISSING}")
endif()
kolo_dependency(PYTHON KOLO_PYTHON_FOUND)
# CUDA: the device kernels (fusion/cuda), compiled whenever nvcc is found (the CUDA toolkit at
# /usr/local/cuda here), for CMAKE_CUDA_ARCHITECTURES (default 80 and 90: A100, H100/H200).
# Sanitizer and fuzz builds skip it under AUTO (they check host code).
set(KOLO_NVCC_FOUND OFF)
if(NOT KOLO_WITH_CUDA STREQUAL "OFF" AND (KOLO_WITH_CUDA STREQUAL "ON" OR NOT (KOLO_SANITIZE OR KOLO_FUZZ)))
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(KOLO_NVCC_FOUND ON)
  endif()
endif()
kolo_dependency(CUDA KOLO_NVCC_FOUND)
if(KOLO_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
endif()
# nvcc's own warnings and the host compiler's (through -Xcompiler) for a target's .cu files,
# errors under KOLO_WERROR; relaxed constexpr lets device code call constexpr host helpers.
function(kolo_cuda_options target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${KOLO_WERROR}>>:-Werror=all-warnings>)
endfunction()

# NCCL: the device collectives (comm/nccl), looked for beside the CUDA toolkit (nccl.h and
# libnccl in its folders here) when CUDA is on.
set(KOLO_NCCL_FOUND OFF)
if(KOLO_HAVE_CUDA)
  find_path(KOLO_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(KOLO_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(KOLO_NCCL_INCLUDE_DIR AND KOLO_NCCL_LIBRARY)
    set(KOLO_NCCL_FOUND ON)
  endif()
endif()
kolo_dependency(NCCL KOLO_NCCL_FOUND)

if(KOLO_SANITIZE)
  if(NOT KOLO_SANITIZE MATCHES "^(address|undefined|thread)$")
    message(FATAL_ERROR "KOLO_SANITIZE='${KOLO_SANITIZE}': expected address, undefined or thread")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${KOLO_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>)
  if(KOLO_SANITIZE STREQUAL "undefined")
    # Undefined behaviour stops the program instead of printing and carrying on, so a report
    # fails its test (scripts/sanitize.sh).
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>)
  endif()
  add_link_options(-fsanitize=${KOLO_SANITIZE})
endif()

if(KOLO_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KOLO_FUZZ=ON needs Clang (libFuzzer), but the C++ compiler is "
                        "${CMAKE_CXX_COMPILER_ID}: configure a fresh build directory with "
                        "CC=clang CXX=clang++ (scripts/fuzz.sh does)")
  endif()
  if(KOLO_SANITIZE STREQUAL "thread")
    message(FATAL_ERROR "KOLO_FUZZ=ON builds with AddressSanitizer, which cannot be combined "
                        "with KOLO_SANITIZE=thread")
  endif()
  if(NOT KOLO_BUILD_TESTS)
    message(FATAL_ERROR "KOLO_FUZZ=ON needs KOLO_BUILD_TESTS=ON (the targets are in tests/fuzz)")
  endif()
endif()
