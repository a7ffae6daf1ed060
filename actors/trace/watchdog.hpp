#pragma once
// The hang watchdog: a thread that looks at every stage's published state a few times a
// second. Each action and each wait for a message has a deadline (timeout after it
// began); so has a stage idle between plans. When one passes, the watchdog builds the
// wait-for graph, adds the last trace records (if tracing), hands the diagnosis to
// `on_fire`, and stops looking. What happens next (abort, restart) is the caller's
// policy: after a restart, rearm() makes it look again; if the run has neither stopped
// nor been rearmed `grace_s` after the diagnosis (a stage stuck in a kernel never reads
// its mailbox), `on_stuck` runs (say, exit the process). pause() stops the looking
// without a diagnosis until rearm() (a wait the run bounds itself).
// A process that did not run for a while (SIGSTOP and SIGCONT, a suspended machine) is
// not hung: when the watchdog's own tick comes more than kFrozenAfterNs late, every
// deadline counts again from that tick (on_pause hears of it).
// CAF-free: the caller's callbacks do the actor work.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/trace/stage_progress.hpp"
#include "actors/trace/trace_record.hpp"
#include "actors/trace/wait_for_graph.hpp"

namespace conveyor::trace {

class TraceSession;

struct HangDiagnosis {
  WaitForGraph graph;
  std::vector<Record> last_records;  // oldest first
  double timeout_s = 0;

  /// The whole diagnosis as lines of text: header, the wait-for graph, the verdict, the
  /// last records.
  std::string text() const;
};

/// One line for a trace record, times in ms after `t0_ns`.
std::string describe_record(const Record& r, std::int64_t t0_ns);

class Watchdog {
 public:
  using OnFire = std::function<void(const HangDiagnosis&)>;
  /// Starts the thread. `trace` may be null (no records in the dump).
  Watchdog(std::shared_ptr<ProgressBoard> board, WaitForContext context, double timeout_s,
           std::shared_ptr<TraceSession> trace, OnFire on_fire,
           std::function<void()> on_stuck = {}, double grace_s = 5.0);
  /// Stops and joins the thread.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void stop();
  /// True from a diagnosis until the run recovered from it (rearm()).
  bool fired() const { return fired_.load(); }
  /// The run recovered from the hang it diagnosed (a restart), or from a wait it paused
  /// for: look again, with every deadline counted from now. Without it, on_stuck runs
  /// grace_s after a diagnosis.
  void rearm();
  /// The run waits on purpose for something with a deadline of its own (a lost node's
  /// replacement): no diagnosis until rearm().
  void pause();
  /// `report(seconds)` is called (on the watchdog's thread) for each stretch of time in
  /// which this process did not run; set it before such a stretch can come.
  void on_pause(std::function<void(double)> report);
  /// How many such stretches there were.
  int pauses() const;

  /// A tick this much later than asked is a process that did not run, not a slow one.
  static constexpr std::int64_t kFrozenAfterNs = 1'000'000'000;

 private:
  void loop();
  bool overdue(const std::vector<StageSnapshot>& stages, std::int64_t now) const;

  std::shared_ptr<ProgressBoard> board_;
  WaitForContext context_;
  std::int64_t timeout_ns_;
  std::shared_ptr<TraceSession> trace_;
  OnFire on_fire_;
  std::function<void()> on_stuck_;
  double grace_s_;
  std::int64_t started_ns_;
  std::atomic<bool> fired_{false};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::function<void(double)> on_pause_;
  int pauses_ = 0;
  bool stopping_ = false;
  bool rearmed_ = false;
  bool paused_ = false;
  std::thread thread_;
};

}  // namespace conveyor::trace
