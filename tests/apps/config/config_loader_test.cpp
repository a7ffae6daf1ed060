// The config loader: defaults, file, --set in order; every key by its dotted name; the
// resolved config reads back to the same config; every user mistake is one line naming
// where, the key, the bad value and what is allowed.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "apps/config/precision_recipe.hpp"
#include "apps/config/config_keys.hpp"
#include "apps/config/config_loader.hpp"
#include "actors/plan/schedule/schedule.hpp"
#include "apps/config/config_enums.hpp"
#include "kernels/common/error.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace conveyor;
using conveyor::testing::TempDir;

namespace {

template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError thrown>";
}

std::string set_error(const std::vector<std::string>& sets) {
  return input_error([&] { load_run_config("", sets); });
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

// CHECKs that `msg` is one line holding every part.
void check_message(const std::string& msg, std::initializer_list<std::string> parts) {
  INFO("message: " << msg);
  CHECK(msg.find('\n') == std::string::npos);
  for (const auto& p : parts) CHECK_MESSAGE(has(msg, p), "missing: " << p);
}

}  // namespace

TEST_CASE("no file and no overrides give the defaults of RunConfig") {
  CHECK(to_yaml(load_run_config("", {})) == to_yaml(RunConfig{}));
}

TEST_CASE("every key of run_config.hpp exists under its dotted name") {
  for (const char* name :
       {"model.layers", "model.d_model", "model.heads", "model.seq_len", "model.vocab",
        "pipeline.stages", "pipeline.schedule", "pipeline.micro_batches",
        "pipeline.micro_batch_size", "parallel.data", "train.steps", "train.lr", "train.lr_min",
        "train.warmup_steps", "train.seed", "train.weight_decay", "train.beta1", "train.beta2",
        "train.grad_clip", "train.eval_every", "train.eval_batches", "train.sample_every",
        "train.sample_prompt", "train.sample_tokens", "data.path", "data.format", "data.token_bytes",
        "data.val_fraction", "devices.kind", "devices.ids", "runtime.threads_per_stage",
        "trace.enabled", "trace.steps", "watchdog.timeout_s", "devices.per_node",
        "rendezvous.timeout_s", "rendezvous.peer_silence_s", "transport.kind", "transport.timeout_s", "fault.inject",
        "fault.policy", "fault.on_nan", "fault.snapshot_every", "fault.max_restarts",
        "fault.window_s", "fault.rejoin_timeout_s", "fault.shrink", "fault.grow", "fault.buddy_copies", "fault.leader_failover", "fault.straggler_factor", "fault.straggler_steps", "checkpoint.dir",
        "checkpoint.every", "checkpoint.keep", "checkpoint.writers", "checkpoint.remote_timeout_s", "optim.grad_dtype", "optim.shard_state", "model.tie_embeddings", "model.recompute",
        "runtime.attention", "model.arch", "model.kv_heads", "model.ffn_dim", "model.rope_theta",
        "model.rope_scaling", "model.rope_scaling_factor", "model.rope_low_freq_factor",
        "model.rope_high_freq_factor", "model.rope_original_max_position", "model.norm_eps",
        "serve.token", "precision.matmul", "precision.fp8_grad", "precision.fp8_scaling",
        "precision.amax_history", "precision.fp8_head", "precision.fp8_fused_casts"}) {
    INFO(name);
    CHECK(find_config_key(name) != nullptr);
    CHECK(has(config_reference(), name));
    CHECK(has(config_reference(true), name));
  }
  CHECK(config_keys().size() == 85);
}

TEST_CASE("serve.token is read from a config and --set, and never written to a resolved config") {
  TempDir dir;
  const RunConfig c = load_run_config(dir.write("c.yaml", "serve:\n  token: from-file\n"), {});
  CHECK(c.serve.token == "from-file");
  CHECK(load_run_config(dir.write("d.yaml", "serve:\n  token: a\n"), {"serve.token=from-set"}).serve.token ==
        "from-set");
  const std::string text = to_yaml(c);
  CHECK(text.find("from-file") == std::string::npos);
  CHECK(text.find("\nserve:") == std::string::npos);  // a section of secrets alone is left out
  CHECK(parse_run_config(YAML::Load(text)).serve.token.empty());
  const ConfigKey* key = find_config_key("serve.token");
  REQUIRE(key);
  CHECK(key->secret);
}

