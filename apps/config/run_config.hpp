#pragma once
// The resolved configuration of one run: defaults, then the YAML file, then --set
// overrides, then validation. Key names are part of the interface (scripts use them).
// A setting that takes one of a few names is an enum (config_enums.hpp), parsed once here:
// code compares enums, never the names.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/fault/fault_spec.hpp"
#include "apps/config/config_enums.hpp"
#include "kernels/data/token_corpus.hpp"
#include "kernels/model/gpt_config.hpp"

namespace conveyor {

struct PipelineSection {
  std::int64_t stages = 4;                  // pipeline.stages
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;  // pipeline.schedule: gpipe | 1f1b | interleaved-1f1b | zb-h1 | zbv
  std::int64_t virtual_stages = 1;          // pipeline.virtual_stages: chunks per stage (interleaved-1f1b)
  std::int64_t micro_batches = 8;           // pipeline.micro_batches
  std::int64_t micro_batch_size = 4;        // pipeline.micro_batch_size
  // pipeline.partition: uniform | auto | [n1, n2, ...] (blocks per model stage, 6.5 for six
  // and a half)
  PartitionMode partition_mode = PartitionMode::uniform;  // uniform | auto | explicit (a list was given)
  std::vector<std::int64_t> partition_halves;  // the list in half blocks, when explicit
};

struct ParallelSection {
  // parallel.data: data-parallel replicas of the pipeline; each takes
  // pipeline.micro_batches / data of every step
  std::int64_t data = 1;
};

struct TrainSection {
  std::int64_t steps = 200;                 // train.steps
  double lr = 3e-3;                         // train.lr (peak)
  double lr_min = 3e-4;                     // train.lr_min
  std::int64_t warmup_steps = 10;           // train.warmup_steps
  std::uint64_t seed = 1234;                // train.seed
  double weight_decay = 0.1;                // train.weight_decay
  double beta1 = 0.9;                       // train.beta1
  double beta2 = 0.95;                      // train.beta2
  double grad_clip = 1.0;                   // train.grad_clip (0 disables)
  std::int64_t eval_every = 50;             // train.eval_every (0 disables)
  std::int64_t eval_batches = 4;            // train.eval_batches (micro-batches per eval)
  std::int64_t sample_every = 0;            // train.sample_every: steps between text samples (0: off)
  std::string sample_prompt = "\n";         // train.sample_prompt: the text each sample continues
  std::int64_t sample_tokens = 64;          // train.sample_tokens: new tokens per sample
};

struct DataSection {
  std::string path = "data/tiny_corpus.txt"; // data.path (relative to the working dir)
  DataFormat format = DataFormat::text;      // data.format: text | tokens
  double val_fraction = 0.1;                 // data.val_fraction, in (0, 1)
  std::int64_t token_bytes = 2;              // data.token_bytes: 2 | 4 (bytes per id in a tokens file)
};

struct DevicesSection {
  DeviceKind kind = DeviceKind::cpu;         // devices.kind: cpu | cuda
  std::vector<std::int64_t> ids;             // devices.ids
  std::int64_t per_node = 0;                 // devices.per_node: stages per node (0: stages / nnodes)
};

struct RuntimeSection {
  std::int64_t threads_per_stage = 1;        // runtime.threads_per_stage (CPU kernels)
  bool deterministic = true;                 // runtime.deterministic (GPU: no atomics, pinned GEMM algorithms)
  StageThreads stage_threads = StageThreads::detached;  // runtime.stage_threads: detached | scheduled
  AttentionChoice attention = AttentionChoice::cudnn;  // runtime.attention: cudnn | kernels (CUDA stages)
};

struct OptimSection {
  MasterDtype master = MasterDtype::fp32;    // optim.master: fp32 (fp32 master + state) | bf16
  GradDtype grad_dtype = GradDtype::f32;     // optim.grad_dtype: f32 | bf16 (CUDA stages only)
  bool shard_state = false;                  // optim.shard_state: ZeRO-1 across replicas (CPU)
};

// precision.*: FP8 GEMMs on Hopper (issue 43); the default bf16 changes nothing.
struct PrecisionSection {
  MatmulPrecision matmul = MatmulPrecision::bf16;  // precision.matmul: bf16 | fp8 (CUDA stages)
  Fp8GradFormat fp8_grad = Fp8GradFormat::e5m2;    // precision.fp8_grad: e5m2 | e4m3
  Fp8Scaling fp8_scaling = Fp8Scaling::dynamic;    // precision.fp8_scaling: dynamic | delayed
  std::int64_t amax_history = 16;                  // precision.amax_history: steps (delayed)
  bool fp8_head = false;                           // precision.fp8_head: the LM head in FP8 too
  bool fp8_fused_casts = true;                     // precision.fp8_fused_casts: casts in GELU/SwiGLU
};

struct TraceSection {
  bool enabled = false;                      // trace.enabled: record DIR/trace/
  std::string steps = "all";                 // trace.steps: all | N | A-B
};

struct WatchdogSection {
  double timeout_s = 300;                    // watchdog.timeout_s (0 disables)
};

struct RendezvousSection {
  double timeout_s = 60;                     // rendezvous.timeout_s: join, keys, barriers
  double peer_silence_s = 5;                 // rendezvous.peer_silence_s: no heartbeat this long = node lost
};

struct TransportSection {
  TransportKind kind = TransportKind::automatic;  // transport.kind: auto | ucx
  double timeout_s = 60;                     // transport.timeout_s: every tensor send/receive across processes
};

struct FaultSection {
  std::vector<FaultSpec> inject;             // fault.inject: faults injected on purpose (tests), parsed
  FaultPolicy policy = FaultPolicy::restart;  // fault.policy: restart | abort
  NanPolicy on_nan = NanPolicy::abort;       // fault.on_nan: abort | skip | rollback
  std::int64_t snapshot_every = 1;           // fault.snapshot_every: steps between in-memory snapshots (0: none)
  std::int64_t max_restarts = 3;             // fault.max_restarts: recoveries allowed within fault.window_s
  double window_s = 600;                     // fault.window_s
  double rejoin_timeout_s = 60;              // fault.rejoin_timeout_s: wait for a lost process's replacement (0: fail)
  ShrinkPolicy shrink = ShrinkPolicy::automatic;  // fault.shrink: auto | replicas | stages (issue 44's re-plan)
  GrowPolicy grow = GrowPolicy::at_step;     // fault.grow: at_step | at_checkpoint | never (issue 44's re-plan)
  BuddyCopies buddy_copies = BuddyCopies::automatic;  // fault.buddy_copies: auto | on | off (node 0's copies of other nodes' snapshots)
  LeaderFailoverPolicy leader_failover = LeaderFailoverPolicy::automatic;  // fault.leader_failover: auto | off (electing node 0's standby)
  double straggler_factor = 2.0;             // fault.straggler_factor: busy time over the median stage's that is slow
  std::int64_t straggler_steps = 3;          // fault.straggler_steps: consecutive slow steps before a report
};

struct CheckpointSection {
  std::string dir;                           // checkpoint.dir (empty: <run folder>/checkpoints)
  std::int64_t every = 0;                    // checkpoint.every: steps between checkpoints (0: off)
  std::int64_t keep = 3;                     // checkpoint.keep: newest complete checkpoints kept
  CheckpointWriters writers = CheckpointWriters::node0;  // checkpoint.writers: node0 | every_node (who writes a shard)
  double remote_timeout_s = 600;             // checkpoint.remote_timeout_s: node 0's wait for another node's shard
};

struct ServeSection {
  std::string token;  // serve.token: what `train --serve` beyond loopback requires (secret)
};

struct RunConfig {
  GptConfig model;                           // model.arch, layers, d_model, heads, ... (model.*)
  ModelDtype model_dtype = ModelDtype::automatic;  // model.dtype: auto (fp32 on cpu, bf16 on cuda) | fp32 | bf16
  PipelineSection pipeline;
  ParallelSection parallel;
  TrainSection train;
  DataSection data;
  DevicesSection devices;
  RuntimeSection runtime;
  OptimSection optim;
  PrecisionSection precision;
  RendezvousSection rendezvous;
  TransportSection transport;
  TraceSection trace;
  WatchdogSection watchdog;
  FaultSection fault;
  CheckpointSection checkpoint;
  ServeSection serve;
};

}  // namespace conveyor
