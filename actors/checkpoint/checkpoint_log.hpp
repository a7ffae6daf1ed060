#pragma once
// The checkpoint library's logger: spdlog, named "checkpoint", writing to stderr (stdout
// is reserved for `--format json` output). Created on first use; safe from any thread.
#include <spdlog/logger.h>

namespace conveyor::checkpoint {

spdlog::logger& checkpoint_log();

}  // namespace conveyor::checkpoint
