#pragma once
// The run config's settings that take one of a few names, as enums parsed once when the
// config loads (config_value.hpp reads and writes them through these tables). Each table
// lists the names in the order the key reference shows them: README's key table and the
// "is not one of ..." messages follow it, so reordering a table changes both.
#include "actors/plan/partition_mode.hpp"
#include "actors/plan/recovery_policy.hpp"
#include "kernels/common/named_enum.hpp"
#include "kernels/tensor/device.hpp"

namespace conveyor {

/// pipeline.schedule. The schedule library knows its schedules by name
/// (sched::schedule_names(), in this order; a test holds the two lists equal).
enum class PipelineSchedule { gpipe, one_f_one_b, interleaved_1f1b, zb_h1, zbv };

/// model.dtype: automatic is fp32 on CPU stages, bf16 on CUDA stages.
enum class ModelDtype { automatic, fp32, bf16 };

/// runtime.stage_threads: a thread per stage actor, or CAF's scheduler's workers.
enum class StageThreads { detached, scheduled };

/// runtime.attention, for CUDA stages (device_models.cpp maps it to the CUDA build's
/// AttentionBackend; a CPU build reads it and ignores it).
enum class AttentionChoice { cudnn, kernels };

/// optim.master: fp32 master weights and AdamW state, or everything bf16.
enum class MasterDtype { fp32, bf16 };

/// optim.grad_dtype: the type weight gradients accumulate in.
enum class GradDtype { f32, bf16 };

/// precision.matmul: the blocks' linear layers in bf16, or in FP8 (CUDA stages).
enum class MatmulPrecision { bf16, fp8 };

/// precision.fp8_grad: the format of the output gradients an FP8 backward GEMM reads.
enum class Fp8GradFormat { e5m2, e4m3 };

/// precision.fp8_scaling: a tensor's scale from its own amax, or from a history of them.
enum class Fp8Scaling { dynamic, delayed };

/// transport.kind: automatic hands tensors over inside a process and sends them over UCX
/// between processes; ucx sends every edge over UCX.
enum class TransportKind { automatic, ucx };

/// checkpoint.writers: node 0 writes every shard, or each process its own stages'.
enum class CheckpointWriters { node0, every_node };

template <>
struct EnumNames<PipelineSchedule> {
  static constexpr NamedValue<PipelineSchedule> entries[] = {
      {PipelineSchedule::gpipe, "gpipe"},
      {PipelineSchedule::one_f_one_b, "1f1b"},
      {PipelineSchedule::interleaved_1f1b, "interleaved-1f1b"},
      {PipelineSchedule::zb_h1, "zb-h1"},
      {PipelineSchedule::zbv, "zbv"}};
};

template <>
struct EnumNames<PartitionMode> {
  static constexpr NamedValue<PartitionMode> entries[] = {{PartitionMode::uniform, "uniform"},
                                                          {PartitionMode::automatic, "auto"},
                                                          {PartitionMode::explicit_list, "explicit"}};
};

template <>
struct EnumNames<DeviceKind> {
  static constexpr NamedValue<DeviceKind> entries[] = {{DeviceKind::cpu, "cpu"}, {DeviceKind::cuda, "cuda"}};
};

template <>
struct EnumNames<ModelDtype> {
  static constexpr NamedValue<ModelDtype> entries[] = {
      {ModelDtype::automatic, "auto"}, {ModelDtype::fp32, "fp32"}, {ModelDtype::bf16, "bf16"}};
};

template <>
struct EnumNames<StageThreads> {
  static constexpr NamedValue<StageThreads> entries[] = {{StageThreads::detached, "detached"},
                                                         {StageThreads::scheduled, "scheduled"}};
};

template <>
struct EnumNames<AttentionChoice> {
  static constexpr NamedValue<AttentionChoice> entries[] = {{AttentionChoice::cudnn, "cudnn"},
                                                            {AttentionChoice::kernels, "kernels"}};
};

template <>
struct EnumNames<MasterDtype> {
  static constexpr NamedValue<MasterDtype> entries[] = {{MasterDtype::fp32, "fp32"}, {MasterDtype::bf16, "bf16"}};
};

template <>
struct EnumNames<GradDtype> {
  static constexpr NamedValue<GradDtype> entries[] = {{GradDtype::f32, "f32"}, {GradDtype::bf16, "bf16"}};
};

template <>
struct EnumNames<MatmulPrecision> {
  static constexpr NamedValue<MatmulPrecision> entries[] = {{MatmulPrecision::bf16, "bf16"},
                                                            {MatmulPrecision::fp8, "fp8"}};
};

template <>
struct EnumNames<Fp8GradFormat> {
  static constexpr NamedValue<Fp8GradFormat> entries[] = {{Fp8GradFormat::e5m2, "e5m2"},
                                                          {Fp8GradFormat::e4m3, "e4m3"}};
};

template <>
struct EnumNames<Fp8Scaling> {
  static constexpr NamedValue<Fp8Scaling> entries[] = {{Fp8Scaling::dynamic, "dynamic"},
                                                       {Fp8Scaling::delayed, "delayed"}};
};

template <>
struct EnumNames<TransportKind> {
  static constexpr NamedValue<TransportKind> entries[] = {{TransportKind::automatic, "auto"},
                                                          {TransportKind::ucx, "ucx"}};
};

template <>
struct EnumNames<CheckpointWriters> {
  static constexpr NamedValue<CheckpointWriters> entries[] = {{CheckpointWriters::node0, "node0"},
                                                              {CheckpointWriters::every_node, "every_node"}};
};

// The recovery enums of actors/plan/recovery_policy.hpp, as fault.* names them.
template <>
struct EnumNames<NanPolicy> {
  static constexpr NamedValue<NanPolicy> entries[] = {
      {NanPolicy::abort, "abort"}, {NanPolicy::skip, "skip"}, {NanPolicy::rollback, "rollback"}};
};

template <>
struct EnumNames<FaultPolicy> {
  static constexpr NamedValue<FaultPolicy> entries[] = {{FaultPolicy::restart, "restart"},
                                                        {FaultPolicy::abort, "abort"}};
};

template <>
struct EnumNames<BuddyCopies> {
  static constexpr NamedValue<BuddyCopies> entries[] = {
      {BuddyCopies::automatic, "auto"}, {BuddyCopies::on, "on"}, {BuddyCopies::off, "off"}};
};

template <>
struct EnumNames<LeaderFailoverPolicy> {
  static constexpr NamedValue<LeaderFailoverPolicy> entries[] = {{LeaderFailoverPolicy::automatic, "auto"},
                                                           {LeaderFailoverPolicy::off, "off"}};
};

template <>
struct EnumNames<ShrinkPolicy> {
  static constexpr NamedValue<ShrinkPolicy> entries[] = {{ShrinkPolicy::automatic, "auto"},
                                                         {ShrinkPolicy::replicas, "replicas"},
                                                         {ShrinkPolicy::stages, "stages"},
                                                         {ShrinkPolicy::never, "never"}};
};

template <>
struct EnumNames<GrowPolicy> {
  static constexpr NamedValue<GrowPolicy> entries[] = {{GrowPolicy::at_step, "at_step"},
                                                       {GrowPolicy::at_checkpoint, "at_checkpoint"},
                                                       {GrowPolicy::never, "never"}};
};

}  // namespace conveyor
