# The installable package: `cmake --install build --prefix P` puts the libraries, their headers,
# the qkv binary, a CMake package (find_package(qkv) -> qkv::qkv and one target per library)
# and a pkg-config file (qkv.pc) under P. A program of one's own then links qkv::qkv; the
# targets carry their OpenBLAS, OpenMP, zlib, SentencePiece and MPI dependencies.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(QKV_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)

# Called in a library's own CMakeLists.txt: installs the library and the headers of its folder
# (as include/qkv/FOLDER/*.hpp) and exports it as qkv::FOLDER. Libraries must be declared in
# dependency order (core first): the pkg-config file links them in reverse.
function(qkv_install_library target)
  get_filename_component(folder ${CMAKE_CURRENT_SOURCE_DIR} NAME)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${folder})
  install(TARGETS ${target} EXPORT qkvTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qkv/${folder}
    FILES_MATCHING PATTERN "*.hpp")
  set_property(GLOBAL APPEND PROPERTY QKV_INSTALLED_LIBRARIES ${target})
endfunction()

# Called once, after every library: the umbrella target, the export, the package files.
function(qkv_install_package)
  get_property(libs GLOBAL PROPERTY QKV_INSTALLED_LIBRARIES)
  add_library(qkv_package INTERFACE)
  set_target_properties(qkv_package PROPERTIES EXPORT_NAME qkv)
  target_link_libraries(qkv_package INTERFACE ${libs})
  install(TARGETS qkv_package EXPORT qkvTargets)
  install(TARGETS qkv RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(EXPORT qkvTargets NAMESPACE qkv:: DESTINATION ${QKV_CMAKE_DIR})

  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qkvConfig.cmake.in
    ${PROJECT_BINARY_DIR}/qkvConfig.cmake INSTALL_DESTINATION ${QKV_CMAKE_DIR})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/qkvConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/qkvConfig.cmake ${PROJECT_BINARY_DIR}/qkvConfigVersion.cmake
    DESTINATION ${QKV_CMAKE_DIR})

  # pkg-config: static libraries, so every dependency is on the Libs line, dependents first.
  set(lflags "")
  foreach(l IN LISTS libs)
    set(lflags "-l${l} ${lflags}")
  endforeach()
  set(QKV_PC_LIBS "${lflags}")
  set(QKV_PC_OPENBLAS_INCLUDE "${OPENBLAS_INCLUDE_DIR}")
  set(QKV_PC_OPENBLAS "${OPENBLAS_LIBRARY}")
  set(QKV_PC_XXHASH "${XXHASH_LIBRARY}")
  set(QKV_PC_DNNL "${DNNL_LIBRARY}")
  set(QKV_PC_REQUIRES "sentencepiece zlib nlohmann_json spdlog tomlplusplus")
  set(QKV_PC_EXTRA "")
  if(QKV_MPI)
    string(APPEND QKV_PC_REQUIRES " ompi-c")
  endif()
  if(QKV_SANITIZE)
    set(QKV_PC_EXTRA "-fsanitize=address,undefined")
  endif()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/qkv.pc.in ${PROJECT_BINARY_DIR}/qkv.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/qkv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
