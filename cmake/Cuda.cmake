# The CUDA backend of conveyor_kernels: runtime and cuBLASLt (opened on first use, not
# linked: kernels/cuda/cublaslt_library.hpp says why), C++20 for nvcc.
# Included at the end of kernels/CMakeLists.txt; does nothing without CUDA.
if(CONVEYOR_WITH_CUDA)
  find_package(CUDAToolkit REQUIRED)
  target_link_libraries(conveyor_kernels PUBLIC CUDA::cudart ${CMAKE_DL_LIBS})
  target_include_directories(conveyor_kernels PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
  get_target_property(cublaslt_path CUDA::cublasLt IMPORTED_LOCATION)
  target_compile_definitions(conveyor_kernels PRIVATE
    CONVEYOR_CUBLASLT_SONAME="libcublasLt.so.${CUDAToolkit_VERSION_MAJOR}"
    CONVEYOR_CUBLASLT_PATH="${cublaslt_path}")
  # NCCL, for transport/nccl: shipped in the toolkit's lib/ here, a system library on the
  # GPU machine (same soname, libnccl.so.2).
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR}
    REQUIRED)
  add_library(NCCL::nccl SHARED IMPORTED GLOBAL)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
  # cuDNN 9, for the fused attention (kernels/cuda/cudnn): in the toolkit's lib/ here, a
  # system library on the GPU machine (soname libcudnn.so.9; only its small front library is
  # loaded at start, the engines when a plan is first built). Optional: without it
  # CONVEYOR_WITH_CUDNN is 0 and runtime.attention: cudnn falls back to conveyor's kernels.
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR})
  set(cudnn_major 0)
  if(CUDNN_INCLUDE_DIR AND EXISTS ${CUDNN_INCLUDE_DIR}/cudnn_version.h)
    file(STRINGS ${CUDNN_INCLUDE_DIR}/cudnn_version.h cudnn_major_line
      REGEX "^#define CUDNN_MAJOR [0-9]+")
    string(REGEX REPLACE "^#define CUDNN_MAJOR ([0-9]+).*" "\\1" cudnn_major "${cudnn_major_line}")
  endif()
  if(CUDNN_LIBRARY AND cudnn_major GREATER_EQUAL 9)  # the backend API of cuDNN 9
    add_library(CUDNN::cudnn SHARED IMPORTED GLOBAL)
    set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION ${CUDNN_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
    target_link_libraries(conveyor_kernels PUBLIC CUDNN::cudnn)
    target_compile_definitions(conveyor_kernels PUBLIC CONVEYOR_WITH_CUDNN=1)
  else()
    message(STATUS "cuDNN 9 not found (cudnn.h: ${CUDNN_INCLUDE_DIR}, libcudnn: "
      "${CUDNN_LIBRARY}): the GPU attention uses conveyor's own kernels only")
    target_compile_definitions(conveyor_kernels PUBLIC CONVEYOR_WITH_CUDNN=0)
  endif()
  # CUDA sources take the C++ standard (20). CMake 3.25 does not know nvcc's flag for it;
  # teach it (this directory's scope only; newer CMake knows it already).
  if(NOT "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  endif()
  set_target_properties(conveyor_kernels PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
  # -lineinfo keeps source lines for compute-sanitizer and profilers at no runtime cost.
  target_compile_options(conveyor_kernels PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra>)
endif()
