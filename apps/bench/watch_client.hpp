#pragma once
// What `bench serve` attaches to a served run, as people and Prometheus would: a page (it
// loads /, its script, style and Chart.js, then keeps /api/events open and reads every
// event) and a scraper that fetches /metrics every `scrape_period`. Both run on a thread
// of their own until the server goes away (the run ended) or stop() is called.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <string>
#include <thread>

namespace conveyor {

struct WatchClientCounts {
  std::int64_t page_requests = 0, events = 0, scrapes = 0, failures = 0;
  // The served process's CPU seconds at the last scrape: all its threads, its HTTP thread.
  double process_cpu_s = 0, server_cpu_s = 0;
};

class WatchClient {
 public:
  /// `pid`: the served process, whose CPU time each scrape samples.
  WatchClient(std::uint16_t port, std::chrono::milliseconds scrape_period, int pid);
  ~WatchClient();  // stop()
  WatchClient(const WatchClient&) = delete;
  WatchClient& operator=(const WatchClient&) = delete;

  /// Ends both threads (the page's stream closes) and returns what they did. Idempotent.
  WatchClientCounts stop();

 private:
  void page();
  void scrape();
  std::uint16_t port_;
  int pid_;
  std::atomic<double> process_cpu_s_{0}, server_cpu_s_{0};
  std::chrono::milliseconds period_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;  // with wake_: the scraper's sleep, ended early by stop()
  std::condition_variable wake_;
  std::atomic<std::int64_t> page_requests_{0}, events_{0}, scrapes_{0}, failures_{0};
  std::atomic<int> page_socket_{-1};  // shut down by stop() to end the page's blocking read
  std::thread page_thread_, scrape_thread_;
};

}  // namespace conveyor
