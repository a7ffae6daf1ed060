#pragma once
// Builds a cuDNN backend operation graph from tensors and operations (matmul, pointwise,
// reduction, reshape), the way cudnn-frontend's graph API does, and owns every descriptor it
// made: an execution plan of the graph reads them, so the builder lives as long as the plan.
//
// Tensors are 4-d, logical dims with explicit strides (a transpose is a view: swapped
// strides). Three kinds:
//   io       bound to a device pointer per call, by its unique id, through variant_pack()
//   virtual  an intermediate cuDNN never materialises (uids from 1000)
//   scalar   an fp32 constant passed by value (uids from 100); the builder keeps the value
//            at a fixed host address, which the variant pack hands to cuDNN at each call
// Every io tensor declares 16-byte alignment: its device pointer must have it.
//
// Thread-safety: building is single-threaded; once finalized, variant_pack() (const) may be
// called from several threads at once.
#include <cudnn.h>

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cudnn/backend_descriptor.hpp"

namespace conveyor::cudnn {

using Dims = std::vector<std::int64_t>;

/// Row-major strides of `dims` (the last dim contiguous).
Dims packed_strides(const Dims& dims);

struct GraphTensor {
  cudnnBackendDescriptor_t desc = nullptr;  // owned by the builder
  std::int64_t uid = 0;
  Dims dims, strides;
  std::string name;
};

/// A device pointer for the io tensor `uid`.
struct TensorBinding {
  std::int64_t uid;
  void* data;
};

class OpGraphBuilder {
 public:
  explicit OpGraphBuilder(std::string name) : name_(std::move(name)) {}
  OpGraphBuilder(const OpGraphBuilder&) = delete;
  OpGraphBuilder& operator=(const OpGraphBuilder&) = delete;

  /// REQUIRES: `uid` < 100 and not used before.
  GraphTensor io(std::int64_t uid, Dims dims, Dims strides, cudnnDataType_t type,
                 std::string name);
  /// Empty `strides`: packed.
  GraphTensor virtual_tensor(Dims dims, Dims strides, cudnnDataType_t type, std::string name);
  GraphTensor scalar(float value, std::string name);

  /// y = mode(x[, b][, t]) elementwise with broadcasting, computed in `compute`. `b` is
  /// the second operand, `t` the condition of BINARY_SELECT (y = t ? x : b); `axis` is
  /// GEN_INDEX's dimension (-1: none).
  void pointwise_into(cudnnPointwiseMode_t mode, const GraphTensor& y, const GraphTensor& x,
                      const GraphTensor* b = nullptr, const GraphTensor* t = nullptr,
                      cudnnDataType_t compute = CUDNN_DATA_FLOAT, std::int64_t axis = -1);
  /// As pointwise_into, into a new virtual tensor of the inputs' broadcast shape.
  GraphTensor pointwise(cudnnPointwiseMode_t mode, const GraphTensor& x, const GraphTensor* b,
                        const GraphTensor* t, cudnnDataType_t out_type, std::string name,
                        cudnnDataType_t compute = CUDNN_DATA_FLOAT, std::int64_t axis = -1);
  GraphTensor unary(cudnnPointwiseMode_t mode, const GraphTensor& x, std::string name,
                    cudnnDataType_t out_type = CUDNN_DATA_FLOAT) {
    return pointwise(mode, x, nullptr, nullptr, out_type, std::move(name));
  }
  GraphTensor binary(cudnnPointwiseMode_t mode, const GraphTensor& x, const GraphTensor& b,
                     std::string name, cudnnDataType_t out_type = CUDNN_DATA_FLOAT) {
    return pointwise(mode, x, &b, nullptr, out_type, std::move(name));
  }

  /// c = a @ b over the last two dims, batched over the first two; fp32 accumulation.
  void matmul_into(const GraphTensor& a, const GraphTensor& b, const GraphTensor& c);
  GraphTensor matmul(const GraphTensor& a, const GraphTensor& b, std::string name,
                     cudnnDataType_t out_type = CUDNN_DATA_FLOAT);

  /// y = reduce(x) over the dims where y is smaller: to extent 1 (a row max), or from H to
  /// Hkv along the heads (grouped-query attention's dK and dV, as cudnn-frontend emits it,
  /// which the fused attention engines recognise); fp32.
  void reduction_into(cudnnReduceTensorOp_t op, const GraphTensor& x, const GraphTensor& y);
  /// Reduces the last dim (a row max or row sum) into a new virtual fp32 tensor.
  GraphTensor row_reduction(cudnnReduceTensorOp_t op, const GraphTensor& x, std::string name);

  /// y views x's elements with y's dims, strides and type (a transpose, a down-convert).
  void reshape_into(const GraphTensor& x, const GraphTensor& y);

  /// The finalized operation graph of every op added. Throws CudaError.
  BackendDescriptor finalize(cudnnHandle_t handle);

  /// A finalized variant pack: `bindings` for every io tensor (CudaError when one is
  /// missing or null), the by-value scalars, and `workspace` (null when none is needed).
  BackendDescriptor variant_pack(std::span<const TensorBinding> bindings, void* workspace) const;

 private:
  GraphTensor make_tensor(std::int64_t uid, Dims dims, Dims strides, cudnnDataType_t type,
                          bool is_virtual, bool by_value, std::string name);
  BackendDescriptor& keep(cudnnBackendDescriptorType_t type, std::string label);
  void add_op(BackendDescriptor& op);

  std::string name_;
  std::deque<BackendDescriptor> keep_;  // every descriptor made, alive as long as the builder
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::deque<float> scalar_values_;  // fixed addresses: cuDNN reads them at each execute
  std::vector<std::pair<std::int64_t, float*>> scalars_;
  std::vector<std::int64_t> io_uids_;
  std::int64_t next_virtual_uid_ = 1000;
  std::int64_t next_scalar_uid_ = 100;
};

}  // namespace conveyor::cudnn
