#pragma once
// Names of a stage's training-state tensors (checkpoint shards, in-memory snapshots). All
// are global, stage-independent names, which is what lets state taken with P stages load
// into P' stages, and a GPU stage's state load into a CPU stage:
//   <param>            the weight, f32 (a bf16 weight widened exactly; with fp32 master
//                      weights, the master)
//   opt.m.<param>      AdamW first moment, f32
//   opt.v.<param>      AdamW second moment, f32
//   master.<param>     reserved for an fp32 master kept beside an f32 <param>
// Parameter names never start with these prefixes (kernels/model/gpt_stage.cpp).
#include <array>
#include <string>
#include <string_view>

namespace conveyor {

inline constexpr std::string_view kOptMPrefix = "opt.m.";
inline constexpr std::string_view kOptVPrefix = "opt.v.";
inline constexpr std::string_view kMasterPrefix = "master.";
/// The per-parameter state kinds, besides the weight itself.
inline constexpr std::array<std::string_view, 3> kStatePrefixes = {kOptMPrefix, kOptVPrefix, kMasterPrefix};

/// Whether `name` is a state tensor (opt.m., opt.v., master.) rather than a weight.
inline bool is_state_name(std::string_view name) {
  for (auto prefix : kStatePrefixes)
    if (name.starts_with(prefix)) return true;
  return false;
}

inline std::string opt_m_name(std::string_view param) { return std::string(kOptMPrefix) + std::string(param); }
inline std::string opt_v_name(std::string_view param) { return std::string(kOptVPrefix) + std::string(param); }
inline std::string master_name(std::string_view param) { return std::string(kMasterPrefix) + std::string(param); }

}  // namespace conveyor
