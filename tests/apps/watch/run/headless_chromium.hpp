#pragma once
// Headless Chromium driven over its DevTools protocol (a WebSocket, Boost.Beast's): open a
// URL, evaluate JavaScript in the page until it says what a test waits for, save a
// screenshot. --dump-dom cannot wait for a page that keeps a server-sent event stream
// open (its --virtual-time-budget waits for the stream to end; without it the DOM is
// dumped before the first event), so a test of the live page asks the page itself.
// Header-only; throws std::runtime_error on what a test cannot go on from.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/common/spawn_process.hpp"

#include "tests/apps/watch/http_get.hpp"

extern char** environ;

namespace conveyor::testing {

inline std::string base64_decode(const std::string& in) {
  static const std::string abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const auto pos = abc.find(c);
    if (pos == std::string::npos) continue;  // '=' padding, newlines
    acc = (acc << 6) | static_cast<std::uint32_t>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

class HeadlessChromium {
 public:
  /// Starts `binary` headless with a profile in `profile_dir` (its stderr goes to
  /// profile_dir/chromium.err) and connects to its first page. The window is
  /// width × height CSS pixels, so a screenshot shows the page as a desktop browser would.
  HeadlessChromium(const std::string& binary, const std::filesystem::path& profile_dir, int width = 1280,
                   int height = 1000)
      : err_path_(profile_dir / "chromium.err") {
    std::filesystem::create_directories(profile_dir);
    std::vector<std::string> argv{binary,
                                  "--headless",
                                  "--disable-gpu",
                                  "--no-sandbox",  // as root in CI containers
                                  "--no-first-run",
                                  "--no-default-browser-check",
                                  "--disable-dev-shm-usage",
                                  "--hide-scrollbars",
                                  "--log-level=3",  // fatal only: no D-Bus complaints in the test log
                                  "--remote-debugging-port=0",
                                  "--remote-debugging-address=127.0.0.1",
                                  "--user-data-dir=" + profile_dir.string(),
                                  "--window-size=" + std::to_string(width) + "," + std::to_string(height),
                                  "about:blank"};
    pid_ = spawn_process({.argv = argv,
                          .program = binary,
                          .stdin_path = "/dev/null",
                          .stdout_path = "/dev/null",
                          .stderr_path = err_path_,
                          .own_process_group = true});  // its helpers die with it
    connect_first_page(std::chrono::seconds(30));
  }

  ~HeadlessChromium() {
    try {
      if (ws_) ws_->close(boost::beast::websocket::close_code::normal);
    } catch (const std::exception&) {
    }
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);  // the browser's process group: it and its helpers
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  HeadlessChromium(const HeadlessChromium&) = delete;
  HeadlessChromium& operator=(const HeadlessChromium&) = delete;

  /// Loads `url` in the page (returns once the navigation was committed).
  void navigate(const std::string& url) { call("Page.navigate", {{"url", url}}); }

  /// The value of `expression` evaluated in the page (returnByValue), null when it threw.
  nlohmann::json evaluate(const std::string& expression) {
    const auto r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}});
    if (r.contains("exceptionDetails")) return nullptr;
    return r.at("result").value("value", nlohmann::json(nullptr));
  }

  /// Evaluates `expression` every 100 ms until it is true, at most `timeout`; whether it became true.
  bool wait_until(const std::string& expression, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (evaluate(expression) == true) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  /// A PNG of the whole page (beyond the window when it is taller) into `path`.
  void screenshot(const std::filesystem::path& path) {
    const auto r = call("Page.captureScreenshot", {{"format", "png"}, {"captureBeyondViewport", true}});
    std::ofstream out(path, std::ios::binary);
    out << base64_decode(r.at("data").get<std::string>());
    if (!out) throw std::runtime_error("cannot write " + path.string());
  }

  std::string stderr_text() const {
    std::ifstream in(err_path_);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID" on stderr gives the
  // port; /json/list there names the page's own socket.
  void connect_first_page(std::chrono::seconds timeout) {
    const std::regex listening("DevTools listening on ws://127\\.0\\.0\\.1:([0-9]+)/");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::smatch m;
    std::string text;
    while (!std::regex_search(text = stderr_text(), m, listening)) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("chromium did not open its DevTools port within 30 s: " + text);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    port_ = static_cast<std::uint16_t>(std::stoi(m[1]));
    std::string page_path;
    while (page_path.empty()) {
      for (const auto& target : nlohmann::json::parse(http_request(port_, "/json/list").body))
        if (target.value("type", "") == "page") {
          const std::string url = target.at("webSocketDebuggerUrl");
          page_path = url.substr(url.find("/devtools/"));
        }
      if (page_path.empty()) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("chromium has no page");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    ws_.emplace(io_);
    boost::beast::get_lowest_layer(*ws_).connect(
        boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port_));
    ws_->handshake("127.0.0.1:" + std::to_string(port_), page_path);
    call("Page.enable", nlohmann::json::object());
  }

  // One command and its answer; events in between are skipped.
  nlohmann::json call(const std::string& method, const nlohmann::json& params) {
    const int id = ++next_id_;
    ws_->write(boost::asio::buffer(nlohmann::json{{"id", id}, {"method", method}, {"params", params}}.dump()));
    for (;;) {
      boost::beast::flat_buffer buffer;
      ws_->read(buffer);
      const auto msg = nlohmann::json::parse(boost::beast::buffers_to_string(buffer.data()));
      if (msg.value("id", -1) != id) continue;
      if (msg.contains("error")) throw std::runtime_error(method + ": " + msg.at("error").dump());
      return msg.at("result");
    }
  }

  std::filesystem::path err_path_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  boost::asio::io_context io_;
  std::optional<boost::beast::websocket::stream<boost::asio::ip::tcp::socket>> ws_;
  int next_id_ = 0;
};

}  // namespace conveyor::testing
