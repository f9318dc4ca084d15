# cmake --install: headers under <prefix>/include/rlx, static libraries, rlxrun,
# and a CMake package so a user project can find_package(rlx) and link rlx::rlx.
include(CMakePackageConfigHelpers)

foreach(dir rlx rlx/core rlx/transport rlx/transport/rendezvous rlx/transport/shm rlx/collectives
            rlx/backends/singleton rlx/backends/tcp rlx/backends/mpi rlx/backends/verbs)
  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.h)
  list(FILTER headers EXCLUDE REGEX "_test\\.h$")  # test helpers, which need gtest
  install(FILES ${headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${dir})
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/rlx/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rlx)

set(RLX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)
install(EXPORT rlxTargets NAMESPACE rlx:: DESTINATION ${RLX_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rlxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rlxConfig.cmake INSTALL_DESTINATION ${RLX_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rlxConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rlxConfig.cmake ${PROJECT_BINARY_DIR}/rlxConfigVersion.cmake
        DESTINATION ${RLX_CMAKE_DIR})

# pkg-config for C programs (and other languages) on librlx_c.so.
file(RELATIVE_PATH RLX_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${PROJECT_SOURCE_DIR}/cmake/rlx.pc.in ${PROJECT_BINARY_DIR}/rlx.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rlx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