TEST_CASE("the file overrides the defaults and each --set overrides what came before") {
  TempDir dir;
  const auto path = dir.write("c.yaml",
                             "model:\n  layers: 8\n  d_model: 32\npipeline:\n  stages: 2\n"
                             "train:\n  lr: 0.01\n");
  const auto c = load_run_config(path, {"model.layers=6", "train.lr=1e-3", "model.layers=5"});
  CHECK(c.model.layers == 5);  // the last --set wins
  CHECK(c.model.d_model == 32);
  CHECK(c.pipeline.stages == 2);
  CHECK(c.train.lr == 1e-3);
  CHECK(c.model.heads == RunConfig{}.model.heads);
}

TEST_CASE("--set values are YAML: lists, a scalar for a list, strings, numbers") {
  CHECK(load_run_config("", {"devices.kind=cuda", "model.heads=1", "devices.ids=[0,1]"}).devices.ids == std::vector<std::int64_t>{0, 1});
  CHECK(load_run_config("", {"devices.kind=cuda", "model.heads=1", "devices.ids=0"}).devices.ids == std::vector<std::int64_t>{0});
  CHECK(load_run_config("", {"devices.ids=[]"}).devices.ids.empty());
  CHECK(load_run_config("", {"train.lr=1e-3"}).train.lr == 1e-3);
  CHECK(load_run_config("", {"train.lr=2"}).train.lr == 2.0);
  CHECK(load_run_config("", {"data.path=foo.txt"}).data.path == "foo.txt");
  CHECK(load_run_config("", {"data.path=a=b.txt"}).data.path == "a=b.txt");
  CHECK(load_run_config("", {" train.steps = 7"}).train.steps == 7);
  CHECK(load_run_config("", {"train.seed=18446744073709551615"}).train.seed == 18446744073709551615ULL);
  CHECK(load_run_config("", {"data.format=tokens", "model.vocab=50257"}).data.format == DataFormat::tokens);
  const auto c = load_run_config("", {"model={layers: 8, d_model: 128}"});
  CHECK(c.model.layers == 8);
  CHECK(c.model.d_model == 128);
}

TEST_CASE("data.path is kept as given and not checked here") {
  CHECK(load_run_config("", {"data.path=does/not/exist.bin"}).data.path == "does/not/exist.bin");
}

TEST_CASE("a scalar in the file is a one-element list for a list key") {
  TempDir dir;
  CHECK(load_run_config(dir.write("c.yaml", "model:\n  heads: 1\ndevices:\n  kind: cuda\n  ids: 3\n"), {}).devices.ids ==
        std::vector<std::int64_t>{3});
}

TEST_CASE("an empty file or one of comments only means the defaults") {
  TempDir dir;
  CHECK(to_yaml(load_run_config(dir.write("e.yaml", ""), {})) == to_yaml(RunConfig{}));
  CHECK(to_yaml(load_run_config(dir.write("c.yaml", "# nothing\n"), {})) == to_yaml(RunConfig{}));
}

TEST_CASE("the resolved config reads back to the same config") {
  RunConfig c;
  c.model = {6, 192, 3, 32, 50257};  // head size 64: the devices below are CUDA
  c.pipeline.stages = 3;
  c.pipeline.schedule = PipelineSchedule::interleaved_1f1b;
  c.pipeline.virtual_stages = 2;
  c.pipeline.micro_batches = 6;
  c.pipeline.micro_batch_size = 2;
  c.train.lr = 1e-3 / 3;  // no short decimal: must still come back bit for bit
  c.train.lr_min = 1e-9;
  c.train.seed = 18446744073709551615ULL;
  c.train.beta2 = 0.999;
  c.data = {"null", DataFormat::tokens, 0.25, 4};
  c.devices = {DeviceKind::cuda, {2, 0, 1}};
  c.model_dtype = ModelDtype::bf16;
  c.optim.master = MasterDtype::bf16;
  c.runtime.deterministic = false;
  c.runtime.threads_per_stage = 3;
  c.runtime.attention = AttentionChoice::kernels;

  const std::string text = to_yaml(c);
  const RunConfig back = parse_run_config(YAML::Load(text), "config.yaml");
  CHECK(to_yaml(back) == text);
  CHECK(back.train.lr == c.train.lr);
  CHECK(back.train.seed == c.train.seed);
  CHECK(back.data.path == "null");
  CHECK(back.devices.ids == c.devices.ids);

  // The node form and a file written from the text give the same config too.
  CHECK(to_yaml(parse_run_config(resolved_yaml(c))) == text);
  TempDir dir;
  CHECK(to_yaml(load_run_config(dir.write("config.yaml", text), {})) == text);

  for (const char* path : {"123", "true", "~", " lead", "a: b", "#x", "data/x y.txt"}) {
    RunConfig p;
    p.data.path = path;
    INFO(path);
    CHECK(parse_run_config(YAML::Load(to_yaml(p))).data.path == path);
  }
}

