#pragma once
// Names of tensors in checkpoint shards. All are global, stage-independent names, which
// is what lets a checkpoint written with P stages load into P' stages:
//   <param>            the weight as the stage computes with it (f32 on the CPU)
//   opt.m.<param>      AdamW first moment
//   opt.v.<param>      AdamW second moment
//   master.<param>     fp32 master weight, when the stage computes in bf16
// Parameter names never start with these prefixes (kernels/model/gpt_stage.cpp).
#include <array>
#include <string>
#include <string_view>

namespace conveyor::checkpoint {

inline constexpr std::string_view kOptMPrefix = "opt.m.";
inline constexpr std::string_view kOptVPrefix = "opt.v.";
inline constexpr std::string_view kMasterPrefix = "master.";
/// The per-parameter state kinds, besides the weight itself.
inline constexpr std::array<std::string_view, 3> kStatePrefixes = {kOptMPrefix, kOptVPrefix, kMasterPrefix};

inline std::string opt_m_name(std::string_view param) { return std::string(kOptMPrefix) + std::string(param); }
inline std::string opt_v_name(std::string_view param) { return std::string(kOptVPrefix) + std::string(param); }
inline std::string master_name(std::string_view param) { return std::string(kMasterPrefix) + std::string(param); }

}  // namespace conveyor::checkpoint
