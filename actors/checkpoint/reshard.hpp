#pragma once
// Loading a checkpoint into a different partition (P stages -> P' stages). Because shard
// tensors carry global names, resharding is a lookup: new stage k gets, for each of its
// parameters p, the tensor p and each state tensor (opt.m.p, opt.v.p, master.p) of a kind
// the checkpoint holds. What must hold, checked all at once and reported together:
// - every parameter of every new stage, and its state of each kind present, is there
//   ("missing"); shapes agree ("shape mismatch");
// - every tensor of the checkpoint is taken by exactly one new stage ("extra": a
//   checkpoint of another model must not load silently into this one);
// - no parameter is asked for by two new stages.
// The check needs names, shapes and dtypes only (plan_reshard): a process checks the whole
// checkpoint against every stage of the job and then reads the bytes of its own stages.
#include <map>
#include <string>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "kernels/model/param.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/tensor/dtype.hpp"
#include "kernels/tensor/shape.hpp"

namespace conveyor::checkpoint {

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;  // checkpoints hold host f32 (capture_state), on CPU and GPU
};

/// The names and shapes of a stage's parameters (e.g. GptStage::params()).
std::vector<TensorSpec> specs_of(const std::vector<Param>& params);
/// The same from the layout alone (stage_param_layout): nothing allocated.
std::vector<TensorSpec> specs_of(const std::vector<ParamLayout>& layout);

/// What a checkpoint holds, by tensor name.
using TensorCatalog = std::map<std::string, TensorSpec>;

/// Each new stage's tensor names, in its parameter order, each followed by its state
/// tensors in the order opt.m, opt.v, master, checked against `catalog`.
/// Throws CheckpointError(`where`, list of problems) on any violation above.
std::vector<std::vector<std::string>> plan_reshard(const TensorCatalog& catalog,
                                                   const std::vector<std::vector<TensorSpec>>& stages,
                                                   const std::string& where);

/// plan_reshard against `tensors`, then each new stage's tensors in that order. Tensors
/// share bytes with `tensors`.
std::vector<std::vector<NamedTensor>> reshard(const std::map<std::string, Tensor>& tensors,
                                              const std::vector<std::vector<TensorSpec>>& stages,
                                              const std::string& where);

}  // namespace conveyor::checkpoint
