#pragma once
// Who may read a status server that listens beyond this machine: whoever shows its token
// (serve.token or CONVEYOR_SERVE_TOKEN: status_server.hpp), in one of three ways:
//   Authorization: Bearer TOKEN      scrapers (Prometheus' `authorization` setting), curl
//   ?token=TOKEN in the URL, once    a browser: the reply sets a cookie, so the page's own
//                                    requests and later visits need not carry it
//   Cookie: conveyor_token=TOKEN     that cookie (HttpOnly, SameSite=Strict)
// A server without a token (loopback only) lets every request through. Tokens are
// compared in time independent of where they differ.
#include <optional>
#include <string>
#include <string_view>

namespace conveyor::watch {

inline constexpr std::string_view kTokenCookie = "conveyor_token";

struct AuthResult {
  bool allowed = false;
  /// A Set-Cookie header value to send with the reply (the token came in the URL).
  std::optional<std::string> set_cookie;
};

/// `target` is the request target (path and query); `authorization` and `cookie` the
/// headers' values (empty when absent).
AuthResult authorize(std::string_view token, std::string_view target, std::string_view authorization,
                     std::string_view cookie);

/// The value of query parameter `name` in `target`, percent-decoded; none when absent.
std::optional<std::string> query_parameter(std::string_view target, std::string_view name);
/// `target` without its query string.
std::string_view target_path(std::string_view target);
/// Percent-encoding of everything but unreserved characters (RFC 3986).
std::string percent_encode(std::string_view text);

}  // namespace conveyor::watch
