#include "actors/checkpoint/checkpoint_log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>  // declares the stderr sinks too

namespace conveyor::checkpoint {

spdlog::logger& checkpoint_log() {
  // Not registered with spdlog's registry, so it cannot clash with a logger of the app's.
  static const std::shared_ptr<spdlog::logger> logger =
      std::make_shared<spdlog::logger>("checkpoint", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  return *logger;
}

}  // namespace conveyor::checkpoint
