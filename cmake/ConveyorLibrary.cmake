# conveyor_library(NAME DIR [EXCLUDE regex] DEPS...): a static library of every .cpp under
# DIR but paths matching EXCLUDE (sources under a cuda/ or nccl/ folder only when the CUDA
# backend is on).
function(conveyor_library name dir)
  cmake_parse_arguments(arg "" "EXCLUDE" "" ${ARGN})
  set(ARGN ${arg_UNPARSED_ARGUMENTS})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${dir}/*.cpp)
  if(arg_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX "${arg_EXCLUDE}")
  endif()
  if(CONVEYOR_WITH_CUDA)
    file(GLOB_RECURSE cuda_sources CONFIGURE_DEPENDS ${dir}/*.cu)
    list(APPEND sources ${cuda_sources})
  else()
    list(FILTER sources EXCLUDE REGEX "/(cuda|nccl)/")
  endif()
  if(NOT sources)  # a layer with headers only so far
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${ARGN})
    return()
  endif()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  target_link_libraries(${name} PUBLIC ${ARGN})
  if(CONVEYOR_WITH_CUDA)
    target_compile_definitions(${name} PUBLIC CONVEYOR_WITH_CUDA=1)
  endif()
endfunction()

# conveyor_test(NAME DIR LIBS... [NEEDS_BINARY] [GPU] [EXCLUDE regex]): one doctest
# executable of every .cpp under DIR (minus paths matching EXCLUDE), each TEST_CASE
# registered with ctest on its own. Tests that run the `conveyor` command find it at
# CONVEYOR_BINARY (built first for suites that say NEEDS_BINARY). GPU suites register
# their tests as "gpu: <name>" with the label gpu (`ctest -L gpu` on the GPU machine);
# without a GPU they report "skipped: no GPU".
function(conveyor_test name dir)
  cmake_parse_arguments(arg "NEEDS_BINARY;GPU" "EXCLUDE" "" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${dir}/*.cpp)
  if(arg_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX "${arg_EXCLUDE}")
  endif()
  if(NOT sources)
    return()
  endif()
  # ctest's names are a CMake list: a semicolon in a TEST_CASE name splits it into two
  # tests that match nothing and fail (seen in CI). Refused here, naming the file.
  foreach(source IN LISTS sources)
    file(STRINGS ${source} split_names REGEX "TEST_CASE\\(\"[^\"]*;")
    if(split_names)
      message(FATAL_ERROR "${source}: a TEST_CASE name holds a semicolon, which ctest would "
                          "split into two tests: use a comma or a colon")
    endif()
  endforeach()
  add_executable(${name} ${PROJECT_SOURCE_DIR}/tests/doctest_main.cpp ${sources})
  target_link_libraries(${name} PRIVATE ${arg_UNPARSED_ARGUMENTS} doctest::doctest)
  # Test code at -O1 (after the build type's -O3, so it wins): the work the tests measure
  # runs in the libraries, built as configured; this cuts the tests' compile time by about
  # 30% (measured per file), minutes of CI on 2 cores.
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1>)
  target_compile_definitions(${name} PRIVATE
    CONVEYOR_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    CONVEYOR_BINARY="$<TARGET_FILE:conveyor>")
  if(arg_NEEDS_BINARY)
    add_dependencies(${name} conveyor)
  endif()
  if(arg_GPU)
    doctest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      TEST_PREFIX "gpu: " PROPERTIES TIMEOUT 600 LABELS gpu)
  else()
    doctest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      PROPERTIES TIMEOUT 600)
  endif()
endfunction()

# conveyor_layer(DIR ALLOW regex): the layering the build enforces. Every source and header
# under DIR may include project headers ("kernels/...", "transport/...", "actors/...")
# only where they match ALLOW, and no CAF header unless ALLOW lets "caf/" through; a
# stray include stops the configure step naming the file and the include. (A library
# that must not use CAF does not link it either, so a CAF symbol would not link.)
function(conveyor_layer dir allow)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${dir}/*.cpp ${dir}/*.hpp)
  foreach(f ${files})
    file(STRINGS ${f} includes REGEX "^#include [<\"](caf|actors|transport|kernels|apps)/")
    foreach(line ${includes})
      string(REGEX REPLACE "^#include [<\"]([^>\"]+)[>\"].*" "\\1" header "${line}")
      if(NOT header MATCHES "${allow}")
        file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${f})
        message(FATAL_ERROR "layering: ${rel} includes ${header}, which its layer may not (allowed: ${allow})")
      endif()
    endforeach()
  endforeach()
endfunction()
