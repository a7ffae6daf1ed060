// conveyor: the command-line entry point. Parses the command line, runs one subcommand,
// and maps errors to exit codes: 0 success, 2 bad input (config, data, flags), 1 bug.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "apps/commands.hpp"
#include "actors/runtime/detached_threads.hpp"
#include "actors/trace/hang_error.hpp"
#include "apps/exit_code.hpp"
#include "apps/standard_streams.hpp"
#include "apps/text/message_text.hpp"
#include "apps/train/self_rejoin.hpp"
#include "apps/version_text.hpp"
#include "kernels/common/error.hpp"
#include "kernels/cpu/blas_core.hpp"

namespace {

// Every error is one line on stderr (scripts read the last one), whatever it quotes.
void print_error(const char* prefix, const std::string& text, const char* suffix = "") {
  std::fprintf(stderr, "%s: %s%s\n", prefix, conveyor::one_line_message(text).c_str(), suffix);
}

// CLI11 answers a mistyped command with "A subcommand is required" (and `bench foo --help`
// with bench's help): name the word and the commands of its level instead. Descends while
// the words are commands; stops at the first option or at a command without subcommands.
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* level = &app;
  std::string path = "conveyor";
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    const auto subs = level->get_subcommands({});
    if (subs.empty()) break;
    CLI::App* next = nullptr;
    std::string known;
    for (auto* sub : subs) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      if (sub->get_name() == argv[i]) next = sub;
    }
    if (!next)
      return "unknown command '" + std::string(argv[i]) + "' (" + path + " commands: " + known + "; see " + path +
             " --help)";
    level = next;
    path += " " + next->get_name();
  }
  return "";
}

// The command line's command, its errors mapped to exit codes.
int run_command(int argc, char** argv) {
  CLI::App app{"conveyor: an actor runtime for pipeline-parallel training"};
  app.require_subcommand(1);
  app.allow_extras(false);
  app.set_version_flag("--version", conveyor::version_text,
                       "Print the version and what this binary was built with, and exit");
  conveyor::add_train_command(app);
  conveyor::add_bench_command(app);
  conveyor::add_config_command(app);
  conveyor::add_sched_command(app);
  conveyor::add_trace_command(app);
  conveyor::add_checkpoint_command(app);
  conveyor::add_hf_command(app);
  conveyor::add_watch_command(app);
  conveyor::add_sample_command(app);
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    print_error("error", unknown);
    return conveyor::kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error("error", e.what(), " (see --help)");
    return conveyor::kExitBadInput;
  } catch (const conveyor::ExitStatus& e) {
    return e.code;
  } catch (const conveyor::InputError& e) {
    print_error("error", e.what());
    return conveyor::kExitBadInput;
  } catch (const conveyor::HangError&) {  // the watchdog printed the diagnosis
    std::fprintf(stderr, "error: the hang watchdog stopped the run (wait-for graph above)\n");
    return conveyor::kExitHang;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that loops on itself is bad input; other filesystem failures
    // (a disk, a permission) fail the run.
    print_error("error", e.what());
    return e.code() == std::errc::too_many_symbolic_link_levels ? conveyor::kExitBadInput : conveyor::kExitFailed;
  } catch (const std::logic_error& e) {  // a broken invariant: a bug in conveyor
    print_error("internal error", e.what());
    return conveyor::kExitInternal;
  } catch (const std::exception& e) {  // the run failed: a stage, a peer, a disk, a device
    print_error("error", e.what());
    return conveyor::kExitFailed;
  }
  return conveyor::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  conveyor::reopen_closed_standard_streams();  // before anything opens a file
  conveyor::make_logging_unbreakable();
  conveyor::ensure_blas_core();  // while this process has one thread: it sets a variable
  conveyor::remember_command_line(argc, argv);  // a node declared lost starts again with it
  const int code = conveyor::check_standard_output(run_command(argc, argv));
  if (conveyor::stage_threads_abandoned()) {
    // A stage thread stuck in its compute still uses the actor system and the model:
    // static destructors must not run under it.
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}
