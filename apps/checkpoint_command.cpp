// conveyor checkpoint verify PATH [--format text|json]
// conveyor checkpoint export PATH --out FILE [--force] [--dtype f32|bf16] [--format text|json]
// conveyor checkpoint diff A B [--format text|json]
// PATH is a checkpoint (step-* folder), a checkpoint.dir or a run folder. verify checks
// every checkpoint there (sizes, sha256, headers) and exits 1 when one that is complete
// fails, or none is intact; export writes one checkpoint's weights as weights.safetensors
// is written. Bad input (no such folder, no checkpoint, an existing --out) is one `error:`
// line and exit code 2. diff exits 1 when A and B differ, as diff(1) does.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <string>

#include "actors/checkpoint/filesystem.hpp"
#include "apps/checkpoint/checkpoint_diff.hpp"
#include "apps/checkpoint/checkpoint_inspect.hpp"
#include "apps/commands.hpp"
#include "apps/exit_code.hpp"

namespace conveyor {
namespace {

struct CheckpointOptions {
  std::string path;
  std::string other;  // diff's B
  std::string out;
  std::string format = "text";
  std::string dtype = "f32";
  bool force = false;
};

void run_verify(const CheckpointOptions& o) {
  const auto reports = verify_checkpoints(checkpoint::posix_filesystem(), o.path, [](const auto& folder) {
    fmt::print(stderr, "conveyor checkpoint: verifying {}\n", folder.path);
  });
  const auto json = reports_json(reports);
  if (o.format == "json")
    fmt::print("{}\n", json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  else
    fmt::print("{}", reports_text(reports));
  if (!json.at("ok").get<bool>()) {
    std::fflush(stdout);
    throw ExitStatus{kExitFailed};  // the listing is the answer; the status says it failed
  }
}

void run_export(const CheckpointOptions& o) {
  fmt::print(stderr, "conveyor checkpoint: verifying {}\n", o.path);
  const auto e = export_weights(checkpoint::posix_filesystem(), o.path, o.out, o.force, o.dtype == "bf16");
  fmt::print(stderr, "conveyor checkpoint: {} (step {}): {} weights, {:.1f}M parameters → {} ({:.2f} GB)\n", e.from,
             e.step, e.tensors, static_cast<double>(e.parameters) / 1e6, e.out, static_cast<double>(e.bytes) / 1e9);
  if (o.format == "json")
    fmt::print("{}\n", nlohmann::json{{"from", e.from},
                                      {"step", e.step},
                                      {"out", e.out},
                                      {"tensors", e.tensors},
                                      {"parameters", e.parameters},
                                      {"dtype", o.dtype},
                                      {"bytes", e.bytes}}
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void run_diff(const CheckpointOptions& o) {
  const auto diff = diff_checkpoints(checkpoint::posix_filesystem(), o.path, o.other);
  if (o.format == "json")
    fmt::print("{}\n", diff_json(diff).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  else
    fmt::print("{}", diff_text(diff));
  if (!diff.identical()) {
    std::fflush(stdout);
    throw ExitStatus{kExitFailed};
  }
}

}  // namespace

void add_checkpoint_command(CLI::App& app) {
  auto* ckpt = app.add_subcommand("checkpoint", "Verify checkpoints, export one's weights, or compare two");
  ckpt->require_subcommand(1);
  auto opt = std::make_shared<CheckpointOptions>();
  auto add_common = [&](CLI::App* cmd) {
    cmd->add_option("path", opt->path, "A checkpoint (step-* folder), a checkpoint.dir or a run folder")->required();
    cmd->add_option("--format", opt->format, "text, or json (alone on stdout)")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
  };
  auto* verify = ckpt->add_subcommand(
      "verify", "Check every checkpoint of PATH (sizes, sha256, headers against the manifest), newest first; "
                "exit 1 when a complete one fails or none is intact");
  add_common(verify);
  verify->callback([opt] { run_verify(*opt); });

  auto* exp = ckpt->add_subcommand(
      "export", "Write the model weights of a checkpoint (the newest intact one of a folder) as "
                "weights.safetensors, without optimizer state");
  add_common(exp);
  exp->add_option("--out", opt->out, "The safetensors file to write (atomically)")->required();
  exp->add_flag("--force", opt->force, "Replace --out when it exists");
  exp->add_option("--dtype", opt->dtype, "f32 (as the run's weights.safetensors), or bf16 (rounded to nearest even: half the size)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  exp->callback([opt] { run_export(*opt); });

  auto* diff = ckpt->add_subcommand(
      "diff", "Compare two checkpoints or weights files tensor by tensor, bit for bit: which differ, in how many "
              "elements, by how much; exit 1 when they differ");
  diff->add_option("a", opt->path, "A checkpoint (or checkpoint.dir, run folder) or a safetensors weights file")
      ->required();
  diff->add_option("b", opt->other, "The other, of either kind")->required();
  diff->add_option("--format", opt->format, "text, or json (alone on stdout)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  diff->callback([opt] { run_diff(*opt); });
}

}  // namespace conveyor
