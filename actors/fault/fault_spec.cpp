#include "actors/fault/fault_spec.hpp"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <thread>

namespace conveyor {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(begin, i - begin));
      begin = i + 1;
    }
  return parts;
}

std::int64_t number(const std::string& entry, const std::string& field, const std::string& text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < 0)
    throw std::invalid_argument("fault '" + entry + "': " + field + "=" + text +
                                " is not a whole number >= 0");
  return v;
}

}  // namespace

FaultSpec parse_fault_spec(const std::string& entry) {
  const auto parts = split(entry, ':');
  FaultSpec spec;
  spec.text = entry;
  if (parts[0] == "drop")
    spec.kind = FaultSpec::Kind::drop;
  else if (parts[0] == "delay")
    spec.kind = FaultSpec::Kind::delay;
  else if (parts[0] == "corrupt-checkpoint")
    spec.kind = FaultSpec::Kind::corrupt_checkpoint;
  else if (parts[0] == "nan")
    spec.kind = FaultSpec::Kind::nan;
  else if (parts[0] == "crash")
    spec.kind = FaultSpec::Kind::crash;
  else if (parts[0] == "hang")
    spec.kind = FaultSpec::Kind::hang;
  else if (parts[0] == "slow")
    spec.kind = FaultSpec::Kind::slow;
  else if (parts[0] == "exit")
    spec.kind = FaultSpec::Kind::exit;
  else if (parts[0] == "slow-checkpoint")
    spec.kind = FaultSpec::Kind::slow_checkpoint;
  else
    throw std::invalid_argument("fault '" + entry + "': '" + parts[0] +
                                "' is not a fault kind (drop, delay, corrupt-checkpoint, nan, "
                                "crash, hang, slow, exit, slow-checkpoint)");
  // Both name a checkpoint by its step, no stage.
  const bool of_checkpoint = spec.kind == FaultSpec::Kind::corrupt_checkpoint ||
                       spec.kind == FaultSpec::Kind::slow_checkpoint;
  const bool process = spec.kind == FaultSpec::Kind::exit;
  bool has_stage = false, has_ms = false, has_node = false, has_nth = false;
  std::set<std::string> seen;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("fault '" + entry + "': '" + parts[i] + "' is not FIELD=VALUE");
    const std::string field = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (!seen.insert(field).second)  // which one would count is a guess
      throw std::invalid_argument("fault '" + entry + "': field '" + field + "' is given twice");
    if (field == "nth" && process) {
      spec.nth = static_cast<int>(number(entry, field, value));
      if (spec.nth < 1) throw std::invalid_argument("fault '" + entry + "': nth=" + value + " counts from 1");
      has_nth = true;
    } else if (field == "node" && process) {
      spec.node = static_cast<int>(number(entry, field, value));
      has_node = true;
    } else if (field == "stage" && !of_checkpoint && !process) {
      spec.stage = static_cast<int>(number(entry, field, value));
      has_stage = true;
    } else if (field == "step") {
      spec.step = number(entry, field, value);
    } else if (field == "when" && spec.kind == FaultSpec::Kind::crash) {
      if (value != "start" && value != "optimizer")
        throw std::invalid_argument("fault '" + entry + "': when=" + value +
                                    " is not start or optimizer");
      spec.in_optimizer = value == "optimizer";
    } else if (field == "when" && process) {
      using When = FaultSpec::ExitWhen;
      if (value == "start")
        spec.exit_when = When::start;
      else if (value == "checkpoint")
        spec.exit_when = When::checkpoint;
      else if (value == "relayout")
        spec.exit_when = When::relayout;
      else if (value == "restore")
        spec.exit_when = When::restore;
      else
        throw std::invalid_argument("fault '" + entry + "': when=" + value +
                                    " is not start, checkpoint, relayout or restore");
    } else if (field == "micro_batch" && spec.kind == FaultSpec::Kind::drop) {
      spec.micro_batch = static_cast<int>(number(entry, field, value));
    } else if (field == "kind" && spec.kind == FaultSpec::Kind::drop) {
      if (value == "activation")
        spec.message_kind = static_cast<int>(PipeKind::activation);
      else if (value == "gradient")
        spec.message_kind = static_cast<int>(PipeKind::gradient);
      else
        throw std::invalid_argument("fault '" + entry + "': kind=" + value +
                                    " is not activation or gradient");
    } else if (field == "ms" && (spec.kind == FaultSpec::Kind::delay || spec.kind == FaultSpec::Kind::slow ||
                                 spec.kind == FaultSpec::Kind::slow_checkpoint)) {
      spec.delay = std::chrono::milliseconds(number(entry, field, value));
      has_ms = true;
    } else {
      throw std::invalid_argument("fault '" + entry + "': unknown field '" + field + "' for " +
                                  parts[0]);
    }
  }
  if (of_checkpoint) {
    if (!spec.step) throw std::invalid_argument("fault '" + entry + "': step=N is missing");
    if (*spec.step == 0)
      throw std::invalid_argument("fault '" + entry +
                                  "': step=0 names no checkpoint (the first is written after "
                                  "step 1 at the earliest)");
    if (spec.kind == FaultSpec::Kind::slow_checkpoint && !has_ms)
      throw std::invalid_argument("fault '" + entry + "': ms=D is missing");
    return spec;
  }
  if (process) {
    if (!has_node) throw std::invalid_argument("fault '" + entry + "': node=R is missing");
    // A move has no step of its own: the one it goes on from depends on when the loss
    // before it happened.
    const bool stepless =
        spec.exit_when == FaultSpec::ExitWhen::relayout || spec.exit_when == FaultSpec::ExitWhen::restore;
    if (stepless && spec.step)
      throw std::invalid_argument("fault '" + entry + "': when=" +
                                  (spec.exit_when == FaultSpec::ExitWhen::relayout ? "relayout" : "restore") +
                                  " takes no step=N (the node exits at the first such moment, whatever "
                                  "the step)");
    if (!stepless && !spec.step) throw std::invalid_argument("fault '" + entry + "': step=N is missing");
    if (has_nth && !stepless)
      throw std::invalid_argument("fault '" + entry + "': nth=N goes with when=relayout or when=restore");
    return spec;
  }
  if (!has_stage) throw std::invalid_argument("fault '" + entry + "': stage=S is missing");
  const bool timed = spec.kind == FaultSpec::Kind::delay || spec.kind == FaultSpec::Kind::slow;
  if (!timed && !spec.step)
    throw std::invalid_argument("fault '" + entry + "': step=N is missing");
  if (timed && !has_ms)
    throw std::invalid_argument("fault '" + entry + "': ms=D is missing");
  return spec;
}

