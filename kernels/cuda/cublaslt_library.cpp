#include "kernels/cuda/cublaslt_library.hpp"

#include <dlfcn.h>

#include <string>

#include "kernels/cuda/check.hpp"

namespace conveyor {
namespace {

// The soname of the toolkit conveyor was built with, then the file CMake found at build
// time (for a machine whose loader path does not name the toolkit's lib/ folder).
constexpr const char* kPlaces[] = {CONVEYOR_CUBLASLT_SONAME, CONVEYOR_CUBLASLT_PATH};

CublasLtLibrary open_library() {
  void* handle = nullptr;
  std::string reasons;
  for (const char* place : kPlaces) {
    // RTLD_NODELETE: never unloaded; the handles it hands out outlive every caller.
    handle = dlopen(place, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle) break;
    const char* why = dlerror();
    reasons += std::string(reasons.empty() ? "" : "; ") + (why ? why : place);
  }
  if (!handle)
    throw CudaError("cuBLASLt could not be loaded (needed for GEMMs on the GPU): " + reasons);
  CublasLtLibrary lib;
#define CONVEYOR_CUBLASLT_RESOLVE(name)                                                        \
  lib.name = reinterpret_cast<decltype(lib.name)>(dlsym(handle, #name));                      \
  if (!lib.name)                                                                               \
    throw CudaError(std::string("cuBLASLt loaded but has no ") + #name + " (built against " + \
                    CONVEYOR_CUBLASLT_SONAME + ")");
  CONVEYOR_CUBLASLT_FUNCTIONS(CONVEYOR_CUBLASLT_RESOLVE)
#undef CONVEYOR_CUBLASLT_RESOLVE
  return lib;
}

}  // namespace

const CublasLtLibrary& cublaslt() {
  static const CublasLtLibrary lib = open_library();
  return lib;
}

}  // namespace conveyor
