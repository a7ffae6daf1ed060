#pragma once
// The status server of one run folder, as `watch --serve` and `train --serve` start it:
// the address from the flag's value, the token from CONVEYOR_SERVE_TOKEN (required
// beyond loopback), the routes of status_routes.hpp, and one log line on stderr naming
// the URL (never the token).
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "apps/watch/http_server.hpp"

namespace conveyor::watch {

struct StatusServerSpec {
  std::string flag = "--serve";  // for messages
  std::string value;             // [HOST:]PORT as given
  std::string token;             // CONVEYOR_SERVE_TOKEN's value, empty if unset
};

/// The spec of `--serve VALUE`, the token read from the environment. Throws InputError
/// naming the flag and value when the value does not parse, or when the host is beyond
/// this machine and no token is set.
StatusServerSpec status_server_spec(std::string_view flag, std::string_view value);

/// Binds and serves `run_dir` until destroyed; logs "WHO: serving RUN_DIR at URL". Throws
/// InputError naming the flag and value when the address cannot be bound.
std::unique_ptr<HttpServer> start_status_server(const StatusServerSpec& spec, const std::filesystem::path& run_dir,
                                                std::string_view who);

}  // namespace conveyor::watch