TEST_CASE("an unknown key is named with the nearest known key") {
  check_message(set_error({"model.layer=3"}),
                {"--set", "unknown key 'model.layer'", "did you mean 'model.layers'"});
  check_message(set_error({"layers=3"}), {"unknown key 'layers'", "'model.layers'"});
  check_message(set_error({"train.learning_rate=3"}), {"'train.learning_rate'", "train.lr"});
  check_message(set_error({"foo.bar=1"}), {"'foo.bar'", "model", "pipeline"});
  TempDir dir;
  const auto path = dir.write("c.yaml", "model:\n  layers: 4\n  d_modle: 64\n");
  check_message(input_error([&] { load_run_config(path, {}); }),
                {path + ":3", "unknown key 'model.d_modle'", "did you mean 'model.d_model'"});
}

TEST_CASE("a value of the wrong type names the key, the value and the type wanted") {
  check_message(set_error({"train.lr=abc"}), {"train.lr", "expected a number", "'abc'"});
  check_message(set_error({"model.layers=four"}), {"model.layers", "expected an integer", "'four'"});
  check_message(set_error({"model.layers=2.5"}), {"model.layers", "expected an integer", "'2.5'"});
  check_message(set_error({"model.layers=[1,2]"}), {"model.layers", "the list [1, 2]"});
  check_message(set_error({"model.layers={a: 1}"}), {"model.layers", "the mapping {a: 1}"});
  check_message(set_error({"pipeline.schedule=[gpipe]"}), {"pipeline.schedule", "expected a string"});
  check_message(set_error({"model.layers=\"4\""}), {"model.layers", "the string '4'"});
  check_message(set_error({"data.path="}), {"data.path", "expected a string", "nothing"});
  check_message(set_error({"devices.ids=[0, x]"}), {"devices.ids", "element 1", "'x'"});
  check_message(set_error({"train.lr=.inf"}), {"train.lr", "'.inf'"});
  check_message(set_error({"model=3"}), {"model", "expected a mapping", "'3'"});
  TempDir dir;
  const auto path = dir.write("c.yaml", "train:\n  steps:\n    a: 1\n");
  check_message(input_error([&] { load_run_config(path, {}); }),
                {path + ":2", "train.steps", "expected an integer", "the mapping {a: 1}"});
  const auto block = dir.write("b.yaml", "model:\n  layers: |\n    4\n    5\n");
  check_message(input_error([&] { load_run_config(block, {}); }),
                {block + ":2", "model.layers", "'4\\n5\\n'"});
}

TEST_CASE("integers must fit their type") {
  check_message(set_error({"model.layers=9223372036854775808"}),
                {"model.layers", "9223372036854775808", "does not fit"});
  check_message(set_error({"train.seed=-1"}), {"train.seed", "non-negative", "'-1'"});
  check_message(set_error({"train.seed=18446744073709551616"}), {"train.seed", "does not fit"});
  // Stored in 64 bits, counted in 32 by the runtime: larger values would wrap (a keep of
  // 2^32 became 0, a snapshot_every of 2^32 turned snapshots off).
  for (const char* key : {"checkpoint.keep", "fault.snapshot_every", "fault.max_restarts", "fault.straggler_steps",
                          "train.steps", "pipeline.stages"}) {
    CAPTURE(key);
    check_message(set_error({std::string(key) + "=4294967296"}),
                  {key, "must be <= 2147483647, got 4294967296", "the runtime counts in 32 bits"});
  }
  check_message(set_error({"devices.ids=[0,2147483648]"}), {"devices.ids", "element 1", "<= 2147483647"});
  CHECK(load_run_config("", {"train.steps=2147483647"}).train.steps == 2147483647);
  check_message(set_error({"runtime.threads_per_stage=2147483648"}), {"runtime.threads_per_stage", "<= 1024"});
  check_message(set_error({"model.layers=8193"}), {"model.layers", "<= 8192", "8193"});
}

