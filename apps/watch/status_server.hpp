#pragma once
// The status server of one run folder, as `watch --serve` and `train --serve` start it:
// the address from the flag's value, the token (required beyond loopback) from the run's
// serve.token, else from CONVEYOR_SERVE_TOKEN (`watch` has only the variable: a run's
// config.yaml never holds the token), the routes of status_routes.hpp, and one log line
// on stderr naming the URL (never the token).
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "apps/watch/http_server.hpp"

namespace conveyor::watch {

struct StatusServerSpec {
  std::string flag = "--serve";  // for messages
  std::string value;             // [HOST:]PORT as given
  std::string token;             // serve.token's, else CONVEYOR_SERVE_TOKEN's; empty if neither
};

/// The spec of `--serve VALUE`, the token `config_token` (serve.token) when not empty, else
/// the environment's. Throws InputError naming the flag and value when the value does not
/// parse, or when the host is beyond this machine and no token is set.
StatusServerSpec status_server_spec(std::string_view flag, std::string_view value,
                                    const std::string& config_token = "");

/// Binds and serves `run_dir` until destroyed; logs "WHO: serving RUN_DIR at URL". Throws
/// InputError naming the flag and value when the address cannot be bound.
std::unique_ptr<HttpServer> start_status_server(const StatusServerSpec& spec, const std::filesystem::path& run_dir,
                                                std::string_view who);

}  // namespace conveyor::watch
