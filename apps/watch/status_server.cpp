#include "apps/watch/status_server.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "apps/watch/serve_address.hpp"
#include "apps/watch/status_routes.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::watch {

StatusServerSpec status_server_spec(std::string_view flag, std::string_view value,
                                    const std::string& config_token) {
  StatusServerSpec spec{std::string(flag), std::string(value), config_token};
  const ServeAddress address = parse_serve_address(flag, value);  // throws on a bad value
  if (spec.token.empty())
    if (const char* token = std::getenv(kServeTokenVariable)) spec.token = token;
  if (address.requires_token() && spec.token.empty())
    throw InputError(fmt::format("{} {}: {} is reachable from other machines: set serve.token (train) or "
                                 "{} to a secret token (clients send it as Authorization: Bearer TOKEN, "
                                 "or ?token=TOKEN once in a browser), or serve on loopback with {} PORT",
                                 flag, value, address.host, kServeTokenVariable, flag));
  return spec;
}

std::unique_ptr<HttpServer> start_status_server(const StatusServerSpec& spec, const std::filesystem::path& run_dir,
                                                std::string_view who) {
  const ServeAddress address = parse_serve_address(spec.flag, spec.value);
  HttpServerOptions options;
  options.host = address.host;
  options.port = address.port;
  options.token = spec.token;
  const std::string prefix(who);
  options.log = [prefix](std::string_view line) { fmt::print(stderr, "{}: {}\n", prefix, line); };
  std::unique_ptr<HttpServer> server;
  try {
    server = std::make_unique<HttpServer>(options, status_routes(std::make_shared<StatusSite>(run_dir)));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} {}: {}", spec.flag, spec.value, e.what()));
  }
  fmt::print(stderr, "{}: serving {} at {} (the live page; /metrics, /api/status, /api/events){}\n", who, run_dir.string(),
             server->url(), spec.token.empty() ? "" : "; requests need the token");
  return server;
}

}  // namespace conveyor::watch
