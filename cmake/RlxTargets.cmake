# Helpers that give every rlx target the same include root, warnings and export set.

set(RLX_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
                      -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough
                      -Wno-missing-field-initializers)  # designated initializers omit defaults on purpose
if(RLX_WARNINGS_AS_ERRORS)
  list(APPEND RLX_WARNING_FLAGS -Werror)
endif()

# Warnings for our own code only (never for third-party headers pulled in as SYSTEM).
function(rlx_apply_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${RLX_WARNING_FLAGS}>)
endfunction()

# rlx_add_c_program(name source): a C11 program on the C API (rlx/rlx_c.h),
# every warning an error, as a C user would build it.
function(rlx_add_c_program name source)
  add_executable(${name} ${source})
  set_target_properties(${name} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wpedantic -Werror)
  target_link_libraries(${name} PRIVATE rlx::rlx)
endfunction()

# rlx_add_library(name SOURCES ... [PUBLIC_LIBS ...] [PRIVATE_LIBS ...])
# A static library whose headers are included as "rlx/...": relative to the
# repository root in the source tree and to <prefix>/include once installed.
function(rlx_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_LIBS;PRIVATE_LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  add_library(rlx::${name} ALIAS ${name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC_LIBS} PRIVATE ${ARG_PRIVATE_LIBS})
  # Users' programs get C++20 from the target: rlx's headers need it.
  target_compile_features(${name} PUBLIC cxx_std_20)
  rlx_apply_warnings(${name})
  install(TARGETS ${name} EXPORT rlxTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

# rlx_add_test(name SOURCES ... [LIBS ...] [TIMEOUT s])
# A GoogleTest binary registered with ctest case by case, each case with a
# deadline and the label "unit". A folder labels its own tests with
# set_property(DIRECTORY APPEND PROPERTY LABELS <folder>).
function(rlx_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  rlx_apply_warnings(${name})
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS unit)
endfunction()
