# conveyor_library(NAME DIR DEPS...): a static library of every .cpp under DIR
# (sources under a cuda/ or nccl/ folder only when the CUDA backend is on).
function(conveyor_library name dir)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${dir}/*.cpp)
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
