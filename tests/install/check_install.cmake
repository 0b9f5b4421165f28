# The installed package works on its own: installs the build into a fresh prefix, builds
# examples/ against it with find_package(qkv) (a separate CMake project that never sees the
# build tree), runs every example, then builds one example again with pkg-config alone.
# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DLIBDIR=lib -DCXX=c++ -DEXAMPLES="a;b" -P check_install.cmake
set(work ${BUILD_DIR}/install-test)
set(prefix ${work}/prefix)
file(REMOVE_RECURSE ${work})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f ${LIBDIR}/cmake/qkv/qkvConfig.cmake ${LIBDIR}/pkgconfig/qkv.pc
          include/qkv/nn/attention.hpp include/qkv/core/tensor.hpp bin/qkv)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()

# CMake: find_package(qkv) from the prefix only.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${work}/build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run(${CMAKE_COMMAND} --build ${work}/build -j2)
foreach(e IN LISTS EXAMPLES)
  run(${work}/build/${e})
  message(STATUS "examples/${e} (find_package):\n${last_output}")
endforeach()

# pkg-config: one compiler line.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run(pkg-config --cflags --libs qkv)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX} -O1 ${SOURCE_DIR}/examples/worked_attention.cpp -o ${work}/worked_attention_pc ${flags})
run(${work}/worked_attention_pc)
message(STATUS "examples/worked_attention (pkg-config):\n${last_output}")

# The Python module (QKV_PYTHON): imported from the prefix's site-packages alone.
# Under the sanitizers, ASan's runtime preloaded as tests/CMakeLists.txt says (PYTHON_PRELOAD).
if(PYTHON_DIR)
  set(python_env PYTHONPATH=${prefix}/${PYTHON_DIR})
  if(PYTHON_PRELOAD)
    list(APPEND python_env "LD_PRELOAD=${PYTHON_PRELOAD}" ASAN_OPTIONS=detect_leaks=0)
  endif()
  run(${CMAKE_COMMAND} -E env ${python_env} ${PYTHON} -c
      "import qkv, sys; assert qkv.__file__.startswith(sys.argv[1]), qkv.__file__; print(qkv.__file__, qkv.Run)"
      ${prefix}/${PYTHON_DIR})
  message(STATUS "python: ${last_output}")
endif()
