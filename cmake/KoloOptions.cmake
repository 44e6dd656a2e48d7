# Build options. KOLO_WITH_<DEP> is AUTO (use it when found), ON (required) or OFF.

option(KOLO_WERROR "Treat compiler warnings as errors (CI turns this on)" OFF)
option(KOLO_BUILD_TESTS "Build the test suite" ON)
set(KOLO_SANITIZE "" CACHE STRING "Sanitizer: address, undefined, thread or empty")
set_property(CACHE KOLO_SANITIZE PROPERTY STRINGS "" address undefined thread)

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
# Planned back ends with nothing behind them yet: asking for one is refused rather than
# accepted and ignored (the UCX transport and the CUDA/NCCL path are later issues).
foreach(planned UCX CUDA NCCL)
  if(DEFINED KOLO_WITH_${planned} AND NOT KOLO_WITH_${planned} MATCHES "^(OFF|AUTO|)$")
    message(FATAL_ERROR "KOLO_WITH_${planned}=${KOLO_WITH_${planned}}: this version of kolo has "
                        "no ${planned} support yet; accepted: OFF")
  endif()
endforeach()

if(KOLO_SANITIZE)
  if(NOT KOLO_SANITIZE MATCHES "^(address|undefined|thread)$")
    message(FATAL_ERROR "KOLO_SANITIZE='${KOLO_SANITIZE}': expected address, undefined or thread")
  endif()
  add_compile_options(-fsanitize=${KOLO_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${KOLO_SANITIZE})
endif()
