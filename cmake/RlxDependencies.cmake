# Finds what rlx links against. Every dependency is a Debian 12 package;
# scripts/setup-deps.sh installs the ones that are missing.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(Boost 1.74 REQUIRED)  # Asio is header-only
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)
find_package(nlohmann_json 3.11 REQUIRED)  # static JSON hostfiles
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET GLOBAL openblas)

# Resolves an ON/OFF/AUTO option into ${out}: TRUE when the backend is built.
function(rlx_resolve_backend option found what)
  if(${option} STREQUAL "OFF")
    set(built FALSE)
  elseif(found)
    set(built TRUE)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but ${what} was not found "
                        "(install it, or configure with ${option}=AUTO or OFF)")
  else()
    set(built FALSE)
  endif()
  set(${option}_BUILT ${built} PARENT_SCOPE)
endfunction()

if(NOT RLX_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
endif()
rlx_resolve_backend(RLX_WITH_MPI "${MPI_C_FOUND}" "Open MPI (Debian: libopenmpi-dev openmpi-bin)")
set(RLX_MPI_BUILT ${RLX_WITH_MPI_BUILT})

if(NOT RLX_WITH_VERBS STREQUAL "OFF")
  pkg_check_modules(IBVERBS QUIET IMPORTED_TARGET GLOBAL libibverbs)
  pkg_check_modules(RDMACM QUIET IMPORTED_TARGET GLOBAL librdmacm)
endif()
if(IBVERBS_FOUND AND RDMACM_FOUND)
  set(_verbs_found TRUE)
else()
  set(_verbs_found FALSE)
endif()
rlx_resolve_backend(RLX_WITH_VERBS "${_verbs_found}"
                    "libibverbs + librdmacm (Debian: libibverbs-dev librdmacm-dev)")
set(RLX_VERBS_BUILT ${RLX_WITH_VERBS_BUILT})

if(NOT RLX_WITH_PMIX STREQUAL "OFF")
  pkg_check_modules(PMIX QUIET IMPORTED_TARGET GLOBAL pmix)
endif()
rlx_resolve_backend(RLX_WITH_PMIX "${PMIX_FOUND}" "libpmix (Debian: libpmix-dev)")
set(RLX_PMIX_BUILT ${RLX_WITH_PMIX_BUILT})

if(RLX_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(RLX_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# The Python module: pybind11 for Debian's own python3 (the one python3-numpy
# is for; a python3 earlier on PATH may be another).
set(RLX_WITH_PYTHON AUTO CACHE STRING "Build the Python module: ON, OFF or AUTO")
set_property(CACHE RLX_WITH_PYTHON PROPERTY STRINGS ON OFF AUTO)
if(NOT RLX_WITH_PYTHON STREQUAL "OFF")
  if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python 3.8 QUIET COMPONENTS Interpreter Development.Module)
  if(Python_FOUND)
    find_package(pybind11 2.6 CONFIG QUIET)
  endif()
endif()
if(Python_FOUND AND pybind11_FOUND)
  set(_python_found TRUE)
else()
  set(_python_found FALSE)
endif()
rlx_resolve_backend(RLX_WITH_PYTHON "${_python_found}"
                    "python3 with pybind11 (Debian: python3-dev pybind11-dev)")
set(RLX_PYTHON_BUILT ${RLX_WITH_PYTHON_BUILT})
if(RLX_PYTHON_BUILT)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"
    OUTPUT_VARIABLE RLX_PYTHON_MODULE_SUFFIX OUTPUT_STRIP_TRAILING_WHITESPACE)
  # Debian's python3 looks in <prefix>/lib/python3.X/dist-packages for
  # /usr/local and /usr (docs/PYTHON.md: PYTHONPATH for other prefixes).
  set(RLX_PYTHON_INSTALL_DIR
      "lib/python${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}/dist-packages"
      CACHE STRING "Where the Python module installs, under the prefix")
endif()

# torch.distributed's "rlx" backend (bindings/torch): Debian's libtorch-dev
# for the torch of its python3-torch, beside the Python module.
set(RLX_WITH_TORCH AUTO CACHE STRING "Build the torch.distributed backend: ON, OFF or AUTO")
set_property(CACHE RLX_WITH_TORCH PROPERTY STRINGS ON OFF AUTO)
set(_torch_found FALSE)
if(RLX_PYTHON_BUILT AND NOT RLX_WITH_TORCH STREQUAL "OFF")
  find_path(RLX_TORCH_INCLUDE_DIR torch/csrc/distributed/c10d/ProcessGroup.hpp)
  foreach(lib torch_python torch torch_cpu c10)
    find_library(RLX_TORCH_LIB_${lib} ${lib})
    if(RLX_TORCH_LIB_${lib})
      list(APPEND RLX_TORCH_LIBRARIES ${RLX_TORCH_LIB_${lib}})
    endif()
  endforeach()
  list(LENGTH RLX_TORCH_LIBRARIES _torch_libs)
  if(RLX_TORCH_INCLUDE_DIR AND _torch_libs EQUAL 4)
    set(_torch_found TRUE)
    set(RLX_TORCH_INCLUDE_DIRS ${RLX_TORCH_INCLUDE_DIR}
                               ${RLX_TORCH_INCLUDE_DIR}/torch/csrc/api/include)
  endif()
endif()
rlx_resolve_backend(RLX_WITH_TORCH "${_torch_found}"
                    "libtorch-dev beside the Python module (Debian: libtorch-dev python3-torch)")
set(RLX_TORCH_BUILT ${RLX_WITH_TORCH_BUILT})
