#include "apps/config/config_keys.hpp"

#include <algorithm>
#include <sstream>

#include "apps/config/config_limits.hpp"
#include "apps/config/config_rules.hpp"
#include "apps/config/partition_key.hpp"
#include "apps/text/message_text.hpp"
#include "actors/fault/fault_spec.hpp"
#include "actors/trace/step_range.hpp"

namespace conveyor {
namespace {

using namespace config_rules;

// trace.steps: "all", "N" or "A-B" (trace/step_range.hpp).
struct StepRangeRule {
  std::string describe() const { return "all, N or A-B (0 <= A <= B)"; }
  std::optional<std::string> check(const std::string& v) const {
    if (trace::StepRange::parse(v)) return std::nullopt;
    return "'" + printable_excerpt(v) + "' is not all, a step N or a range A-B with 0 <= A <= B";
  }
};

// data.token_bytes: the width of one id in a tokens file (token_corpus.hpp).
struct TokenBytesRule {
  std::string describe() const { return "2 or 4"; }
  std::optional<std::string> check(std::int64_t v) const {
    if (v == 2 || v == 4) return std::nullopt;
    return "must be 2 (uint16 ids) or 4 (uint32 ids), got " + std::to_string(v);
  }
};

// KEY(model.layers, ...) names the key and the RunConfig field with one token, so the two
// cannot drift apart. A key stored elsewhere is written with make_key directly.
// The shared bounds (config_limits.hpp), with why.
auto at_most_a_week() { return at_most(kMaxDeadlineS, "a week: longer deadlines overflow the clock"); }
auto at_most_micro_batches() {
  return at_most(kMaxMicroBatches, "a plan holds actions for every micro-batch");
}

// Marks a key secret (ConfigKey::secret).
ConfigKey secret(ConfigKey key) {
  key.secret = true;
  return key;
}

#define KEY(field, ...) \
  make_key(#field, [](auto& c) -> auto& { return c.field; }, __VA_ARGS__)

std::vector<ConfigKey> build_keys() {
  return {
      KEY(model.arch,
          "decoder architecture: gpt2 (LayerNorm, learned positions, GELU MLP, biases) or llama "
          "(RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP, no biases), which "
          "alone reads the model.* keys marked llama (README, \"Models\")"),
      KEY(model.layers, "transformer blocks in the model", at_least(1),
          at_most(kMaxLayers, "the partition search grows with the square of the blocks")),
      KEY(model.d_model, "width of the residual stream", at_least(1)),
      KEY(model.heads, "attention heads per block (must divide model.d_model)", at_least(1)),
      KEY(model.seq_len, "tokens per training sequence (context length)", at_least(1)),
      KEY(model.vocab,
          "vocabulary size (>= 256 for data.format text; above 65536 the ids need "
          "data.token_bytes 4)",
          at_least(1)),
      KEY(model.tie_embeddings,
          "the LM head shares the token embedding's weights (each of the two stages keeps a "
          "copy; their gradients are summed every step)"),
      KEY(model.recompute,
          "activations recomputed in backward instead of kept: none, attention (ln1, qkv "
          "and attention of each block) or full (each block but its last GEMM, from its "
          "input); less memory, more time, the same results bit for bit"),
      make_key("model.dtype", [](auto& c) -> auto& { return c.model_dtype; },
               "compute dtype: auto picks fp32 on the CPU, bf16 on CUDA"),
      KEY(model.kv_heads,
          "llama: key/value heads of grouped-query attention, each shared by model.heads / "
          "model.kv_heads query heads (must divide model.heads; 0: model.heads, multi-head "
          "attention)",
          at_least(0)),
      KEY(model.ffn_dim,
          "llama: hidden width of the SwiGLU MLP (0: Meta's rule, 8/3 model.d_model rounded up "
          "to a multiple of 256)",
          at_least(0)),
      KEY(model.rope_theta,
          "llama: base of the rotary embedding's frequencies theta^(-2i/head size)",
          greater_than(0)),
      KEY(model.rope_scaling,
          "llama: rescaling of the rotary frequencies: none, or llama3 (Llama 3.1's rule, with "
          "model.rope_scaling_factor, model.rope_low_freq_factor, model.rope_high_freq_factor "
          "and model.rope_original_max_position, config.json's rope_scaling numbers)"),
      KEY(model.rope_scaling_factor,
          "llama with model.rope_scaling llama3: low frequencies are divided by it (factor)",
          greater_than(0)),
      KEY(model.rope_low_freq_factor,
          "llama with model.rope_scaling llama3: wavelengths above "
          "model.rope_original_max_position / this are scaled whole (low_freq_factor)",
          greater_than(0)),
      KEY(model.rope_high_freq_factor,
          "llama with model.rope_scaling llama3: wavelengths below "
          "model.rope_original_max_position / this are kept, those between are blended "
          "(high_freq_factor; above model.rope_low_freq_factor)",
          greater_than(0)),
      KEY(model.rope_original_max_position,
          "llama with model.rope_scaling llama3: the context length the unscaled frequencies were "
          "trained for (original_max_position_embeddings)",
          at_least(1)),
      KEY(model.norm_eps, "llama: epsilon of RMSNorm (GPT-2's LayerNorm keeps 1e-5)",
          greater_than(0)),

      KEY(pipeline.stages, "pipeline stages (at most model.layers)", at_least(1)),
      KEY(pipeline.schedule, "pipeline schedule"),
      KEY(pipeline.virtual_stages,
          "model chunks per stage for interleaved-1f1b (>= 2 there; zbv always uses 2)",
          at_least(1)),
      KEY(pipeline.micro_batches, "micro-batches per training step", at_least(1),
          at_most_micro_batches()),
      KEY(pipeline.micro_batch_size, "sequences per micro-batch", at_least(1)),
      partition_config_key(),  // pipeline.partition: a name or a list

      KEY(parallel.data,
          "data-parallel replicas of the pipeline; each takes pipeline.micro_batches / "
          "parallel.data micro-batches of every step, gradients are averaged across them "
          "(NCCL on GPUs, in one process so far; Gloo on CPUs); a failed stage restarts from a "
          "healthy replica's state when it failed outside the optimizer step",
          at_least(1)),

      KEY(train.steps, "optimizer steps", at_least(1)),
      KEY(train.lr, "peak learning rate", greater_than(0)),
      KEY(train.lr_min, "learning rate at the end of the cosine decay (<= train.lr)",
          at_least(0.0)),
      KEY(train.warmup_steps, "steps of linear warm-up to train.lr", at_least(0)),
      KEY(train.seed, "seed of initialisation and data order"),
      KEY(train.weight_decay, "AdamW weight decay", at_least(0.0)),
      KEY(train.beta1, "AdamW beta1", closed_open_interval(0, 1)),
      KEY(train.beta2, "AdamW beta2", closed_open_interval(0, 1)),
      KEY(train.grad_clip, "global gradient-norm clip (0 disables)", at_least(0.0)),
      KEY(train.eval_every,
          "steps between evaluations (0: one evaluation only, after the last step)", at_least(0)),
      KEY(train.eval_batches,
          "micro-batches per evaluation (run in waves of pipeline.micro_batches or 16 per "
          "model stage, whichever is more: memory stays a wave's)",
          at_least(1),
          at_most_micro_batches()),
      KEY(train.sample_every,
          "steps between text samples (0: none): node 0 continues train.sample_prompt greedily from "
          "each checkpoint written at such a step, logs it and writes a `sample` row to metrics.jsonl; "
          "a multiple of checkpoint.every; written as bytes (data.format text) or, on token ids, with "
          "the tokenizer.json of the --init-from folder",
          at_least(0)),
      KEY(train.sample_prompt, "the text each train.sample_every sample continues", non_empty()),
      KEY(train.sample_tokens, "new tokens per train.sample_every sample (fewer when model.seq_len fills)",
          at_least(1)),

      KEY(data.path, "corpus file, relative to the working directory", non_empty()),
      KEY(data.format,
          "text: each byte a token; tokens: little-endian ids of data.token_bytes bytes, or "
          "llm.c .bin"),
      KEY(data.token_bytes,
          "bytes per token id in a data.format tokens file: 2 (uint16) or 4 (uint32, for "
          "vocabularies above 65536); an llm.c header must agree (version 1: 2, version 2: "
          "4); data.format text wants 2",
          TokenBytesRule{}),
      KEY(data.val_fraction, "fraction of the corpus held out for evaluation",
          open_interval(0, 1)),

      KEY(devices.kind, "device kind of the stages"),
      KEY(devices.ids, "device ids to place the stages on (empty: chosen by the runtime)", at_least(0),
          distinct()),
      KEY(devices.per_node,
          "stage actors (parallel.data × pipeline.stages) per node of a multi-process job, nodes in "
          "rank order: N > 0 gives every node but the last N and the last the rest, which must be 1 "
          "to N; 0 shares them as evenly as possible (the first nodes one more when they do not "
          "divide: 6 on 4 nodes is 2, 2, 1, 1)",
          at_least(0)),

      KEY(runtime.threads_per_stage, "CPU threads per stage for kernels", at_least(1),
          at_most(kMaxThreadsPerStage, "threads of one stage's kernels")),
      KEY(runtime.stage_threads,
          "detached: a thread per stage actor; scheduled: CAF's work-stealing workers, which "
          "poll for messages (lower latency, spends idle CPU); runs over several processes always "
          "use scheduled"),
      KEY(runtime.deterministic,
          "bitwise-reproducible GPU runs (no atomics in reductions, pinned GEMM algorithms)"),
      KEY(runtime.attention,
          "GPU attention: cudnn (cuDNN's fused flash attention, deterministic backward, faster "
          "on the H200; a shape cuDNN cannot run falls back to the kernels with a warning) or "
          "kernels (conveyor's own flash-attention kernels)"),

      KEY(rendezvous.timeout_s,
          "seconds a multi-process job waits at the rendezvous for every node (join, keys, "
          "barriers) before failing with the missing ranks",
          greater_than(0), at_most_a_week()),
      KEY(rendezvous.peer_silence_s,
          "seconds a node of a multi-process job may go without a heartbeat through the "
          "rendezvous store (each node sends one every 250 ms) before it is lost: the job "
          "fails naming its stages, or waits for its replacement (fault.rejoin_timeout_s); "
          "raise it on loaded hosts or slow networks, lower it to notice a frozen node sooner",
          at_least(kMinPeerSilenceS,
                   "nodes heartbeat every 250 ms: a silence shorter than 4 of them would "
                   "declare healthy nodes lost"),
          at_most_a_week()),
      KEY(transport.kind,
          "channel for tensors between stages: auto (hand-off inside a process, UCX between "
          "processes) or ucx (UCX on every edge, even inside one process)"),
      KEY(transport.timeout_s,
          "seconds a tensor send or receive between processes may take before the run fails "
          "naming the edge, step and micro-batch",
          greater_than(0), at_most_a_week()),

      KEY(optim.master, "fp32: fp32 master weights and AdamW state; bf16: everything bf16"),
      KEY(optim.grad_dtype,
          "type the weight gradients accumulate in: f32, or bf16 (fp32 sums rounded once per "
          "kernel, as PyTorch's all-bf16 recipe; half the gradient memory; devices.kind cuda only)"),
      KEY(optim.shard_state,
          "ZeRO-1: with parallel.data > 1 each replica keeps and updates 1/R of every stage's "
          "AdamW state, then the replicas all-gather the weights (same bits as unsharded; "
          "devices.kind cpu only so far)"),

      KEY(precision.matmul,
          "the blocks' linear layers (qkv, proj, fc1, fc2; llama: qkv, o, gate_up, down): bf16, "
          "or fp8 (Hopper's FP8 tensor cores through cuBLASLt: E4M3 activations and weights, "
          "precision.fp8_grad output gradients, one scale per tensor, bf16 outputs, fp32 "
          "accumulation; master weights and the optimizer unchanged; devices.kind cuda only)"),
      KEY(precision.fp8_grad,
          "format of the output gradients in FP8 backward GEMMs: e5m2 (range) or e4m3 "
          "(precision)"),
      KEY(precision.fp8_scaling,
          "FP8 scales: dynamic (each tensor's from its own amax, as torchao's tensorwise "
          "recipe) or delayed (from the largest amax of the last precision.amax_history "
          "steps, as Transformer Engine)"),
      KEY(precision.amax_history, "steps of amax history for precision.fp8_scaling delayed",
          at_least(1), at_most(1024, "a history is scanned at every cast")),
      KEY(precision.fp8_head, "the LM head's GEMMs in FP8 too (with precision.matmul fp8)"),
      KEY(precision.fp8_fused_casts,
          "cast GELU's and SwiGLU's outputs and input gradients to FP8 inside those kernels "
          "rather than in a pass of their own (the same codes; false measures the gain)"),

      KEY(trace.enabled, "record a causal trace of every message and action in DIR/trace/"),
      KEY(trace.steps, "steps to trace (with trace.enabled): all, one step, or a range",
          StepRangeRule{}),
      KEY(watchdog.timeout_s,
          "deadline in seconds of every action and message wait; past it the run prints the "
          "wait-for graph and stops (0 disables)",
          at_least(0.0), at_most_a_week()),
      KEY(fault.inject,
          "faults injected on purpose, for tests of the watchdog and the failure policy: drop "
          "(that message is never sent), delay (stage S's messages leave D ms late), nan (the "
          "first message stage S sends in step N carries a NaN; CPU stages), crash (stage S "
          "fails as it starts step N, or in its optimizer step), hang (stage S never starts "
          "step N: the watchdog finds it), slow (every compute action of stage S takes D ms "
          "longer: a straggler), exit (node R's process is killed as step N starts, or as it "
          "starts writing its shards of step N's checkpoint; when=relayout: as its directory receives its Nth move "
          "onto another layout (issue 44's shrink or grow; nth=1 unless given); when=restore: as a stage of it is told "
          "for the Nth time to load node 0's copy of its state, after such a move or a rejoin; not again after a restart), "
          "corrupt-checkpoint (the checkpoint after N steps gets a shard whose bytes differ "
          "from its sha256), slow-checkpoint (the checkpoint after N steps stalls D ms with its "
          "shards written and its manifest not yet). nan, crash and hang fire once. S is the stage actor: with "
          "parallel.data R, replica r's pipeline stage s is r * pipeline.stages + s "
          "(actors/fault/fault_spec.hpp)"),
      KEY(fault.on_nan,
          "a step whose loss or gradient norm is not finite (NaN or Inf): abort (stop naming "
          "the step and the stages whose gradients are not finite), skip (no optimizer "
          "update that step: every stage drops its gradients, the AdamW step count stays) or "
          "rollback (every stage goes back to its in-memory snapshot and the step is "
          "replayed once; non-finite again stops the run)"),
      KEY(fault.policy,
          "what a failed stage (an error, a crash, a hang the watchdog found) does: restart "
          "(its actor is respawned, every stage rolls back to the newest in-memory snapshot, "
          "the steps since are replayed; across processes, a lost process other than node 0 "
          "is waited for, see fault.rejoin_timeout_s) or abort (stop with the diagnosis; "
          "exit 3 for a hang)"),
      KEY(fault.snapshot_every,
          "steps between in-memory snapshots of every stage's weights and optimizer state, "
          "which a restart or rollback restores (0: none, so failures stop the run, except with "
          "parallel.data > 1 outside the optimizer step: a healthy replica's state serves)",
          at_least(0)),
      KEY(fault.max_restarts,
          "recoveries allowed within fault.window_s; one more stops the run after writing a "
          "checkpoint of the newest snapshot",
          at_least(0)),
      KEY(fault.window_s, "the sliding window of fault.max_restarts, in seconds",
          greater_than(0.0), at_most_a_week()),
      KEY(fault.rejoin_timeout_s,
          "how long the other processes of a multi-process run wait for a lost process "
          "(node rank > 0) to be started again with the same node rank; it then rejoins, its "
          "stages restore node 0's copies of their snapshots (fault.buddy_copies on) or, "
          "without them, every stage goes back to the newest checkpoint (CPU stages, "
          "checkpoint.every > 0), and the steps since are replayed (0: a lost process ends "
          "the run)",
          at_least(0.0), at_most_a_week()),
      KEY(fault.shrink,
          "when no replacement of a lost node joined within fault.rejoin_timeout_s, how the "
          "job re-plans over the nodes left instead of failing (CPU stages with buddy "
          "copies, checkpoint.every 0, a layout of one replica, for now; elsewhere the job fails as "
          "with never, saying why): replicas "
          "(drop whole replicas, keep the pipeline), stages (fewer pipeline stages, cut as "
          "pipeline.partition says; an explicit list becomes uniform), auto (replicas when "
          "parallel.data > 1, else stages) or never (fail); the global batch and the "
          "micro-batches per step stay, a replica left computing the dropped replicas' "
          "gradient shares (the weights of R replicas bit for bit on 1) (actors/plan/replan.hpp, "
          "actors/coordinator/coordinator_shrink.cpp)"),
      KEY(fault.grow,
          "after a shrink (fault.shrink), when a node that joins (the lost one started again "
          "with its node rank, or a new process given that rank and the job's --rdzv) is "
          "taken in, the job going back to the configured layout or the largest the nodes "
          "present hold, its state cut in memory from the snapshots of that boundary: "
          "at_step (the next step boundary where a snapshot is taken), at_checkpoint (the "
          "next boundary where a checkpoint is written; none while the shrunk job writes "
          "none) or never (the joining process is refused and exits naming this key) "
          "(actors/coordinator/coordinator_grow.cpp)"),
      KEY(fault.buddy_copies,
          "a run over several processes: on (node 0 keeps a copy of every other node's "
          "snapshots as they are taken, so a lost process can rejoin; CPU stages only), off "
          "(node 0 copies only the snapshots that a checkpoint or a stop writes, or a grow "
          "after a shrink cuts, when it needs them; a lost process rejoins and every stage goes back to the newest "
          "checkpoint with CPU stages and checkpoint.every > 0, else it ends the run, or "
          "under --supervise the job resumes from its newest checkpoint) or auto (on when "
          "every stage runs on the CPU, else off)"),
      KEY(fault.leader_failover,
          "a run over several processes with buddy copies (fault.buddy_copies), once node 0 "
          "(the coordinator and the rendezvous store) is lost: auto (the survivors elect node "
          "0's standby, the lowest other node of the layout, which keeps copies of node 0's "
          "snapshots and of its store; it promotes its copy of the store and the others move "
          "to it; taking over the coordinator is not implemented yet, so the job then ends, "
          "naming the node elected) or off (the job ends at once, as before; so it does "
          "without buddy copies) (actors/cluster/leader_failover.hpp)"),
      KEY(fault.straggler_factor,
          "a stage whose busy time over the median of the other stages' rises above this "
          "many times what it was in the first 3 steps is slow; slow for "
          "fault.straggler_steps steps in a row, it is reported as a straggler (a "
          "metrics.jsonl row and a progress note)",
          greater_than(1.0)),
      KEY(fault.straggler_steps,
          "consecutive slow steps before a stage is reported as a straggler (once per "
          "episode: again only after it recovered and became slow again)",
          at_least(1)),

      KEY(checkpoint.dir,
          "folder of the checkpoints (empty: DIR/checkpoints, DIR being the run folder); "
          "relative to the working directory"),
      KEY(checkpoint.every,
          "steps between checkpoints written in the background (0: none; SIGTERM still "
          "writes one before exiting)",
          at_least(0)),
      KEY(checkpoint.keep, "newest complete checkpoints kept; older ones are removed",
          at_least(1)),
      KEY(checkpoint.writers,
          "a run over several processes: node0 (node 0 writes every shard, from copies of the "
          "other nodes' snapshots sent to it) or every_node (each process writes its own stages' "
          "shards, no state crosses the network; checkpoint.dir must then be one folder every "
          "node sees, a shared filesystem)"),
      KEY(checkpoint.remote_timeout_s,
          "with checkpoint.writers every_node: how long node 0 waits for another node's shard "
          "of a checkpoint, once its own are written, before that checkpoint fails",
          greater_than(0.0), at_most_a_week()),
      secret(KEY(serve.token,
                 "the token `train --serve` requires on a host beyond loopback (clients send it as "
                 "Authorization: Bearer TOKEN, or ?token=TOKEN once); empty: the "
                 "CONVEYOR_SERVE_TOKEN variable's. A secret: never written to config.yaml")),
  };
}

#undef KEY

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string section_of(std::string_view name) {
  const auto dot = name.rfind('.');
  return std::string(dot == std::string_view::npos ? std::string_view{} : name.substr(0, dot));
}

std::string default_value(const ConfigKey& key) {
  YAML::Emitter out;
  out << YAML::Flow << key.get(RunConfig{});
  return out.c_str();
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = build_keys();
  return keys;
}

const ConfigKey* find_config_key(std::string_view name) {
  for (const auto& k : config_keys())
    if (k.name == name) return &k;
  return nullptr;
}

bool is_config_section(std::string_view prefix) {
  for (const auto& k : config_keys())
    if (k.name.size() > prefix.size() && k.name.compare(0, prefix.size(), prefix) == 0 &&
        k.name[prefix.size()] == '.')
      return true;
  return false;
}

std::string unknown_key_message(std::string_view name) {
  std::string msg = "unknown key '" + printable_excerpt(name) + "'";
  // No key is that long: no edit distance to compute (it is quadratic in the length).
  if (name.size() > 200) return msg;
  const ConfigKey* best = nullptr;
  std::size_t best_d = 0;
  for (const auto& k : config_keys()) {
    const std::size_t d = edit_distance(name, k.name);
    if (!best || d < best_d) best = &k, best_d = d;
  }
  // Close enough to be a typo: a few edits, or the same leaf name in another section.
  const auto leaf = [](std::string_view n) { return n.substr(n.rfind('.') + 1); };
  if (best && best_d <= std::max<std::size_t>(2, name.size() / 4))
    return msg + " (did you mean '" + best->name + "'?)";
  for (const auto& k : config_keys())
    if (leaf(k.name) == leaf(name)) return msg + " (did you mean '" + k.name + "'?)";
  const std::string section = section_of(name);
  std::string list;
  if (!section.empty() && is_config_section(section)) {
    for (const auto& k : config_keys())
      if (section_of(k.name) == section) list += (list.empty() ? "" : ", ") + k.name;
    return msg + " (" + section + " keys: " + list + ")";
  }
  std::vector<std::string> sections;
  for (const auto& k : config_keys()) {
    auto s = k.name.substr(0, k.name.find('.'));
    if (std::find(sections.begin(), sections.end(), s) == sections.end()) sections.push_back(s);
  }
  return msg + " (sections: " + join_names(sections) + ")";
}

std::string config_reference(bool markdown) {
  std::ostringstream out;
  if (markdown) {
    out << "| key | default | allowed | meaning |\n| --- | --- | --- | --- |\n";
    auto cell = [](std::string text) {  // a '|' inside a cell would end it
      for (std::size_t i = 0; (i = text.find('|', i)) != std::string::npos; i += 2)
        text.replace(i, 1, "\\|");
      return text;
    };
    for (const auto& k : config_keys())
      out << "| `" << k.name << "` | `" << default_value(k) << "` | " << cell(k.allowed)
          << " | " << cell(k.help) << " |\n";
    return out.str();
  }
  // The columns, and the bound every integer key has beside its own rules (config_rules.hpp).
  out << "# key, default, meaning [allowed values]; every integer key also stops at " << kMaxConfigInteger
      << " (the runtime counts in 32 bits)\n";
  std::size_t w_name = 0, w_default = 0;
  for (const auto& k : config_keys()) {
    w_name = std::max(w_name, k.name.size());
    w_default = std::max(w_default, default_value(k).size());
  }
  for (const auto& k : config_keys()) {
    const std::string d = default_value(k);
    out << k.name << std::string(w_name - k.name.size() + 2, ' ') << d
        << std::string(w_default - d.size() + 2, ' ') << k.help << " [" << k.allowed << "]\n";
  }
  return out.str();
}

}  // namespace conveyor
