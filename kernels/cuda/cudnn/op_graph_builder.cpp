#if CONVEYOR_WITH_CUDNN
#include "kernels/cuda/cudnn/op_graph_builder.hpp"

#include <algorithm>

#include "kernels/cuda/check.hpp"

namespace conveyor::cudnn {

Dims packed_strides(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

BackendDescriptor& OpGraphBuilder::keep(cudnnBackendDescriptorType_t type, std::string label) {
  return keep_.emplace_back(type, std::move(label));
}

void OpGraphBuilder::add_op(BackendDescriptor& op) {
  op.finalize();
  ops_.push_back(op.get());
}

GraphTensor OpGraphBuilder::make_tensor(std::int64_t uid, Dims dims, Dims strides,
                                        cudnnDataType_t type, bool is_virtual, bool by_value,
                                        std::string name) {
  BackendDescriptor& t = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor '" + name + "'");
  const std::int64_t alignment = 16;
  CUDNN_SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, type);
  CUDNN_SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, dims);
  CUDNN_SET(t, CUDNN_ATTR_TENSOR_STRIDES, strides);
  CUDNN_SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, uid);
  CUDNN_SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, alignment);
  CUDNN_SET(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, is_virtual);
  if (by_value) CUDNN_SET(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
  t.finalize();
  return {t.get(), uid, std::move(dims), std::move(strides), std::move(name)};
}

GraphTensor OpGraphBuilder::io(std::int64_t uid, Dims dims, Dims strides, cudnnDataType_t type,
                               std::string name) {
  io_uids_.push_back(uid);
  return make_tensor(uid, std::move(dims), std::move(strides), type, false, false,
                     std::move(name));
}

GraphTensor OpGraphBuilder::virtual_tensor(Dims dims, Dims strides, cudnnDataType_t type,
                                           std::string name) {
  if (strides.empty()) strides = packed_strides(dims);
  return make_tensor(next_virtual_uid_++, std::move(dims), std::move(strides), type, true, false,
                     std::move(name));
}

GraphTensor OpGraphBuilder::scalar(float value, std::string name) {
  const std::int64_t uid = next_scalar_uid_++;
  scalars_.emplace_back(uid, &scalar_values_.emplace_back(value));
  return make_tensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true,
                     std::move(name));
}

void OpGraphBuilder::pointwise_into(cudnnPointwiseMode_t mode, const GraphTensor& y,
                                    const GraphTensor& x, const GraphTensor* b,
                                    const GraphTensor* t, cudnnDataType_t compute,
                                    std::int64_t axis) {
  const std::string label = "pointwise " + std::to_string(static_cast<int>(mode)) + " -> " + y.name;
  BackendDescriptor& pw = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, label + " (mode)");
  CUDNN_SET(pw, CUDNN_ATTR_POINTWISE_MODE, mode);
  CUDNN_SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, compute);
  if (axis >= 0) CUDNN_SET(pw, CUDNN_ATTR_POINTWISE_AXIS, axis);
  pw.finalize();

  BackendDescriptor& op = keep(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, label);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.get());
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x.desc);
  if (b) CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b->desc);
  if (t) CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t->desc);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y.desc);
  // cudnn-frontend sets both scales to 1, their default; the graph that was verified did
  // too. Optional attributes: a release that refuses them still computes y = op(x, b).
  const float one = 1.0f;
  op.try_set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, one);
  if (b) op.try_set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, one);
  add_op(op);
}

GraphTensor OpGraphBuilder::pointwise(cudnnPointwiseMode_t mode, const GraphTensor& x,
                                      const GraphTensor* b, const GraphTensor* t,
                                      cudnnDataType_t out_type, std::string name,
                                      cudnnDataType_t compute, std::int64_t axis) {
  Dims dims = x.dims;
  for (const GraphTensor* in : {b, t})
    if (in)
      for (std::size_t i = 0; i < dims.size() && i < in->dims.size(); ++i)
        dims[i] = std::max(dims[i], in->dims[i]);
  // Same shape as x: keep x's strides (a view of the Q/K/V layout stays one).
  Dims strides = dims == x.dims ? x.strides : Dims{};
  GraphTensor y = virtual_tensor(std::move(dims), std::move(strides), out_type, std::move(name));
  pointwise_into(mode, y, x, b, t, compute, axis);
  return y;
}