std::vector<std::int64_t> corrupt_checkpoint_steps(const std::vector<FaultSpec>& specs) {
  std::vector<std::int64_t> steps;
  for (const auto& s : specs)
    if (s.kind == FaultSpec::Kind::corrupt_checkpoint) steps.push_back(*s.step);
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::map<std::int64_t, std::chrono::milliseconds> checkpoint_stalls(const std::vector<FaultSpec>& specs) {
  std::map<std::int64_t, std::chrono::milliseconds> stalls;
  for (const auto& s : specs)
    if (s.kind == FaultSpec::Kind::slow_checkpoint) stalls[*s.step] = std::max(stalls[*s.step], s.delay);
  return stalls;
}

ScriptedFaults::ScriptedFaults(std::vector<FaultSpec> specs) : specs_(std::move(specs)) {
  for (const auto& s : specs_)
    if (s.kind == FaultSpec::Kind::drop)
      drops_.push_back(std::make_unique<DropOneMessage>(s.stage, *s.step, s.micro_batch,
                                                        s.message_kind));
  for (const auto& s : specs_)
    if (s.kind == FaultSpec::Kind::nan || s.kind == FaultSpec::Kind::crash ||
        s.kind == FaultSpec::Kind::hang)
      one_shots_.push_back({s.kind, s.stage, *s.step, s.in_optimizer});
}

bool ScriptedFaults::fire(FaultSpec::Kind kind, int rank, std::int64_t step, bool in_optimizer) {
  for (auto& o : one_shots_)
    if (o.kind == kind && o.stage == rank && o.step == step && o.in_optimizer == in_optimizer &&
        !o.fired.exchange(true))
      return true;
  return false;
}

bool ScriptedFaults::exits_at(FaultSpec::ExitWhen when, std::int64_t step) const {
  if (!first_attempt_) return false;
  for (const auto& s : specs_)
    if (s.kind == FaultSpec::Kind::exit && s.exit_when == when && s.node == node_ && *s.step == step) return true;
  return false;
}

bool ScriptedFaults::exits_at_nth(FaultSpec::ExitWhen when, int nth) const {
  if (!first_attempt_) return false;
  for (const auto& s : specs_)
    if (s.kind == FaultSpec::Kind::exit && s.exit_when == when && s.node == node_ && s.nth == nth) return true;
  return false;
}

bool ScriptedFaults::exit_process(std::int64_t step) { return exits_at(FaultSpec::ExitWhen::start, step); }

bool ScriptedFaults::exit_in_shard_write(std::int64_t steps_done) {
  return exits_at(FaultSpec::ExitWhen::checkpoint, steps_done);
}

bool ScriptedFaults::exit_in_relayout() { return exits_at_nth(FaultSpec::ExitWhen::relayout, ++relayouts_); }

bool ScriptedFaults::exit_in_restore() { return exits_at_nth(FaultSpec::ExitWhen::restore, ++restores_); }

void die_by_injected_exit(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::fflush(stderr);
  std::raise(SIGKILL);
  std::abort();  // SIGKILL cannot be caught: not reached
}

bool ScriptedFaults::crash(int rank, std::int64_t step) {
  return fire(FaultSpec::Kind::crash, rank, step);
}

bool ScriptedFaults::crash_in_optimizer(int rank, std::int64_t step) {
  return fire(FaultSpec::Kind::crash, rank, step, /*in_optimizer=*/true);
}

bool ScriptedFaults::hang(int rank, std::int64_t step) {
  return fire(FaultSpec::Kind::hang, rank, step);
}

std::chrono::milliseconds ScriptedFaults::action_delay(int rank, std::int64_t step,
                                                       Phase phase) {
  std::chrono::milliseconds total{0};
  if (phase != Phase::train) return total;
  for (const auto& s : specs_)
    if (s.kind == FaultSpec::Kind::slow && s.stage == rank && (!s.step || *s.step == step))
      total += s.delay;
  return total;
}

bool ScriptedFaults::poison(const PipeMessage& message, int from_rank) {
  if (message.phase != Phase::train) return false;
  return fire(FaultSpec::Kind::nan, from_rank, message.step);
}

bool ScriptedFaults::drop(const PipeMessage& message, int from_rank) {
  for (const auto& s : specs_)
    if (s.kind == FaultSpec::Kind::delay && s.stage == from_rank &&
        (!s.step || *s.step == message.step))
      std::this_thread::sleep_for(s.delay);  // on the sender's thread: the message leaves late
  bool lost = false;
  for (const auto& d : drops_) lost = d->drop(message, from_rank) || lost;
  return lost;
}

}  // namespace conveyor
