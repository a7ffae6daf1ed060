#pragma once
// One cuDNN backend descriptor (cudnnBackendCreateDescriptor ... Destroy), owned, with
// checked attribute access. A descriptor carries a label ("tensor 'Q'", "matmul S=QK^T") that
// every error names, since cuDNN's own status says little about which of a graph's dozens of
// descriptors it refused.
//
// set() takes the attribute's C++ type and derives cuDNN's attribute type from it
// (AttributeType below); CUDNN_SET(d, CUDNN_ATTR_X, value) also passes the attribute's name
// for the error. Device pointers (the variant pack) go through set_raw: cuDNN's descriptor
// handle is itself a void*, so a void* value means a descriptor here.
// Thread-safety: one descriptor is not safe to change from two threads; distinct ones are.
#include <cudnn.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::cudnn {

/// cuDNN's attribute type for a C++ value type.
template <class T>
struct AttributeType;
#define CONVEYOR_CUDNN_ATTRIBUTE_TYPE(T, TYPE)                       \
  template <>                                                      \
  struct AttributeType<T> {                                        \
    static constexpr cudnnBackendAttributeType_t value = TYPE;     \
  };
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(std::int64_t, CUDNN_TYPE_INT64)
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(bool, CUDNN_TYPE_BOOLEAN)
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(float, CUDNN_TYPE_FLOAT)
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(cudnnDataType_t, CUDNN_TYPE_DATA_TYPE)
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(cudnnBackendDescriptor_t, CUDNN_TYPE_BACKEND_DESCRIPTOR)
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(cudnnPointwiseMode_t, CUDNN_TYPE_POINTWISE_MODE)
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(cudnnReduceTensorOp_t, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE)
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(cudnnBackendHeurMode_t, CUDNN_TYPE_HEUR_MODE)
CONVEYOR_CUDNN_ATTRIBUTE_TYPE(cudnnHandle_t, CUDNN_TYPE_HANDLE)
#undef CONVEYOR_CUDNN_ATTRIBUTE_TYPE

class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  /// Throws CudaError when cuDNN cannot create it (for example, a sub-library is missing).
  BackendDescriptor(cudnnBackendDescriptorType_t type, std::string label);
  ~BackendDescriptor() { reset(); }
  BackendDescriptor(BackendDescriptor&& o) noexcept
      : desc_(std::exchange(o.desc_, nullptr)), label_(std::move(o.label_)) {}
  BackendDescriptor& operator=(BackendDescriptor&& o) noexcept {
    if (this != &o) {
      reset();
      desc_ = std::exchange(o.desc_, nullptr);
      label_ = std::move(o.label_);
    }
    return *this;
  }
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  const std::string& label() const { return label_; }

  /// cudnnBackendSetAttribute; throws CudaError naming this descriptor and `name`.
  void set_raw(cudnnBackendAttributeName_t attribute, const char* name,
               cudnnBackendAttributeType_t type, std::int64_t count, const void* values);
  /// As set_raw, but returns false instead of throwing when cuDNN refuses the value: for
  /// attributes that one cuDNN 9 release wants and a later one deprecates.
  bool try_set_raw(cudnnBackendAttributeName_t attribute, cudnnBackendAttributeType_t type,
                   std::int64_t count, const void* values);

  template <class T>
  void set(cudnnBackendAttributeName_t attribute, const char* name, std::span<const T> values) {
    set_raw(attribute, name, AttributeType<T>::value, static_cast<std::int64_t>(values.size()),
            values.data());
  }
  template <class T>
  void set(cudnnBackendAttributeName_t attribute, const char* name, const std::vector<T>& values) {
    set(attribute, name, std::span<const T>(values));
  }
  template <class T>
  void set(cudnnBackendAttributeName_t attribute, const char* name, const T& value) {
    set(attribute, name, std::span<const T>(&value, 1));
  }
  template <class T>
  bool try_set(cudnnBackendAttributeName_t attribute, const T& value) {
    return try_set_raw(attribute, AttributeType<T>::value, 1, &value);
  }

  /// cudnnBackendGetAttribute into `out`; returns the number of elements cuDNN has (which
  /// may exceed out.size()). Throws CudaError naming this descriptor and `name`.
  template <class T>
  std::int64_t get(cudnnBackendAttributeName_t attribute, const char* name,
                   std::span<T> out) const {
    return get_raw(attribute, name, AttributeType<T>::value, static_cast<std::int64_t>(out.size()),
                   out.data());
  }
  std::int64_t get_raw(cudnnBackendAttributeName_t attribute, const char* name,
                       cudnnBackendAttributeType_t type, std::int64_t capacity, void* out) const;

  /// cudnnBackendFinalize; throws CudaError naming this descriptor.
  void finalize();

 private:
  void reset() noexcept;

  cudnnBackendDescriptor_t desc_ = nullptr;
  std::string label_;
};

}  // namespace conveyor::cudnn

/// desc.set(attribute, value) with the attribute's name for the error message.
#define CUDNN_SET(desc, attribute, ...) (desc).set(attribute, #attribute, __VA_ARGS__)
/// desc.get(attribute, span) with the attribute's name for the error message.
#define CUDNN_GET(desc, attribute, ...) (desc).get(attribute, #attribute, __VA_ARGS__)
