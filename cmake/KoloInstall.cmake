# `cmake --install` lays out headers under include/kolo, the library, a CMake package
# (find_package(kolo) gives kolo::kolo) and a pkg-config file (pkg-config --cflags --libs kolo).
include(CMakePackageConfigHelpers)

# A sanitized libkolo (KOLO_SANITIZE) needs the sanitizer's runtime linked into every program that
# uses it (AddressSanitizer's must load first): consumers get the flag from kolo::kolo and kolo.pc.
set(KOLO_PC_LINK_OPTIONS "")
if(KOLO_SANITIZE)
  target_link_options(kolo INTERFACE -fsanitize=${KOLO_SANITIZE})
  set(KOLO_PC_LINK_OPTIONS " -fsanitize=${KOLO_SANITIZE}")
endif()

install(TARGETS kolo EXPORT koloTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kolo)
install(TARGETS kolorun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Only the public API and what it includes: the Communicator, alloc_shared, the engine and the
# C API. Internal headers (transports, collectives, engine state) stay in the source tree.
foreach(header comm/communicator.h comm/alloc_shared.h comm/base/error.h comm/base/dtype.h
               comm/base/reduce_op.h comm/base/algorithm.h comm/base/transport_kind.h
               fusion/engine.h bindings/c/kolo.h)
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kolo/${dir})
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/kolo_config.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kolo)
install(EXPORT koloTargets NAMESPACE kolo:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kolo)

configure_package_config_file(cmake/koloConfig.cmake.in
  ${PROJECT_BINARY_DIR}/koloConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kolo)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/koloConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/koloConfig.cmake ${PROJECT_BINARY_DIR}/koloConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kolo)

configure_file(cmake/kolo.pc.in ${PROJECT_BINARY_DIR}/kolo.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kolo.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
