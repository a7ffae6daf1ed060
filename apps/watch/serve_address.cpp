#include "apps/watch/serve_address.hpp"

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>

#include "apps/text/message_text.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::watch {

bool ServeAddress::requires_token() const {
  if (host == "localhost") return false;
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  return ec || !address.is_loopback();
}

ServeAddress parse_serve_address(std::string_view flag, std::string_view value) {
  const auto fail = [&](std::string_view why) {
    return InputError(fmt::format("{} '{}': {} (expected [HOST:]PORT, e.g. 8080, 0 for a free port, "
                                  "0.0.0.0:8080 or [::1]:8080)",
                                  flag, printable_excerpt(std::string(value)), why));
  };
  ServeAddress out;
  std::string_view port = value;
  if (const auto colon = value.rfind(':'); colon != std::string_view::npos) {
    std::string_view host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (host.starts_with('[')) {
      if (!host.ends_with(']') || host.size() < 3) throw fail("an IPv6 host goes in brackets: [::1]:PORT");
      host = host.substr(1, host.size() - 2);
    } else if (host.find(':') != std::string_view::npos) {
      throw fail("an IPv6 host goes in brackets: [::1]:PORT");
    }
    if (host.empty()) throw fail("the host before ':' is empty");
    out.host = std::string(host);
    out.host_given = true;
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
    throw fail("the port must be a number from 0 to 65535");
  const int number = std::stoi(std::string(port));
  if (number > 65535) throw fail("the port must be a number from 0 to 65535");
  out.port = static_cast<std::uint16_t>(number);
  return out;
}

}  // namespace conveyor::watch
