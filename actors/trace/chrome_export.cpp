#include "actors/trace/chrome_export.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <set>

#include "actors/plan/schedule/action.hpp"

namespace conveyor::trace {
namespace {

int tid_of(const Record& r) { return (r.stage + 1) * 4 + static_cast<int>(stream_of(r.kind)); }

std::string who(int stage) {
  return stage == kCoordinator ? "coordinator" : fmt::format("stage {}", stage);
}

std::string action_text(const Record& r) {
  if (r.action == kNoAction) return "";
  std::string s(sched::kind_name(static_cast<sched::ActionKind>(r.action)));
  if (r.micro_batch >= 0) s += std::to_string(r.micro_batch);
  if (r.chunk != 0) s += fmt::format("c{}", r.chunk);
  return s;
}

double us(std::int64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

std::string event_name(const Record& r) {
  switch (r.kind) {
    case RecordKind::action: return action_text(r);
    case RecordKind::pipe_send: return fmt::format("send {} → {}", action_text(r), who(r.peer));
    case RecordKind::pipe_receive: return fmt::format("receive {} ← {}", action_text(r), who(r.peer));
    case RecordKind::plan_send: return fmt::format("plan → {}", who(r.peer));
    case RecordKind::plan_receive: return "plan";
    case RecordKind::report_send: return "report";
    case RecordKind::report_receive: return fmt::format("report ← {}", who(r.peer));
    case RecordKind::optimizer_send: return fmt::format("optimizer step → {}", who(r.peer));
    case RecordKind::optimizer_receive: return "optimizer step";
    case RecordKind::done_send: return "optimizer done";
    case RecordKind::done_receive: return fmt::format("optimizer done ← {}", who(r.peer));
    case RecordKind::step_begin: return fmt::format("{}step {}", r.phase ? "eval " : "", r.step);
    // The words of the replan's log line (actors/plan/replan_event.hpp), so both are found alike.
    case RecordKind::replan: return fmt::format("replan: node {} lost for good", r.peer);
    case RecordKind::joined: return fmt::format("joined: node {} taken in", r.peer);
  }
  return "?";
}

nlohmann::json chrome_trace(const TraceSet& set) {
  using nlohmann::json;
  json events = json::array();
  const std::int64_t t0 = set.t0();
  for (std::size_t h = 0; h < set.hosts.size(); ++h) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", h}, {"tid", 0},
                      {"args", {{"name", fmt::format("host {} (process {})", set.hosts[h].host,
                                                     set.hosts[h].process_index)}}}});
  }
  static const char* kStreams[] = {"compute", "send", "receive"};  // by Stream
  std::set<std::pair<std::uint32_t, int>> named;
  for (std::size_t i = 0; i < set.records.size(); ++i) {
    const Record& r = set.records[i];
    const std::uint32_t pid = set.host_of[i];
    const int tid = tid_of(r);
    if (named.emplace(pid, tid).second) {
      const char* stream = kStreams[static_cast<int>(stream_of(r.kind))];
      std::string name = r.stage == kCoordinator ? fmt::format("coordinator {}", stream)
                                                 : fmt::format("stage {} {}", r.stage, stream);
      // With replicas, stage actors are replica-major: say which pipeline each one is in.
      // (A track spans the run: after a re-layout the same actor may be another replica's.)
      if (r.stage != kCoordinator && set.plans && set.relayouts.empty() && set.plans->replicas > 1)
        name += fmt::format(" (replica {}, rank {})", set.plans->layout().replica_of(r.stage),
                            set.plans->layout().stage_of(r.stage));
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid},
                        {"args", {{"name", name}}}});
      events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid},
                        {"args", {{"sort_index", tid}}}});
    }
    if (r.kind == RecordKind::step_begin) {
      events.push_back({{"ph", "i"}, {"s", "g"}, {"name", event_name(r)}, {"pid", pid},
                        {"tid", tid}, {"ts", us(r.start_ns - t0)}});
      continue;
    }
    json args = {{"id", fmt::format("{:#x}", r.id)}, {"step", r.step}, {"round", r.round}};
    if (r.cause) args["cause"] = fmt::format("{:#x}", r.cause);
    if (r.kind == RecordKind::replan || r.kind == RecordKind::joined) args["node"] = r.peer;
    if (r.micro_batch >= 0) args["micro_batch"] = r.micro_batch;
    if (r.bytes) args["bytes"] = r.bytes;
    if (r.phase) args["phase"] = "eval";
    events.push_back({{"ph", "X"}, {"name", event_name(r)}, {"cat", record_kind_name(r.kind)},
                      {"pid", pid}, {"tid", tid}, {"ts", us(r.start_ns - t0)},
                      // Zero-length messages get 0.1 µs, so a flow's end has a slice to bind to.
                      {"dur", std::max(us(r.end_ns - r.start_ns), 0.1)}, {"args", std::move(args)}});
    // A flow from the send to this receive, when both ends are in the trace.
    if (is_receive(r.kind) && r.cause) {
      const auto s = set.cause_of(r);
      if (s < 0 || !is_send(set.records[static_cast<std::size_t>(s)].kind)) continue;
      const Record& send = set.records[static_cast<std::size_t>(s)];
      const std::string flow_id = fmt::format("{:#x}", send.id);
      events.push_back({{"ph", "s"}, {"name", "message"}, {"cat", "message"}, {"id", flow_id},
                        {"pid", set.host_of[static_cast<std::size_t>(s)]}, {"tid", tid_of(send)},
                        {"ts", us(send.start_ns - t0)}});
      events.push_back({{"ph", "f"}, {"bp", "e"}, {"name", "message"}, {"cat", "message"},
                        {"id", flow_id}, {"pid", pid}, {"tid", tid}, {"ts", us(r.start_ns - t0)}});
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace conveyor::trace