TEST_CASE("zero or negative sizes are rejected") {
  check_message(set_error({"model.layers=0"}), {"model.layers", "must be >= 1, got 0"});
  check_message(set_error({"model.d_model=-64"}), {"model.d_model", ">= 1", "-64"});
  check_message(set_error({"pipeline.micro_batches=0"}), {"pipeline.micro_batches", "got 0"});
  check_message(set_error({"pipeline.micro_batch_size=0"}), {"pipeline.micro_batch_size", "got 0"});
  check_message(set_error({"model.seq_len=0"}), {"model.seq_len", "got 0"});
  check_message(set_error({"train.steps=-1"}), {"train.steps", "got -1"});
  check_message(set_error({"train.lr=0"}), {"train.lr", "must be > 0", "got 0"});
  check_message(set_error({"train.warmup_steps=-2"}), {"train.warmup_steps", ">= 0", "-2"});
  check_message(set_error({"runtime.threads_per_stage=0"}), {"runtime.threads_per_stage", "got 0"});
  check_message(set_error({"devices.ids=[0,-1]"}), {"devices.ids", ">= 0", "-1"});
  check_message(set_error({"devices.ids=[1,1]"}), {"devices.ids", "1 twice"});
  check_message(set_error({"model.vocab=2147483648"}), {"model.vocab", "2147483648", "2147483647"});
  check_message(set_error({"data.token_bytes=3"}), {"data.token_bytes", "2 (uint16 ids) or 4", "got 3"});
  check_message(set_error({"train.beta1=1"}), {"train.beta1", "[0, 1)", "got 1"});
}

TEST_CASE("checks across keys blame the key and where its value came from") {
  check_message(set_error({"model.heads=5"}),
                {"--set", "model.heads: 5 does not divide model.d_model 64",
                 "choose heads that divide d_model"});
  check_message(set_error({"pipeline.stages=5"}),
                {"pipeline.stages", "5", "model.layers 4"});
  check_message(set_error({"model.layers=2"}), {"--set", "pipeline.stages", "model.layers 2"});
  check_message(set_error({"model.vocab=100"}), {"model.vocab", "100", "data.format text", "256"});
  check_message(set_error({"data.token_bytes=4"}), {"data.token_bytes", "4", "data.format text", "leave data.token_bytes at 2"});
  check_message(set_error({"train.lr_min=0.1"}), {"train.lr_min", "0.1", "train.lr 0.003"});
  // GPU ids mean nothing to CPU stages: refused rather than ignored.
  check_message(set_error({"devices.ids=[0,1]"}), {"devices.ids", "[0, 1] on devices.kind cpu", "leave devices.ids empty"});
  TempDir dir;
  const auto path = dir.write("x.yaml", "model:\n  d_model: 64\n  heads: 5\n");
  check_message(input_error([&] { load_run_config(path, {}); }),
                {path + ":3: model.heads: 5 does not divide model.d_model 64"});
  // An override can repair what the file got wrong: checks run after every --set.
  CHECK(load_run_config(path, {"model.heads=8"}).model.heads == 8);
}

