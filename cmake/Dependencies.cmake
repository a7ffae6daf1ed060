# Every third-party dependency as an imported target, from Debian 12's packages.
find_package(Threads REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ICU REQUIRED COMPONENTS uc i18n)  # apps/tokenizer: Unicode regex for BPE pre-tokenizers
find_package(OpenBLAS REQUIRED)
find_package(ucx REQUIRED)
find_package(Boost 1.74 REQUIRED)   # header-only: Asio
find_package(doctest REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)  # GCC's libgomp: parallel loops whose results depend on the index only

# Debian's yaml-cpp 0.7 config exports the plain target name.
if(TARGET yaml-cpp AND NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()

# glibc's vector math library (libc6-dev): tanh and exp in SIMD for the CPU kernels.
find_library(MVEC_LIBRARY mvec REQUIRED)
add_library(glibc::mvec UNKNOWN IMPORTED)
set_target_properties(glibc::mvec PROPERTIES IMPORTED_LOCATION ${MVEC_LIBRARY})

# OpenBLAS' config file sets variables only.
add_library(OpenBLAS::OpenBLAS INTERFACE IMPORTED)
target_include_directories(OpenBLAS::OpenBLAS INTERFACE ${OpenBLAS_INCLUDE_DIRS})
target_link_libraries(OpenBLAS::OpenBLAS INTERFACE ${OpenBLAS_LIBRARIES})

# CAF 0.17 ships no CMake config: make imported targets from its headers and libraries.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
add_library(CAF::core SHARED IMPORTED)
set_target_properties(CAF::core PROPERTIES
  IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR}
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(CAF::io SHARED IMPORTED)
set_target_properties(CAF::io PROPERTIES
  IMPORTED_LOCATION ${CAF_IO_LIBRARY}
  INTERFACE_LINK_LIBRARIES CAF::core)
