# Install rules (included from the top-level CMakeLists.txt when ATTN_INSTALL is ON):
#   include/attn/**             the public headers, plus the generated attn/version.h
#   lib/libattn_<floor>.a       one static library per floor
#   lib/cmake/attn/             attnConfig.cmake, attnConfigVersion.cmake, attnTargets*.cmake,
#                               FindAttnOpenBLAS.cmake (used by attnConfig.cmake)
#   lib/pkgconfig/attn.pc       for pkg-config
#   bin/attn                    the command-line tool (when ATTN_BUILD_CLI is ON)
include(CMakePackageConfigHelpers)
set(ATTN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/attn CACHE STRING
    "Where attnConfig.cmake is installed (relative to the prefix)")

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/attn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${ATTN_GENERATED_INCLUDE}/attn/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attn)
install(TARGETS ${ATTN_FLOOR_TARGETS} attn_all EXPORT attnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(ATTN_MPI)  # attn::mpi (data parallel over MPI); attnConfig.cmake then finds MPI
  install(TARGETS attn_mpi EXPORT attnTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(ATTN_BUILD_CLI)
  install(TARGETS attn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT attnTargets NAMESPACE attn:: DESTINATION ${ATTN_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/attnConfig.cmake
                              INSTALL_DESTINATION ${ATTN_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API, so find_package(attn 0.2) accepts 0.2.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnConfig.cmake ${PROJECT_BINARY_DIR}/attnConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindAttnOpenBLAS.cmake
        DESTINATION ${ATTN_INSTALL_CMAKEDIR})

# attn.pc: relocatable (paths relative to the .pc file), static libraries in
# link order (highest floor first), then OpenBLAS and -pthread.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(ATTN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(ATTN_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(ATTN_PC_PREFIX "\${pcfiledir}")
  string(REPLACE "/" ";" _attn_libdir_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  foreach(_part ${_attn_libdir_parts})
    string(APPEND ATTN_PC_PREFIX "/..")
  endforeach()
  set(ATTN_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(ATTN_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(ATTN_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(ATTN_PC_LIBS "")
set(_attn_floors_top_first ${ATTN_FLOORS})
list(REVERSE _attn_floors_top_first)
foreach(_floor ${_attn_floors_top_first})
  string(APPEND ATTN_PC_LIBS " -lattn_${_floor}")
endforeach()
get_filename_component(_attn_blas_dir "${AttnOpenBLAS_LIBRARY}" DIRECTORY)
get_filename_component(_attn_blas_name "${AttnOpenBLAS_LIBRARY}" NAME_WE)
string(REGEX REPLACE "^lib" "" _attn_blas_name "${_attn_blas_name}")
set(ATTN_PC_BLAS "-L${_attn_blas_dir} -l${_attn_blas_name}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/attn.pc.in ${PROJECT_BINARY_DIR}/attn.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/attn.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
