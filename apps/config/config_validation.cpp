#include "apps/config/config_validation.hpp"

#include <span>

#include "actors/plan/schedule/schedule.hpp"
#include "apps/config/config_keys.hpp"
#include "apps/config/config_value.hpp"
#include "apps/config/partition_key.hpp"
#include "apps/config/schedule_spec.hpp"
#include "apps/config/target_checks.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {

namespace {

std::string join_ids(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (auto id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

// parallel.data: R must divide the step's micro-batches; R > 1 is not traced so far (what
// is refused names what to set; what needs one process is refused by `conveyor train`).
std::optional<ConfigProblem> check_data_parallel(const RunConfig& c) {
  using std::to_string;
  const std::int64_t R = c.parallel.data;
  if (c.pipeline.micro_batches % R != 0)
    return ConfigProblem{"parallel.data",
                         to_string(R) + " does not divide pipeline.micro_batches " +
                             to_string(c.pipeline.micro_batches) +
                             " (each replica takes pipeline.micro_batches / parallel.data "
                             "micro-batches of every step)",
                         "pipeline.micro_batches"};
  return std::nullopt;
}

// train.sample_every: samples are drawn on node 0 from the checkpoints (the weights gathered
// on the CPU at a step boundary, wherever the stages run), written as bytes (data.format
// text) or by the tokenizer of the --init-from folder (tokens: apps/train/train_samples.hpp
// checks that flag, which the config does not see).
std::optional<ConfigProblem> check_samples(const RunConfig& c) {
  using std::to_string;
  const std::int64_t every = c.train.sample_every;
  if (every == 0) return std::nullopt;
  if (c.checkpoint.every <= 0 || every % c.checkpoint.every != 0)
    return ConfigProblem{"train.sample_every",
                         to_string(every) + " with checkpoint.every " + to_string(c.checkpoint.every) +
                             " (samples are drawn from the checkpoints, the weights gathered on the CPU: "
                             "set checkpoint.every to train.sample_every or a divisor of it)",
                         "checkpoint.every"};
  if (static_cast<std::int64_t>(c.train.sample_prompt.size()) >= c.model.seq_len)
    return ConfigProblem{"train.sample_prompt",
                         to_string(c.train.sample_prompt.size()) + " bytes leave no room in model.seq_len " +
                             to_string(c.model.seq_len),
                         "model.seq_len"};
  return std::nullopt;
}

// The model.* keys only a Llama reads, and those only its llama3 rope scaling reads.
constexpr const char* kLlamaKeys[] = {"model.kv_heads",
                                      "model.ffn_dim",
                                      "model.rope_theta",
                                      "model.rope_scaling",
                                      "model.rope_scaling_factor",
                                      "model.rope_low_freq_factor",
                                      "model.rope_high_freq_factor",
                                      "model.rope_original_max_position",
                                      "model.norm_eps"};
constexpr const char* kLlama3ScalingKeys[] = {
    "model.rope_scaling_factor", "model.rope_low_freq_factor", "model.rope_high_freq_factor",
    "model.rope_original_max_position"};

// A key's value as the resolved config writes it ("2", "llama3").
std::string written(const RunConfig& c, const char* key) {
  return find_config_key(key)->get(c).Scalar();
}

bool at_default(const RunConfig& c, const char* key) {
  static const RunConfig defaults;
  return written(c, key) == written(defaults, key);
}

// A key read only in another setting, set where it is not read: it would change nothing,
// silently. The first such key of `keys` (not at its default) as a problem, "<value> with
// <setting> (<why>, or leave <key> out)", naming `other`, the setting that reads it.
std::optional<ConfigProblem> set_but_unread(const RunConfig& c, std::span<const char* const> keys,
                                            const std::string& setting, const std::string& why,
                                            const char* other) {
  for (const char* key : keys)
    if (!at_default(c, key))
      return ConfigProblem{
          key, written(c, key) + " with " + setting + " (" + why + ", or leave " + key + " out)",
          other};
  return std::nullopt;
}

// model.arch: a key that the architecture does not read must keep its default (set, it
// would change nothing, silently), and the Llama's keys must make a model.
std::optional<ConfigProblem> check_model_arch(const RunConfig& c) {
  using std::to_string;
  const auto& m = c.model;
  if (m.arch != ModelArch::llama) {
    return set_but_unread(c, kLlamaKeys, "model.arch gpt2",
                          "a model.arch llama key: set model.arch: llama", "model.arch");
  }
  if (m.heads % m.kv_head_count() != 0)
    return ConfigProblem{"model.kv_heads",
                         to_string(m.kv_heads) + " does not divide model.heads " +
                             to_string(m.heads) +
                             " (each key/value head serves model.heads / model.kv_heads query "
                             "heads)",
                         "model.heads"};
  if (m.head_dim() % 2 != 0)
    return ConfigProblem{
        "model.heads",
        to_string(m.heads) + " gives an odd head size, model.d_model / model.heads = " +
            to_string(m.d_model) + " / " + to_string(m.heads) + " = " + to_string(m.head_dim()) +
            " (the rotary embedding of model.arch llama rotates pairs of a head's "
            "dimensions: choose an even head size)",
        "model.d_model"};
  if (m.rope_scaling == RopeScaling::none) {
    if (auto p = set_but_unread(c, kLlama3ScalingKeys, "model.rope_scaling none",
                                "it is read by model.rope_scaling llama3 only: set that",
                                "model.rope_scaling"))
      return p;
  } else if (!(m.rope_high_freq_factor > m.rope_low_freq_factor)) {
    return ConfigProblem{"model.rope_high_freq_factor",
                         format_number(m.rope_high_freq_factor) +
                             " is not above model.rope_low_freq_factor " +
                             format_number(m.rope_low_freq_factor) +
                             " (llama3 scaling blends the wavelengths between the two bounds)",
                         "model.rope_low_freq_factor"};
  }
  return std::nullopt;
}

// precision.*: FP8 GEMMs run on CUDA stages, over 16-byte rows; the fp8_* keys mean
// nothing under bf16, so set there they are refused rather than silently ignored.
std::optional<ConfigProblem> check_precision(const RunConfig& c) {
  using std::to_string;
  const auto& p = c.precision;
  if (p.matmul != MatmulPrecision::fp8) {
    constexpr const char* kFp8Keys[] = {"precision.fp8_grad", "precision.fp8_scaling",
                                        "precision.amax_history", "precision.fp8_head",
                                        "precision.fp8_fused_casts"};
    return set_but_unread(c, kFp8Keys, "precision.matmul bf16",
                          "it is read by precision.matmul fp8 only: set that", "precision.matmul");
  }
  if (c.devices.kind != DeviceKind::cuda)
    return ConfigProblem{"precision.matmul",
                         "'fp8' on devices.kind cpu (FP8 GEMMs need Hopper's tensor cores: set "
                         "devices.kind: cuda, or precision.matmul: bf16)",
                         "devices.kind"};
  if (p.fp8_scaling == Fp8Scaling::dynamic) {
    constexpr const char* kDelayedKeys[] = {"precision.amax_history"};
    if (auto problem = set_but_unread(c, kDelayedKeys, "precision.fp8_scaling dynamic",
                                      "the history is read by delayed scaling only: set that",
                                      "precision.fp8_scaling"))
      return problem;
  }
  if (p.fp8_head)
    return ConfigProblem{"precision.fp8_head",
                         "true is not built yet (issue 43: the LM head runs in bf16): set "
                         "precision.fp8_head: false",
                         ""};
  const std::int64_t rows = c.pipeline.micro_batch_size * c.model.seq_len;
  if (rows % 16 != 0)
    return ConfigProblem{"pipeline.micro_batch_size",
                         to_string(c.pipeline.micro_batch_size) + " × model.seq_len " +
                             to_string(c.model.seq_len) + " = " + to_string(rows) +
                             " rows per micro-batch, not a multiple of 16 (FP8 GEMMs read "
                             "16-byte rows: precision.matmul fp8)",
                         "model.seq_len"};
  if (c.model.d_model % 16 != 0)
    return ConfigProblem{"model.d_model",
                         to_string(c.model.d_model) +
                             " is not a multiple of 16 (FP8 GEMMs read 16-byte rows: "
                             "precision.matmul fp8)",
                         "precision.matmul"};
  return std::nullopt;
}

}  // namespace

std::optional<ConfigProblem> check_run_config(const RunConfig& c) {
  using std::to_string;
  const auto& m = c.model;
  if (m.heads > 0 && m.d_model % m.heads != 0)
    return ConfigProblem{"model.heads", to_string(m.heads) + " does not divide model.d_model " +
                                            to_string(m.d_model) +
                                            " (choose heads that divide d_model)",
                         "model.d_model"};
  if (auto p = check_model_arch(c)) return p;
  if (c.pipeline.stages > m.layers)
    return ConfigProblem{"pipeline.stages",
                         to_string(c.pipeline.stages) + " is more than model.layers " +
                             to_string(m.layers) + " (every stage needs at least one layer)",
                         "model.layers"};
  const auto& pl = c.pipeline;
  if (auto p = check_data_parallel(c)) return p;
  try {
    // Each replica runs the schedule on its share of the step's micro-batches.
    sched::validate_spec(schedule_spec_of(c));
  } catch (const InputError& e) {
    return ConfigProblem{"pipeline.schedule", e.what(), ""};
  }
  const std::int64_t chunks = chunks_per_stage(pl);
  if (pl.stages * chunks > m.layers)
    return ConfigProblem{"pipeline.stages",
                         to_string(pl.stages) + " stages × " + to_string(chunks) +
                             " chunks need at least " + to_string(pl.stages * chunks) +
                             " layers, model.layers is " + to_string(m.layers),
                         "model.layers"};
  if (auto p = check_partition_key(c)) return p;
  const bool cuda = c.devices.kind == DeviceKind::cuda;
  const std::string dtype(enum_name(c.model_dtype));
  if (cuda && c.model_dtype == ModelDtype::fp32)
    return ConfigProblem{"model.dtype", "'" + dtype +
                                            "' on devices.kind cuda (the CUDA kernels compute "
                                            "in bf16: set model.dtype: bf16)",
                         "devices.kind"};
  // The CUDA attention kernels (cuDNN's and conveyor's) are built for these head sizes; a
  // stage of another would fail as its actor starts, after the rendezvous.
  if (cuda && m.heads > 0 && m.head_dim() != 64 && m.head_dim() != 128)
    return ConfigProblem{"model.heads",
                         to_string(m.heads) + " gives a head size of model.d_model / model.heads = " +
                             to_string(m.d_model) + " / " + to_string(m.heads) + " = " +
                             to_string(m.head_dim()) +
                             " on devices.kind cuda (the CUDA attention kernels take head sizes 64 "
                             "and 128: set model.heads to model.d_model / 64 or / 128)",
                         "model.d_model"};
  if (!cuda && c.model_dtype == ModelDtype::bf16)
    return ConfigProblem{"model.dtype", "'" + dtype +
                                            "' on devices.kind cpu (the CPU kernels compute "
                                            "in fp32: set model.dtype: fp32)",
                         "devices.kind"};
  if (!cuda && c.optim.grad_dtype != GradDtype::f32)
    return ConfigProblem{"optim.grad_dtype",
                         "'" + std::string(enum_name(c.optim.grad_dtype)) +
                             "' on devices.kind cpu (the CPU stages accumulate gradients in "
                             "fp32 only: set optim.grad_dtype: f32, or devices.kind: cuda)",
                         "devices.kind"};
  if (auto p = check_precision(c)) return p;
  if (!cuda && !c.devices.ids.empty())
    return ConfigProblem{"devices.ids",
                         "[" + join_ids(c.devices.ids) +
                             "] on devices.kind cpu (the ids name GPUs; CPU stages take "
                             "runtime.threads_per_stage cores each: leave devices.ids empty, or "
                             "set devices.kind: cuda)",
                         "devices.kind"};
  if (cuda && c.optim.shard_state)
    return ConfigProblem{"optim.shard_state",
                         "true on devices.kind cuda (sharded AdamW state needs host stages so "
                         "far: set optim.shard_state: false, or devices.kind: cpu)",
                         "devices.kind"};
  if (c.optim.shard_state && c.fault.policy == FaultPolicy::restart && c.parallel.data > 1 &&
      c.fault.snapshot_every <= 0)
    return ConfigProblem{"optim.shard_state",
                         "true with fault.policy restart and fault.snapshot_every 0 (a restarted "
                         "replica cannot copy its part of the AdamW state from a twin, only "
                         "from a snapshot: set fault.snapshot_every >= 1, or fault.policy: abort)",
                         "fault.snapshot_every"};
  if (cuda && c.fault.buddy_copies == BuddyCopies::on)
    return ConfigProblem{"fault.buddy_copies",
                         "'on' on devices.kind cuda (node 0 keeps copies of host-memory "
                         "stages' snapshots only: a GPU stage's whole state each snapshot step "
                         "is too much to send; set fault.buddy_copies: auto or off)",
                         "devices.kind"};
  if (c.fault.shrink == ShrinkPolicy::replicas && c.parallel.data < 2)
    return ConfigProblem{"fault.shrink",
                         "'replicas' with parallel.data 1 (there is no replica to drop: the job "
                         "could never shrink; set fault.shrink: auto or stages, "
                         "or parallel.data >= 2)",
                         "parallel.data"};
  if (cuda && c.transport.kind == TransportKind::ucx)
    return ConfigProblem{"transport.kind",
                         "'ucx' on devices.kind cuda (this UCX carries host memory only; GPU "
                         "tensors between processes need the NCCL channel)",
                         "devices.kind"};
  if (c.data.format == DataFormat::text && c.data.token_bytes != 2)
    return ConfigProblem{"data.token_bytes",
                         to_string(c.data.token_bytes) +
                             " is for data.format tokens (data.format text reads a byte per "
                             "token: leave data.token_bytes at 2)",
                         "data.format"};
  if (c.data.format == DataFormat::text && m.vocab < 256)
    return ConfigProblem{"model.vocab",
                         to_string(m.vocab) +
                             " is too small for data.format text (every byte is a token: "
                             "needs >= 256)",
                         "data.format"};
  if (auto p = check_samples(c)) return p;
  if (c.train.lr_min > c.train.lr)
    return ConfigProblem{"train.lr_min", format_number(c.train.lr_min) + " is above train.lr " +
                                             format_number(c.train.lr) +
                                             " (the decay ends at lr_min: keep it <= lr)",
                         "train.lr"};
  if (auto p = check_targets(c)) return p;
  return std::nullopt;
}

void validate_run_config(const RunConfig& config) {
  if (auto p = check_run_config(config)) throw InputError(p->key + ": " + p->message);
}

}  // namespace conveyor
