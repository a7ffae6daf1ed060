// conveyor: the command-line entry point. Parses the command line, runs one subcommand,
// and maps errors to exit codes: 0 success, 2 bad input (config, data, flags), 1 bug.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "apps/commands.hpp"
#include "apps/exit_code.hpp"
#include "kernels/common/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"conveyor: an actor runtime for pipeline-parallel training"};
  app.require_subcommand(1);
  conveyor::add_train_command(app);
  conveyor::add_bench_command(app);
  conveyor::add_sched_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return conveyor::kExitBadInput;
  } catch (const conveyor::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return conveyor::kExitBadInput;
  } catch (const conveyor::ExitRequest& e) {
    return e.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return conveyor::kExitInternal;
  }
  return 0;
}
