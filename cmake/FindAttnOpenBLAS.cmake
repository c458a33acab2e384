# Finds OpenBLAS for attn: the library and the directory holding OpenBLAS's
# cblas.h. attn needs OpenBLAS itself, not any CBLAS: src/kernels/cpu/gemm.cc
# calls cblas_sgemm and cblas_sgemv and also openblas_set_num_threads, which
# only OpenBLAS declares.
#
# Order: pkg-config's "openblas" module when pkg-config and the module exist,
# else find_path/find_library over the usual prefixes (CMAKE_PREFIX_PATH,
# OpenBLAS_ROOT / AttnOpenBLAS_ROOT, the system) with the subfolders that
# distributions use (openblas, openblas-pthread, openblas-openmp, openblas64 ...).
# Set AttnOpenBLAS_INCLUDE_DIR and AttnOpenBLAS_LIBRARY in the cache to choose by hand.
#
# Defines:
#   AttnOpenBLAS_FOUND, AttnOpenBLAS_INCLUDE_DIR, AttnOpenBLAS_LIBRARY
#   attn::openblas   an imported target that links the library
#
# Used both by attn's own build and by the installed attnConfig.cmake (there the
# headers are not needed; AttnOpenBLAS_LIBRARY_ONLY is set).
include(FindPackageHandleStandardArgs)

set(_attn_openblas_suffixes openblas-pthread openblas-openmp openblas-serial openblas openblas64
    openblas64-pthread openblas64-openmp)

if(NOT AttnOpenBLAS_LIBRARY OR (NOT AttnOpenBLAS_LIBRARY_ONLY AND NOT AttnOpenBLAS_INCLUDE_DIR))
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(_ATTN_PC_OPENBLAS QUIET openblas)
  endif()
endif()

# openblas_config.h sits beside OpenBLAS's cblas.h and only there, so it tells
# OpenBLAS's headers from another BLAS's cblas.h in /usr/include.
find_path(AttnOpenBLAS_INCLUDE_DIR NAMES openblas_config.h
          HINTS ${_ATTN_PC_OPENBLAS_INCLUDE_DIRS} ${AttnOpenBLAS_ROOT} ${OpenBLAS_ROOT}
                ENV OpenBLAS_ROOT ENV OPENBLAS_HOME
          PATH_SUFFIXES include ${_attn_openblas_suffixes} include/openblas)
find_library(AttnOpenBLAS_LIBRARY NAMES openblas openblas64 openblas64_
             HINTS ${_ATTN_PC_OPENBLAS_LIBRARY_DIRS} ${AttnOpenBLAS_ROOT} ${OpenBLAS_ROOT}
                   ENV OpenBLAS_ROOT ENV OPENBLAS_HOME
             PATH_SUFFIXES lib lib64 ${_attn_openblas_suffixes})

if(AttnOpenBLAS_LIBRARY_ONLY)
  find_package_handle_standard_args(AttnOpenBLAS REQUIRED_VARS AttnOpenBLAS_LIBRARY)
else()
  if(AttnOpenBLAS_INCLUDE_DIR AND NOT EXISTS "${AttnOpenBLAS_INCLUDE_DIR}/cblas.h")
    message(WARNING "attn: ${AttnOpenBLAS_INCLUDE_DIR} has openblas_config.h but no cblas.h")
    set(AttnOpenBLAS_INCLUDE_DIR AttnOpenBLAS_INCLUDE_DIR-NOTFOUND CACHE PATH "" FORCE)
  endif()
  find_package_handle_standard_args(AttnOpenBLAS REQUIRED_VARS AttnOpenBLAS_LIBRARY AttnOpenBLAS_INCLUDE_DIR)
endif()

if(AttnOpenBLAS_FOUND AND NOT TARGET attn::openblas)
  # GLOBAL: in subproject mode the parent project links it through attn::attn.
  add_library(attn::openblas INTERFACE IMPORTED GLOBAL)
  set_target_properties(attn::openblas PROPERTIES INTERFACE_LINK_LIBRARIES "${AttnOpenBLAS_LIBRARY}")
endif()
mark_as_advanced(AttnOpenBLAS_INCLUDE_DIR AttnOpenBLAS_LIBRARY)