TEST_CASE("names outside their lists are rejected with the allowed names") {
  std::string allowed;
  // The config's names are the schedule library's, in its order.
  CHECK(enum_names<PipelineSchedule>() == sched::schedule_names());
  for (const auto& n : sched::schedule_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  check_message(set_error({"pipeline.schedule=foo"}),
                {"pipeline.schedule", "'foo' is not one of " + allowed});
  check_message(set_error({"data.format=csv"}), {"data.format", "'csv'", "text, tokens"});
  check_message(set_error({"devices.kind=tpu"}), {"devices.kind", "'tpu'", "cpu"});
  for (const auto& n : sched::schedule_names()) {  // interleaved and zbv: 2 chunks per stage
    const std::string v = n == "interleaved-1f1b" ? "2" : "1";
    CHECK(enum_name(load_run_config("", {"pipeline.schedule=" + n, "pipeline.virtual_stages=" + v,
                                         "model.layers=8"})
                        .pipeline.schedule) == n);
  }
}

TEST_CASE("the checkpoint keys reject bad values naming the key") {
  check_message(set_error({"checkpoint.every=-1"}), {"checkpoint.every", ">= 0", "-1"});
  check_message(set_error({"checkpoint.keep=0"}), {"checkpoint.keep", ">= 1", "got 0"});
  check_message(set_error({"checkpoint.every=[1]"}), {"checkpoint.every"});
  const auto c = load_run_config("", {"checkpoint.every=5", "checkpoint.keep=2",
                                      "checkpoint.dir=/tmp/ck"});
  CHECK(c.checkpoint.every == 5);
  CHECK(c.checkpoint.keep == 2);
  CHECK(c.checkpoint.dir == "/tmp/ck");
  CHECK(RunConfig{}.checkpoint.every == 0);  // off unless asked for (docs/CHECKPOINTS.md)
  CHECK(RunConfig{}.checkpoint.dir.empty());  // DIR/checkpoints
  // GPU stages checkpoint too (their state is captured from the device).
  CHECK(load_run_config("", {"devices.kind=cuda", "model.heads=1", "model.dtype=bf16", "checkpoint.every=5"})
            .checkpoint.every == 5);
}

TEST_CASE("optim.shard_state is off by default, and refused where it cannot hold, naming why") {
  CHECK_FALSE(RunConfig{}.optim.shard_state);
  CHECK(load_run_config("", {"parallel.data=2", "optim.shard_state=true"}).optim.shard_state);
  check_message(set_error({"devices.kind=cuda", "model.heads=1", "model.dtype=bf16", "optim.shard_state=true"}),
                {"optim.shard_state", "devices.kind cuda", "optim.shard_state: false"});
  check_message(set_error({"parallel.data=2", "optim.shard_state=true", "fault.snapshot_every=0"}),
                {"optim.shard_state", "fault.snapshot_every 0", "fault.policy: abort"});
  CHECK(load_run_config("", {"parallel.data=2", "optim.shard_state=true", "fault.snapshot_every=0",
                             "fault.policy=abort"})
            .optim.shard_state);
}

TEST_CASE("CUDA stages take head sizes 64 and 128 only, refused at load naming model.heads") {
  // The defaults (d_model 64, 4 heads) give the CPU's head size 16.
  check_message(set_error({"devices.kind=cuda", "model.dtype=bf16"}),
                {"model.heads", "64 / 4 = 16 on devices.kind cuda", "head sizes 64 and 128"});
  check_message(set_error({"devices.kind=cuda", "model.d_model=192", "model.heads=1"}),
                {"model.heads", "192 / 1 = 192"});
  CHECK(load_run_config("", {"devices.kind=cuda", "model.d_model=256", "model.heads=2"}).model.head_dim() == 128);
  CHECK(load_run_config("", {"model.heads=4"}).model.head_dim() == 16);  // the CPU's kernels take any
}

TEST_CASE("fault.buddy_copies is auto by default, takes on and off, and refuses on for GPU stages naming why") {
  CHECK(RunConfig{}.fault.buddy_copies == BuddyCopies::automatic);
  CHECK(load_run_config("", {"fault.buddy_copies=on"}).fault.buddy_copies == BuddyCopies::on);
  CHECK(load_run_config("", {"devices.kind=cuda", "model.heads=1", "model.dtype=bf16", "fault.buddy_copies=off"})
            .fault.buddy_copies == BuddyCopies::off);
  check_message(set_error({"devices.kind=cuda", "model.heads=1", "model.dtype=bf16", "fault.buddy_copies=on"}),
                {"fault.buddy_copies", "'on' on devices.kind cuda", "fault.buddy_copies: auto or off"});
  check_message(set_error({"fault.buddy_copies=yes"}),
                {"fault.buddy_copies", "'yes' is not one of auto, on, off"});
}

TEST_CASE("fault.leader_failover is auto by default, takes off, and refuses another name naming the key") {
  CHECK(RunConfig{}.fault.leader_failover == LeaderFailoverPolicy::automatic);
  CHECK(load_run_config("", {"fault.leader_failover=off"}).fault.leader_failover == LeaderFailoverPolicy::off);
  check_message(set_error({"fault.leader_failover=on"}),
                {"fault.leader_failover", "'on' is not one of auto, off"});
}

TEST_CASE("fault.shrink and fault.grow parse their names, and a bad value is refused naming the key") {
  CHECK(RunConfig{}.fault.shrink == ShrinkPolicy::automatic);
  CHECK(RunConfig{}.fault.grow == GrowPolicy::at_step);
  CHECK(load_run_config("", {"fault.shrink=stages"}).fault.shrink == ShrinkPolicy::stages);
  CHECK(load_run_config("", {"fault.shrink=never"}).fault.shrink == ShrinkPolicy::never);
  CHECK(load_run_config("", {"parallel.data=2", "fault.shrink=replicas"}).fault.shrink ==
        ShrinkPolicy::replicas);
  CHECK(load_run_config("", {"fault.grow=at_checkpoint"}).fault.grow == GrowPolicy::at_checkpoint);
  CHECK(load_run_config("", {"fault.grow=never"}).fault.grow == GrowPolicy::never);
  check_message(set_error({"fault.shrink=nodes"}),
                {"fault.shrink", "'nodes' is not one of auto, replicas, stages, never"});
  check_message(set_error({"fault.grow=later"}),
                {"fault.grow", "'later' is not one of at_step, at_checkpoint, never"});
  // One replica has none to drop: a job that could never shrink is refused up front.
  check_message(set_error({"fault.shrink=replicas"}),
                {"fault.shrink", "'replicas' with parallel.data 1", "fault.shrink: auto or stages"});
}

TEST_CASE("optim.grad_dtype bf16 on CPU stages is refused naming the key") {
  CHECK(RunConfig{}.optim.grad_dtype == GradDtype::f32);
  check_message(set_error({"optim.grad_dtype=bf16"}),
                {"optim.grad_dtype", "'bf16' on devices.kind cpu", "optim.grad_dtype: f32"});
  check_message(set_error({"optim.grad_dtype=fp16"}),
                {"optim.grad_dtype", "'fp16' is not one of f32, bf16"});
  CHECK(load_run_config("", {"devices.kind=cuda", "model.heads=1", "model.dtype=bf16", "optim.grad_dtype=bf16"})
            .optim.grad_dtype == GradDtype::bf16);
  CHECK(load_run_config("", {"optim.grad_dtype=f32"}).optim.grad_dtype == GradDtype::f32);
}

TEST_CASE("precision.matmul fp8 needs CUDA stages and 16-row GEMMs, and its keys need fp8") {
  CHECK(RunConfig{}.precision.matmul == MatmulPrecision::bf16);
  const std::vector<std::string> cuda{"devices.kind=cuda", "model.heads=1", "model.dtype=bf16"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), cuda.begin(), cuda.end());
    return extra;
  };
  const RunConfig fp8 = load_run_config("", with({"precision.matmul=fp8", "precision.fp8_grad=e4m3"}));
  CHECK(fp8.precision.matmul == MatmulPrecision::fp8);
  CHECK(fp8.precision.fp8_grad == Fp8GradFormat::e4m3);
  check_message(set_error({"precision.matmul=fp8"}),
                {"precision.matmul", "'fp8' on devices.kind cpu", "devices.kind: cuda"});
  check_message(set_error({"precision.matmul=fp4"}),
                {"precision.matmul", "'fp4' is not one of bf16, fp8"});
  check_message(set_error(with({"precision.fp8_grad=e4m3"})),
                {"precision.fp8_grad", "with precision.matmul bf16", "precision.matmul fp8"});
  check_message(set_error(with({"precision.matmul=fp8", "model.seq_len=60", "pipeline.micro_batch_size=2"})),
                {"pipeline.micro_batch_size", "2 × model.seq_len 60 = 120 rows", "multiple of 16"});
  const RunConfig delayed = load_run_config(
      "", with({"precision.matmul=fp8", "precision.fp8_scaling=delayed", "precision.amax_history=8"}));
  CHECK(delayed.precision.fp8_scaling == Fp8Scaling::delayed);
  CHECK(delayed.precision.amax_history == 8);
  check_message(set_error(with({"precision.matmul=fp8", "precision.amax_history=8"})),
                {"precision.amax_history", "with precision.fp8_scaling dynamic"});
  check_message(set_error(with({"precision.matmul=fp8", "precision.fp8_scaling=delayed",
                                "precision.amax_history=0"})),
                {"precision.amax_history", ">= 1"});
  CHECK(delayed.precision.fp8_fused_casts);
  CHECK(!load_run_config("", with({"precision.matmul=fp8", "precision.fp8_fused_casts=false"}))
             .precision.fp8_fused_casts);
  check_message(set_error(with({"precision.fp8_fused_casts=false"})),
                {"precision.fp8_fused_casts", "with precision.matmul bf16"});
  // bench e2e's `precision` field names the recipe, the fused casts when off
  CHECK(precision_recipe(RunConfig{}.precision) == "bf16");
  CHECK(precision_recipe(delayed.precision) ==
        "fp8 (e4m3 activations and weights, e5m2 gradients, delayed scaling over 8 steps)");
  PrecisionSection apart = delayed.precision;
  apart.fp8_fused_casts = false;
  CHECK(precision_recipe(apart).ends_with(", casts not fused)"));
}

