# Helpers shared by every CMakeLists.txt in the tree.

# tessera_library(NAME SOURCES... DEPS...): a static library of our own code with warnings on.
function(tessera_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  tessera_unity(${name})
endfunction()

# tessera_unity(TARGET): batches of TESSERA_UNITY_BATCH files per compile unit (TESSERA_UNITY).
function(tessera_unity name)
  if(TESSERA_UNITY)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${TESSERA_UNITY_BATCH})
  endif()
endfunction()

# tessera_test(NAME SOURCES... DEPS... [LABELS ...] [TIMEOUT s] [INCLUDES dir...] [NEEDS target...]):
# a GoogleTest binary whose tests are registered with CTest one by one, so `ctest -j2` spreads
# them over both cores; NEEDS: programs its tests run, built first. Nothing without TESSERA_TESTS.
function(tessera_test name)
  if(NOT TESSERA_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS;INCLUDES;NEEDS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
  tessera_unity(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(ARG_INCLUDES)
    target_include_directories(${name} PRIVATE ${ARG_INCLUDES})
  endif()
  if(ARG_NEEDS)
    add_dependencies(${name} ${ARG_NEEDS})
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}"
    ENVIRONMENT "TESSERA_BUILD_DIR=${PROJECT_BINARY_DIR};TESSERA_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
