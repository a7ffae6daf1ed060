#pragma once
// Names of tensors in checkpoint shards: the stage state names of
// kernels/model/state_names.hpp, which checkpoints store unchanged.
#include "kernels/model/state_names.hpp"

namespace conveyor::checkpoint {

using conveyor::kMasterPrefix;
using conveyor::kOptMPrefix;
using conveyor::kOptVPrefix;
using conveyor::kStatePrefixes;
using conveyor::master_name;
using conveyor::opt_m_name;
using conveyor::opt_v_name;

}  // namespace conveyor::checkpoint
