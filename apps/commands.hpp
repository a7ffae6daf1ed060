#pragma once
// Every subcommand of `conveyor` adds itself to the top-level CLI here, one file each.
#include <CLI/CLI.hpp>

namespace conveyor {

/// Each adds a subcommand whose callback runs it; errors a user can fix are thrown as
/// InputError (exit code 2), anything else is a bug (exit code 1).
void add_train_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_config_command(CLI::App& app);
void add_sched_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_checkpoint_command(CLI::App& app);
void add_hf_command(CLI::App& app);
void add_watch_command(CLI::App& app);
void add_sample_command(CLI::App& app);

}  // namespace conveyor
