# The test registry check, run by ctest (tests/CMakeLists.txt) as
#   cmake -DCTEST=<ctest> -DBUILD_DIR=<build> -DBINARIES=<file> -P check_test_registry.cmake
#
# catch_discover_tests registers one ctest test per line of `<binary> --list-test-names-only`,
# after CMake has split that output as a list: a `;` in a test case's name cuts it in two, an
# unbalanced `[` or `]` glues it to its neighbours, and each piece then selects no test case.
# This script fails, naming the test cases, unless for every qkv_test() binary (listed one per
# line in BINARIES):
#   1. the test cases the binary lists are exactly the tests ctest registered for it, and
#   2. each registered test's filter (the argument ctest passes) selects exactly its own test
#      case, no other one (asked of the binary itself with --list-test-names-only).
cmake_minimum_required(VERSION 3.25)
foreach(var CTEST BUILD_DIR BINARIES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_test_registry.cmake: -D${var}=... is missing")
  endif()
endforeach()

# CMake list operations treat `;`, `[`, `]` and `\` specially: names travel encoded.
function(encode out text)
  string(REPLACE "\\" "<bs>" text "${text}")
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<lb>" text "${text}")
  string(REPLACE "]" "<rb>" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
function(decode out text)
  string(REPLACE "<semicolon>" ";" text "${text}")
  string(REPLACE "<lb>" "[" text "${text}")
  string(REPLACE "<rb>" "]" text "${text}")
  string(REPLACE "<bs>" "\\" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# `binary [filter] --list-test-names-only -v high` -> encoded names in out_names and
# "name (file:line)" in out_where (same order). An empty filter lists every test case.
function(list_cases out_names out_where binary filter)
  if(filter STREQUAL "")
    execute_process(COMMAND "${binary}" --list-test-names-only -v high
                    OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
  else()
    execute_process(COMMAND "${binary}" "${filter}" --list-test-names-only -v high
                    OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
  endif()
  if(rc LESS 0 OR NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "${binary} --list-test-names-only failed (${rc}): ${err}")
  endif()
  encode(text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(names "")
  set(where "")
  foreach(line IN LISTS lines)
    if(line STREQUAL "")
      continue()
    endif()
    # "name\t@file:line" (names starting with '#' come quoted)
    string(REGEX REPLACE "\t@.*$" "" name "${line}")
    string(REGEX REPLACE "^.*\t@" "" loc "${line}")
    if(name MATCHES "^\"#.*\"$")
      string(REGEX REPLACE "^\"(.*)\"$" "\\1" name "${name}")
    endif()
    list(APPEND names "${name}")
    list(APPEND where "'${name}' (${loc})")
  endforeach()
  set(${out_names} "${names}" PARENT_SCOPE)
  set(${out_where} "${where}" PARENT_SCOPE)
endfunction()

# ctest asked from the build folder would rewrite its Testing/Temporary/LastTest.log, the log of
# the very run this check is part of: ask from a folder of its own that includes the build's.
set(ask_dir "${BUILD_DIR}/tests/test_registry_query")
file(MAKE_DIRECTORY "${ask_dir}")
file(WRITE "${ask_dir}/CTestTestfile.cmake" "subdirs(\"${BUILD_DIR}\")\n")
execute_process(COMMAND "${CTEST}" --show-only=json-v1 WORKING_DIRECTORY "${ask_dir}"
                OUTPUT_VARIABLE json RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctest --show-only=json-v1 failed (${rc}): ${err}")
endif()

# binary -> its registered tests: "name" and "filter", encoded, side by side.
string(JSON count LENGTH "${json}" tests)
math(EXPR last "${count} - 1")
set(seen_binaries "")
foreach(i RANGE ${last})
  string(JSON test GET "${json}" tests ${i})
  string(JSON name GET "${test}" name)
  string(JSON argc ERROR_VARIABLE no_command LENGTH "${test}" command)
  if(no_command OR argc LESS 2)
    continue()
  endif()
  string(JSON binary GET "${test}" command 0)
  string(JSON filter GET "${test}" command 1)
  string(MAKE_C_IDENTIFIER "${binary}" key)
  encode(name "${name}")
  encode(filter "${filter}")
  list(APPEND "names_${key}" "${name}")
  list(APPEND "filters_${key}" "${filter}")
endforeach()

file(STRINGS "${BINARIES}" binaries)
set(problems "")
set(total 0)
foreach(binary IN LISTS binaries)
  string(MAKE_C_IDENTIFIER "${binary}" key)
  get_filename_component(short "${binary}" NAME)
  list_cases(listed where "${binary}" "")
  list(LENGTH listed n_listed)
  math(EXPR total "${total} + ${n_listed}")
  set(registered "${names_${key}}")
  # 1. listed == registered
  foreach(name loc IN ZIP_LISTS listed where)
    list(FIND registered "${name}" at)
    if(at EQUAL -1)
      list(APPEND problems "${short}: test case ${loc} is not a ctest test")
    endif()
  endforeach()
  foreach(name IN LISTS registered)
    list(FIND listed "${name}" at)
    if(at EQUAL -1)
      list(APPEND problems "${short}: ctest test '${name}' is no test case of the binary")
    endif()
  endforeach()
  list(LENGTH registered n_registered)
  list(REMOVE_DUPLICATES registered)
  list(LENGTH registered n_unique)
  if(NOT n_unique EQUAL n_registered)
    list(APPEND problems "${short}: some test cases are registered twice")
  endif()
  # 2. each filter selects its own test case and no other
  foreach(name filter IN ZIP_LISTS "names_${key}" "filters_${key}")
    list(FIND listed "${name}" at)
    if(at EQUAL -1)
      continue()  # a piece of a split name: reported above
    endif()
    decode(raw "${filter}")
    list_cases(selected selected_where "${binary}" "${raw}")
    if(NOT "${selected}" STREQUAL "${name}")
      list(JOIN selected_where ", " what)
      if(what STREQUAL "")
        set(what "nothing")
      endif()
      list(APPEND problems "${short}: ctest test '${name}' runs ${what}")
    endif()
  endforeach()
endforeach()

if(problems)
  list(LENGTH problems n)
  set(text "")
  foreach(p IN LISTS problems)
    decode(p "${p}")
    string(APPEND text "  ${p}\n")
  endforeach()
  message(FATAL_ERROR
    "${n} problem(s) between the test binaries and ctest's registry:\n${text}"
    "A TEST_CASE name must survive ctest discovery: no ';' and no '\\', balanced '[' and ']', "
    "no leading '#' or '~', no '*' at either end, unique ignoring case (docs/testing.md).")
endif()
list(LENGTH binaries n_binaries)
message(STATUS "test registry: the ${total} test cases of ${n_binaries} binaries are each exactly "
               "one ctest test, whose filter selects that test case and nothing else")
