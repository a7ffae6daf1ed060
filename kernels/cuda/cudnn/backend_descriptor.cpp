#if CONVEYOR_WITH_CUDNN
#include "kernels/cuda/cudnn/backend_descriptor.hpp"

#include "kernels/cuda/cudnn/cudnn_check.hpp"

namespace conveyor::cudnn {
namespace {

[[noreturn]] void fail(cudnnStatus_t status, const std::string& call) {
  detail::throw_cudnn_error(status, call.c_str(), __FILE__, __LINE__);
}

}  // namespace

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type, std::string label)
    : label_(std::move(label)) {
  const cudnnStatus_t status = cudnnBackendCreateDescriptor(type, &desc_);
  if (status != CUDNN_STATUS_SUCCESS) {
    desc_ = nullptr;
    fail(status, "cudnnBackendCreateDescriptor(" + label_ + ")");
  }
}

void BackendDescriptor::reset() noexcept {
  // A failed destroy leaks one descriptor; a destructor has no one to tell.
  if (desc_) (void)cudnnBackendDestroyDescriptor(desc_);
  desc_ = nullptr;
}

void BackendDescriptor::set_raw(cudnnBackendAttributeName_t attribute, const char* name,
                                cudnnBackendAttributeType_t type, std::int64_t count,
                                const void* values) {
  const cudnnStatus_t status = cudnnBackendSetAttribute(desc_, attribute, type, count, values);
  if (status != CUDNN_STATUS_SUCCESS)
    fail(status, "cudnnBackendSetAttribute(" + label_ + ", " + name + ")");
}

bool BackendDescriptor::try_set_raw(cudnnBackendAttributeName_t attribute,
                                    cudnnBackendAttributeType_t type, std::int64_t count,
                                    const void* values) {
  return cudnnBackendSetAttribute(desc_, attribute, type, count, values) == CUDNN_STATUS_SUCCESS;
}

std::int64_t BackendDescriptor::get_raw(cudnnBackendAttributeName_t attribute, const char* name,
                                        cudnnBackendAttributeType_t type, std::int64_t capacity,
                                        void* out) const {
  std::int64_t count = 0;
  const cudnnStatus_t status =
      cudnnBackendGetAttribute(desc_, attribute, type, capacity, &count, out);
  if (status != CUDNN_STATUS_SUCCESS)
    fail(status, "cudnnBackendGetAttribute(" + label_ + ", " + name + ")");
  return count;
}

void BackendDescriptor::finalize() {
  const cudnnStatus_t status = cudnnBackendFinalize(desc_);
  if (status != CUDNN_STATUS_SUCCESS) fail(status, "cudnnBackendFinalize(" + label_ + ")");
}

}  // namespace conveyor::cudnn
#endif  // CONVEYOR_WITH_CUDNN
