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
