#include "apps/bench/watch_client.hpp"

#include "apps/bench/thread_cpu.hpp"
#include "apps/watch/http_server.hpp"

#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace conveyor {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

tcp::endpoint loopback(std::uint16_t port) { return {asio::ip::make_address("127.0.0.1"), port}; }

// One GET on a fresh connection; whether it was answered 200.
bool get(std::uint16_t port, const char* target) {
  try {
    asio::io_context io;
    beast::tcp_stream s(io);
    s.expires_after(std::chrono::seconds(10));
    s.connect(loopback(port));
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(s, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> res;
    res.body_limit(64u << 20);
    http::read(s, buffer, res);
    return res.get().result_int() == 200;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

WatchClient::WatchClient(std::uint16_t port, std::chrono::milliseconds scrape_period, int pid)
    : port_(port), pid_(pid), period_(scrape_period) {
  page_thread_ = std::thread([this] { page(); });
  scrape_thread_ = std::thread([this] { scrape(); });
}

WatchClient::~WatchClient() { stop(); }

WatchClientCounts WatchClient::stop() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (const int fd = page_socket_.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  if (page_thread_.joinable()) page_thread_.join();
  if (scrape_thread_.joinable()) scrape_thread_.join();
  return {page_requests_, events_, scrapes_, failures_, process_cpu_s_, server_cpu_s_};
}

void WatchClient::page() {
  for (const char* path : {"/", "/static/page.js", "/static/page.css", "/static/chart.js"}) {
    // chart.js may be absent (no libjs-chart.js): the page still runs, so it is no failure.
    if (!get(port_, path) && std::string_view(path) != "/static/chart.js") ++failures_;
    ++page_requests_;
  }
  try {
    asio::io_context io;
    tcp::socket s(io);
    s.connect(loopback(port_));
    page_socket_ = s.native_handle();
    if (stop_) return;
    asio::write(s, asio::buffer(std::string("GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")));
    std::string pending;
    char buf[16384];
    for (;;) {  // until the server or stop() closes the stream
      boost::system::error_code ec;
      const auto n = s.read_some(asio::buffer(buf), ec);
      if (ec) break;
      pending.append(buf, n);
      for (auto end = pending.find("\n\n"); end != std::string::npos; end = pending.find("\n\n")) {
        if (pending.find("data: ") < end) ++events_;  // the page would render it
        pending.erase(0, end + 2);
      }
    }
    page_socket_ = -1;
  } catch (const std::exception&) {
    ++failures_;
  }
}

void WatchClient::scrape() {
  while (!stop_) {
    const auto next = std::chrono::steady_clock::now() + period_;
    if (get(port_, "/metrics")) {
      ++scrapes_;
      if (const auto cpu = process_cpu(pid_, watch::kHttpThreadName); cpu && cpu->thread_found) {
        process_cpu_s_ = cpu->total_s;
        server_cpu_s_ = cpu->thread_s;
      }
    }
    else if (!stop_)
      ++failures_;  // the run's end closes the server: the last scrape may fail; bench serve discounts it
    // Asleep until the next scrape (no polling: a thread waking often would keep the
    // machine's cores awake and speed the training up, which is not what a scraper does).
    std::unique_lock lock(mutex_);
    wake_.wait_until(lock, next, [this] { return stop_.load(); });
  }
}

}  // namespace conveyor