void OpGraphBuilder::matmul_into(const GraphTensor& a, const GraphTensor& b, const GraphTensor& c) {
  const std::string label = "matmul " + a.name + " x " + b.name + " -> " + c.name;
  BackendDescriptor& mm = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR, label + " (compute type)");
  CUDNN_SET(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
  mm.finalize();
  BackendDescriptor& op = keep(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, label);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a.desc);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b.desc);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c.desc);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm.get());
  add_op(op);
}

GraphTensor OpGraphBuilder::matmul(const GraphTensor& a, const GraphTensor& b, std::string name,
                                   cudnnDataType_t out_type) {
  GraphTensor c =
      virtual_tensor({a.dims[0], a.dims[1], a.dims[2], b.dims[3]}, {}, out_type, std::move(name));
  matmul_into(a, b, c);
  return c;
}

void OpGraphBuilder::reduction_into(cudnnReduceTensorOp_t op_type, const GraphTensor& x,
                                    const GraphTensor& y) {
  const std::string label = "reduction " + std::to_string(static_cast<int>(op_type)) + " " +
                            x.name + " -> " + y.name;
  BackendDescriptor& rd = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, label + " (operator)");
  CUDNN_SET(rd, CUDNN_ATTR_REDUCTION_OPERATOR, op_type);
  CUDNN_SET(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
  rd.finalize();
  BackendDescriptor& op = keep(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, label);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x.desc);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y.desc);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd.get());
  add_op(op);
}

GraphTensor OpGraphBuilder::row_reduction(cudnnReduceTensorOp_t op, const GraphTensor& x,
                                          std::string name) {
  Dims dims = x.dims;
  dims.back() = 1;
  GraphTensor y = virtual_tensor(std::move(dims), {}, CUDNN_DATA_FLOAT, std::move(name));
  reduction_into(op, x, y);
  return y;
}

void OpGraphBuilder::reshape_into(const GraphTensor& x, const GraphTensor& y) {
  BackendDescriptor& op =
      keep(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape " + x.name + " -> " + y.name);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x.desc);
  CUDNN_SET(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y.desc);
  add_op(op);
}

BackendDescriptor OpGraphBuilder::finalize(cudnnHandle_t handle) {
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                          "operation graph '" + name_ + "'");
  // Deprecated in later cuDNN 9 releases (which take the handle from the heuristics and
  // the plan) but wanted by earlier ones: set where accepted.
  graph.try_set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle);
  CUDNN_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, std::span<const cudnnBackendDescriptor_t>(ops_));
  graph.finalize();
  return graph;
}

BackendDescriptor OpGraphBuilder::variant_pack(std::span<const TensorBinding> bindings,
                                               void* workspace) const {
  std::vector<std::int64_t> uids;
  std::vector<void*> data;
  for (const std::int64_t uid : io_uids_) {
    const auto it = std::find_if(bindings.begin(), bindings.end(),
                                 [&](const TensorBinding& b) { return b.uid == uid; });
    if (it == bindings.end() || !it->data)
      throw CudaError("cuDNN graph '" + name_ + "': no device pointer for tensor uid " +
                      std::to_string(uid));
    uids.push_back(uid);
    data.push_back(it->data);
  }
  for (const auto& [uid, value] : scalars_) {  // by value: host addresses
    uids.push_back(uid);
    data.push_back(value);
  }
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack '" + name_ + "'");
  CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids);
  pack.set_raw(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, "CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS",
               CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(data.size()), data.data());
  pack.set_raw(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, "CUDNN_ATTR_VARIANT_PACK_WORKSPACE",
               CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  return pack;
}

}  // namespace conveyor::cudnn
#endif  // CONVEYOR_WITH_CUDNN
