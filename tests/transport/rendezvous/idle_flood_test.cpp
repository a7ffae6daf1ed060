// Many connections that never send a frame (a port scan, a stuck load balancer, an
// attack) are each dropped at the io timeout, but the log says so in a bounded number of
// lines: the first few one by one, the rest as a count.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using conveyor::testing::LogCapture;
using conveyor::testing::client_options;
using conveyor::testing::server_options;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("300 connections that never send a frame are dropped with a bounded number of log lines") {
  constexpr std::size_t kIdle = 300;
  LogCapture log;
  const auto start = Clock::now();
  {
    auto options = server_options(log);
    options.io_timeout = milliseconds(200);
    RendezvousServer server(options);
    asio::io_context io;
    std::vector<std::unique_ptr<tcp::socket>> idle;
    for (std::size_t i = 0; i < kIdle; ++i) {
      idle.push_back(std::make_unique<tcp::socket>(io));
      idle.back()->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
    }
    const auto deadline = Clock::now() + milliseconds(10'000);
    while (server.dropped_connections() < kIdle && Clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds(10));
    REQUIRE(server.dropped_connections() == kIdle);
    // The store still serves a well-behaved client.
    RendezvousClient c(client_options(server));
    c.set("k", "v");
    CHECK(c.get("k") == rendezvous::to_bytes("v"));
  }  // the server ends here: what it held back is summed up now
  const std::string all = log.all();
  INFO(all);
  CHECK(count_lines(all) <= 8);
  CHECK(all.find("silent for 200 ms while reading a frame header") != std::string::npos);
  CHECK(all.find("295 more") != std::string::npos);
  CHECK(Clock::now() - start < milliseconds(10'000));
}