TEST_CASE("runtime.attention is cudnn by default, takes kernels and refuses other names") {
  CHECK(RunConfig{}.runtime.attention == AttentionChoice::cudnn);
  CHECK(load_run_config("", {"runtime.attention=kernels"}).runtime.attention == AttentionChoice::kernels);
  CHECK(load_run_config("", {"devices.kind=cuda", "model.heads=1", "model.dtype=bf16", "runtime.attention=cudnn"})
            .runtime.attention == AttentionChoice::cudnn);
  check_message(set_error({"runtime.attention=flash"}),
                {"runtime.attention", "'flash' is not one of cudnn, kernels"});
  CHECK(has(config_reference(), "runtime.attention"));
}

TEST_CASE("data.val_fraction must lie strictly between 0 and 1") {
  for (const char* v : {"0", "1", "-0.5", "1.5"}) {
    INFO(v);
    check_message(set_error({std::string("data.val_fraction=") + v}),
                  {"data.val_fraction", "(0, 1)", std::string("got ") + v});
  }
  CHECK(load_run_config("", {"data.val_fraction=0.5"}).data.val_fraction == 0.5);
}

TEST_CASE("a config file that is missing, not YAML or not a mapping is named") {
  TempDir dir;
  const auto missing = (dir.path() / "none.yaml").string();
  check_message(input_error([&] { load_run_config(missing, {}); }),
                {missing, "cannot read config file", "No such file"});
  const auto broken = dir.write("broken.yaml", "model:\n  layers: [1,\n  heads: 2\n");
  check_message(input_error([&] { load_run_config(broken, {}); }), {broken + ":", "not valid YAML"});
  const auto tabs = dir.write("tabs.yaml", "model:\n  layers: 4\n bad: : :\n");
  check_message(input_error([&] { load_run_config(tabs, {}); }), {tabs + ":3", "not valid YAML"});
  const auto list = dir.write("list.yaml", "- model\n- train\n");
  check_message(input_error([&] { load_run_config(list, {}); }),
                {list, "top level must be a mapping", "the list [model, train]"});
}

TEST_CASE("a key given twice in one file is an error") {
  TempDir dir;
  const auto path = dir.write("d.yaml", "model:\n  layers: 4\n  layers: 6\n");
  check_message(input_error([&] { load_run_config(path, {}); }),
                {path + ":3", "model.layers", "given twice", path + ":2"});
}

TEST_CASE("a --set without '=' or with broken YAML is rejected") {
  check_message(set_error({"model.layers"}), {"--set 'model.layers'", "KEY=VALUE"});
  check_message(set_error({"=4"}), {"KEY=VALUE"});
  check_message(set_error({"devices.ids=[0,"}), {"--set", "devices.ids", "[0,", "not valid YAML"});
  const auto [key, value] = parse_set_argument("devices.ids=[0, 1]");
  CHECK(key == "devices.ids");
  CHECK(value.IsSequence());
}

TEST_CASE("every shipped config in configs/ loads and validates") {
  const fs::path dir = fs::path(CONVEYOR_SOURCE_DIR) / "configs";
  if (!fs::exists(dir)) return;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    CHECK_NOTHROW(load_run_config(entry.path().string(), {}));
  }
}
