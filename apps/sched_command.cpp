// conveyor sched --schedule NAME --stages P --micro-batches M [--virtual-stages V]
//                [--durations F,B,I,W] [--comm LATENCY_US,GBPS [--message-bytes N]]
//                [--format grid|csv|json]
// conveyor sched CONFIG [--set KEY=VALUE]... [--comm ...] [--format ...]
//
// Prints a schedule and its dry run (simulator.hpp): the ranks × slots grid, the makespan,
// the bubble overall and per rank, and peak activations. With a CONFIG it shows the plan
// `conveyor train CONFIG` would run: the schedule, the partition (pipeline.partition) and
// the placement, simulated with layer costs from a short CPU profile (devices.kind: cpu) or
// the cost model (any other device; no GPU is needed or touched).
// --format json prints only the JSON document on stdout, numbers unrounded. A makespan of 0
// (every duration 0) has bubble 0 in every format: no rank waits.
#include <cmath>
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/plan/pipeline_layout.hpp"
#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/csv.hpp"
#include "actors/plan/schedule/grid.hpp"
#include "actors/plan/schedule/json.hpp"
#include "actors/plan/schedule/partitioner.hpp"
#include "actors/plan/schedule/simulator.hpp"
#include "apps/commands.hpp"
#include "apps/config/config_limits.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/config/config_path.hpp"
#include "apps/train/partition_choice.hpp"
#include "apps/train/plan_json.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

constexpr double kDefaultMessageBytes = 1024.0 * 1024.0;  // 1 MiB

struct SchedOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::string schedule;
  int stages = 0;
  int micro_batches = 0;
  int virtual_stages = 1;
  std::string durations = "1,2,1,1";
  std::string comm;
  double message_bytes = kDefaultMessageBytes;
  std::string format = "grid";
  // Which options the command line gave (set once parsing is done).
  CLI::Option* config_opt = nullptr;
  CLI::Option* set_opt = nullptr;
  CLI::Option* schedule_opt = nullptr;
  CLI::Option* stages_opt = nullptr;
  CLI::Option* micro_batches_opt = nullptr;
  CLI::Option* virtual_stages_opt = nullptr;
  CLI::Option* durations_opt = nullptr;
  CLI::Option* comm_opt = nullptr;
  CLI::Option* message_bytes_opt = nullptr;
};

// What is printed, in every format.
struct Report {
  sched::Schedule schedule;  // as printed: with SEND/RECV when communication is costed
  sched::SimResult sim;
  std::string unit = "us";         // of the durations and the makespan
  std::vector<std::string> notes;  // lines above the grid (text formats)
  std::vector<std::string> after;  // lines below the metrics (text formats)
  nlohmann::json extra = nlohmann::json::object();  // merged into the JSON document
};

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return std::string(s.substr(first, last - first + 1));
}

// "1,2,1,1" → numbers; exactly `names.size()` of them, each finite and >= 0. `expected`
// says what the flag wants, for the message (e.g. "F,B,I,W: 4 comma-separated numbers >= 0").
std::vector<double> parse_numbers(const std::string& flag, const std::string& text,
                                  const std::vector<std::string>& names, const std::string& expected,
                                  const std::string& example) {
  const auto bad = [&](const std::string& why) -> InputError {
    return InputError(flag + " '" + text + "': " + why + "; expected " + expected + " (e.g. " + flag + " " +
                      example + ")");
  };
  std::vector<double> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = text.find(',', start);
    const std::string cell = trim(std::string_view(text).substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    double v = 0.0;
    const auto r = std::from_chars(cell.data(), cell.data() + cell.size(), v);
    if (cell.empty() || r.ec != std::errc{} || r.ptr != cell.data() + cell.size()) {
      throw bad("'" + cell + "' is not a number");
    }
    if (!(v >= 0.0) || v > 1e300) throw bad(names[std::min(out.size(), names.size() - 1)] + " = " + cell + " is out of range");
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() != names.size())
    throw bad("got " + std::to_string(out.size()) + (out.size() == 1 ? " number" : " numbers"));
  return out;
}

std::string fmt_num(double v) { return fmt::format("{:.6g}", v); }

// A duration in µs, in the unit that keeps it short: "33 us", "96.3765 ms", "2.40852 s".
std::string fmt_time(double us) {
  if (us >= 1e7) return fmt_num(us / 1e6) + " s";
  if (us >= 1e4) return fmt_num(us / 1e3) + " ms";
  return fmt_num(us) + " us";
}

std::string rank_list(const std::vector<double>& v, bool as_percent) {
  std::string s;
  for (std::size_t r = 0; r < v.size(); ++r) {
    s += (r ? ", " : "") + fmt::format("rank {}: ", r) +
         (as_percent ? fmt::format("{:.2f}%", 100.0 * v[r]) : fmt_num(v[r]));
  }
  return s;
}

std::string rank_list(const std::vector<int>& v) {
  std::string s;
  for (std::size_t r = 0; r < v.size(); ++r) s += (r ? ", " : "") + fmt::format("rank {}: {}", r, v[r]);
  return s;
}

// Communication from --comm and --message-bytes; nullopt when free.
struct Comm {
  double latency_us = 0.0;
  double bandwidth_gb_s = 0.0;
  double message_bytes = 0.0;
  double message_us() const { return latency_us + message_bytes / (bandwidth_gb_s * 1e3); }
};

std::optional<Comm> parse_comm(const SchedOptions& o) {
  if (o.message_bytes_opt->count() && !o.comm_opt->count()) {
    throw InputError("--message-bytes: only used with --comm LATENCY_US,GBPS (communication is free without it)");
  }
  if (!o.comm_opt->count()) return std::nullopt;
  // A bandwidth of 0 would make every message take forever; free communication is
  // asked for by leaving --comm out, which the message says.
  const std::string expected =
      "LATENCY_US,GBPS: a latency in us >= 0 and a bandwidth in GB/s > 0, or no --comm for free communication";
  const auto v = parse_numbers("--comm", o.comm, {"LATENCY_US", "GBPS"}, expected, "5,25");
  if (!(v[1] > 0))
    throw InputError("--comm '" + o.comm + "': GBPS (the second number, the bandwidth in GB/s) is " + fmt_num(v[1]) +
                     ", must be > 0; expected " + expected + " (e.g. --comm 5,25)");
  if (!(o.message_bytes >= 0) || !std::isfinite(o.message_bytes)) {
    throw InputError("--message-bytes " + fmt_num(o.message_bytes) + ": must be a finite number >= 0");
  }
  const Comm comm{v[0], v[1], o.message_bytes};
  // Each is finite, their quotient need not be (1e300 bytes at 1e-300 GB/s).
  if (!std::isfinite(comm.message_us()))
    throw InputError(fmt::format("--comm '{}' with --message-bytes {}: a message would take {} us (not finite)",
                                 o.comm, fmt_num(o.message_bytes), comm.message_us()));
  return comm;
}

std::string comm_note(const std::optional<Comm>& comm, bool bytes_given) {
  if (!comm) return "communication: free (give --comm LATENCY_US,GBPS to cost it)";
  return fmt::format("communication: {} us latency + {} bytes at {} GB/s = {} us per message ({})",
                     fmt_num(comm->latency_us), comm->message_bytes, fmt_num(comm->bandwidth_gb_s),
                     fmt_num(comm->message_us()),
                     bytes_given ? "message size from --message-bytes"
                                 : "message size: the default 1 MiB; set it with --message-bytes");
}

nlohmann::json comm_json(const std::optional<Comm>& comm) {
  if (!comm) return nullptr;
  return {{"latency_us", comm->latency_us},
          {"bandwidth_gb_s", comm->bandwidth_gb_s},
          {"message_bytes", comm->message_bytes},
          {"message_us", comm->message_us()}};
}

// validate_spec names the config keys; on the command line the flags are meant.
std::string as_flags(std::string msg) {
  const std::pair<const char*, const char*> names[] = {{"pipeline.micro_batches", "--micro-batches"},
                                                       {"pipeline.virtual_stages", "--virtual-stages"},
                                                       {"pipeline.stages", "--stages"}};
  for (const auto& [key, flag] : names) {
    for (std::size_t at; (at = msg.find(key)) != std::string::npos;) msg.replace(at, std::string_view(key).size(), flag);
  }
  return msg;
}

Report flag_report(const SchedOptions& o) {
  if (o.set_opt->count()) throw InputError("--set: only used with a CONFIG (conveyor sched CONFIG --set KEY=VALUE)");
  if (!o.schedule_opt->count()) {
    throw InputError(
        "sched: give --schedule NAME --stages P --micro-batches M, or a CONFIG file (see conveyor sched --help)");
  }
  const auto& names = sched::schedule_names();
  if (std::find(names.begin(), names.end(), o.schedule) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw InputError("--schedule '" + o.schedule + "': unknown schedule (known: " + known + ")");
  }
  if (!o.stages_opt->count()) throw InputError("--stages P is required with --schedule");
  if (!o.micro_batches_opt->count()) throw InputError("--micro-batches M is required with --schedule");
  if (o.stages < 1) throw InputError("--stages " + std::to_string(o.stages) + ": must be >= 1");
  if (o.micro_batches < 1 || o.micro_batches > kMaxMicroBatches)
    throw InputError("--micro-batches " + std::to_string(o.micro_batches) + ": must be in 1.." +
                     std::to_string(kMaxMicroBatches) + " (as pipeline.micro_batches)");
  if (o.stages > 65536)
    throw InputError("--stages " + std::to_string(o.stages) + ": must be <= 65536");
  if (o.virtual_stages < 1) {
    throw InputError("--virtual-stages " + std::to_string(o.virtual_stages) + ": must be >= 1");
  }
  const auto d = parse_numbers("--durations", o.durations, {"F", "B", "I", "W"},
                               "F,B,I,W as 4 comma-separated numbers >= 0", "1,2,1,1");
  const auto comm = parse_comm(o);

  const sched::ScheduleSpec spec{o.schedule, o.stages, o.micro_batches, o.virtual_stages};
  sched::Schedule schedule;
  try {
    schedule = sched::make_schedule(spec);
  } catch (const InputError& e) {
    throw InputError(as_flags(e.what()));
  }
  sched::SimCosts costs = sched::SimCosts::uniform(d[0], d[1], d[2], d[3]);
  Report report;
  if (comm) {
    costs.latency_us = comm->latency_us;
    costs.bandwidth_gb_s = comm->bandwidth_gb_s;
    costs.message_bytes = comm->message_bytes;
    schedule = sched::add_communication(schedule);
  }
  report.sim = sched::simulate(schedule, costs);
  report.schedule = std::move(schedule);
  const int chunks = report.schedule.chunks_per_rank();
  report.notes.push_back(fmt::format("{}: {} ranks, {} micro-batches, {} chunk{} per rank", spec.name, spec.stages,
                                     spec.micro_batches, chunks, chunks > 1 ? "s" : ""));
  report.notes.push_back(fmt::format("durations per action{}: F {} us, B {} us, I {} us, W {} us",
                                     chunks > 1 ? " (per chunk)" : "", fmt_num(d[0]), fmt_num(d[1]),
                                     fmt_num(d[2]), fmt_num(d[3])));
  report.notes.push_back(comm_note(comm, o.message_bytes_opt->count() > 0));
  report.extra["durations"] = {{"f", d[0]}, {"b", d[1]}, {"i", d[2]}, {"w", d[3]}};
  report.extra["communication"] = comm_json(comm);
  return report;
}

nlohmann::json unit_json(const std::string& name, const sched::UnitCost& u) {
  return {{"unit", name},          {"f_us", u.f_us},
          {"i_us", u.i_us},        {"w_us", u.w_us},
          {"activation_bytes", u.activation_bytes}, {"param_bytes", u.param_bytes}};
}

std::string unit_note(const std::string& name, const sched::UnitCost& u) {
  return fmt::format("  {:<9} F {} us, I {} us, W {} us; {:.4g} MiB of activations per micro-batch, {:.4g} MiB "
                     "of parameters and optimizer state",
                     name, fmt_num(u.f_us), fmt_num(u.i_us), fmt_num(u.w_us), u.activation_bytes / (1 << 20),
                     u.param_bytes / (1 << 20));
}

Report config_report(const SchedOptions& o) {
  // Each flag's config key, for the hint (--durations has none: the config's costs serve).
  const std::pair<const CLI::Option*, const char*> flags[] = {
      {o.schedule_opt, "pipeline.schedule=zb-h1"},       {o.stages_opt, "pipeline.stages=2"},
      {o.micro_batches_opt, "pipeline.micro_batches=8"}, {o.virtual_stages_opt, "pipeline.virtual_stages=2"},
      {o.durations_opt, nullptr}};
  for (const auto& [flag, key] : flags) {
    if (!flag->count()) continue;
    if (!key) throw InputError(flag->get_name() + ": not used with a CONFIG (its costs come from the config's model)");
    throw InputError(flag->get_name() + ": not used with a CONFIG; change the config with --set (e.g. --set " + key +
                     ") or drop CONFIG");
  }
  const auto comm = parse_comm(o);
  const RunConfig config = load_run_config(o.config, o.overrides);
  const sched::ModelCosts costs = planning_costs(config);
  const PartitionChoice choice = choose_partition(config, &costs);
  const auto spec = schedule_spec_of(config);
  const int layers = static_cast<int>(config.model.layers);
  PipelineLayout layout = make_pipeline_layout(spec, layers, choice.halves_per_stage);
  const double message_us = comm ? comm->message_us() : 0.0;
  const sched::PartitionEval eval = sched::evaluate_partition(layout.schedule, costs, choice.halves_per_stage, message_us);
  const sched::PartitionEval uniform = sched::evaluate_partition(
      layout.schedule, costs, sched::uniform_partition(layers, layout.schedule.model_stages()), message_us);

  Report report;
  report.sim = eval.sim;
  report.schedule = comm ? sched::add_communication(layout.schedule) : layout.schedule;
  const int chunks = layout.schedule.chunks_per_rank();
  report.notes.push_back(fmt::format(
      "{}: {} on {} {} stage{} x {} chunk{}, {} micro-batches of {} x {} tokens; GPT {} layers, d_model {}, vocab {}",
      o.config, spec.name, spec.stages, enum_name(config.devices.kind), spec.stages > 1 ? "s" : "", chunks, chunks > 1 ? "s" : "",
      spec.micro_batches, config.pipeline.micro_batch_size, config.model.seq_len, layers, config.model.d_model,
      config.model.vocab));
  report.notes.push_back("partition: " + choice.reason);
  report.notes.push_back("layer costs per micro-batch, " + costs.source + ":");
  report.notes.push_back(unit_note("embedding", costs.units.front()));
  report.notes.push_back(unit_note("block attention half", costs.units[1]));
  report.notes.push_back(unit_note("block mlp half", costs.units[2]));
  report.notes.push_back(unit_note("head", costs.units.back()));
  report.notes.push_back(comm_note(comm, o.message_bytes_opt->count() > 0));
  report.notes.push_back("placement:");
  for (const auto& rank : layout.placement.ranks) {
    std::string line = fmt::format("  rank {} ({}):", rank.rank, enum_name(config.devices.kind));
    for (const auto& c : rank.chunks) {
      std::string names;
      for (const auto& n : slice_layer_names(c.slice)) names += (names.empty() ? "" : ", ") + n;
      line += (chunks > 1 ? fmt::format(" [chunk {} = model stage {}: ", c.chunk, c.model_stage) : std::string(" ")) +
              names + (chunks > 1 ? "]" : "");
    }
    report.notes.push_back(line);
  }
  std::string stage_costs;
  for (std::size_t s = 0; s < eval.stage_f_us.size(); ++s) {
    stage_costs += (s ? ", " : "") + fmt_num(eval.stage_f_us[s] + eval.stage_i_us[s] + eval.stage_w_us[s]);
  }
  report.notes.push_back("F+I+W per model stage (us): " + stage_costs);
  if (choice.halves_per_stage != uniform.halves_per_stage) {
    report.after.push_back(fmt::format("uniform {} would take {} (bubble {:.2f}%)",
                                       sched::format_partition(uniform.halves_per_stage), fmt_time(uniform.step_us()),
                                       100.0 * uniform.sim.bubble));
  }
  std::optional<sched::PartitionResult> suggestion;
  if (choice.mode != PartitionMode::automatic) {
    sched::PartitionRequest request{spec, costs, std::nullopt, message_us};
    suggestion = sched::auto_partition(request);
    report.after.push_back(fmt::format("pipeline.partition: auto would choose {} ({})",
                                       sched::format_partition(suggestion->halves_per_stage),
                                       fmt_time(suggestion->chosen.step_us())));
  }

  JobPlan plan;  // what the config implies, with no job running
  plan.model = config.model;
  plan.schedule = layout.schedule;
  plan.placement = layout.placement;
  plan.partition = std::string(enum_name(choice.mode));
  plan.partition_reason = choice.reason;
  nlohmann::json units = nlohmann::json::array();
  units.push_back(unit_json("embedding", costs.units.front()));
  for (int u = 1; u <= costs.halves(); ++u)
    units.push_back(unit_json("block " + std::to_string((u - 1) / 2) + (u % 2 ? " attention" : " mlp"), costs.units[u]));
  units.push_back(unit_json("head", costs.units.back()));
  auto& x = report.extra;
  x["config"] = o.config;
  x["partition"] = choice.mode;  // by name (named_enum.hpp)
  x["blocks_per_stage"] = partition_json(choice.halves_per_stage);
  x["partition_reason"] = choice.reason;
  x["costs"] = {{"source", costs.source}, {"units", units}};
  x["stage_costs"] = {{"f_us", eval.stage_f_us}, {"i_us", eval.stage_i_us}, {"w_us", eval.stage_w_us}};
  x["rank_memory_bytes"] = eval.rank_memory_bytes;
  x["uniform"] = {{"blocks_per_stage", partition_json(uniform.halves_per_stage)}, {"makespan", uniform.step_us()},
                  {"bubble", uniform.sim.bubble}};
  if (suggestion) {
    x["auto"] = {{"blocks_per_stage", partition_json(suggestion->halves_per_stage)},
                 {"makespan", suggestion->chosen.step_us()},
                 {"bubble", suggestion->chosen.sim.bubble}};
  }
  x["communication"] = comm_json(comm);
  x["plan"] = plan_json(plan);
  return report;
}

std::vector<std::string> metric_lines(const Report& r) {
  const auto& s = r.sim;
  // idle / (ranks x makespan) is 0/0 when every duration is 0: the simulator counts it
  // as no bubble, and the line says why rather than show a share of nothing.
  const std::string bubble =
      s.makespan > 0 ? fmt::format("{} ({:.2f}% of ranks x makespan idle)", fmt_num(s.bubble), 100.0 * s.bubble)
                     : "0 (the makespan is 0: every action takes 0 us, so no rank waits)";
  std::vector<std::string> lines{
      "makespan          " + fmt_time(s.makespan),
      "bubble            " + bubble,
      "stage bubble      " + rank_list(s.stage_bubble, true),
      "peak activations  " + rank_list(s.peak_activations) + " (micro-batches in flight)"};
  if (s.deadlock) lines.push_back(*s.deadlock);
  return lines;
}

void print_text(const Report& r) {
  for (const auto& n : r.notes) fmt::print("{}\n", n);
  fmt::print("\n{}\n\n", sched::render_grid(r.schedule));
  for (const auto& l : metric_lines(r)) fmt::print("{}\n", l);
  for (const auto& l : r.after) fmt::print("{}\n", l);
}

void print_csv(const Report& r) {
  for (const auto& n : r.notes) fmt::print("# {}\n", n);
  for (const auto& l : metric_lines(r)) fmt::print("# {}\n", l);
  for (const auto& l : r.after) fmt::print("# {}\n", l);
  fmt::print("{}", sched::to_csv(r.schedule));
}

void print_json(const Report& r) {
  nlohmann::json ranks;
  sched::to_json(ranks, r.schedule);
  nlohmann::json doc = {{"name", r.schedule.spec.name},
                        {"stages", r.schedule.spec.stages},
                        {"micro_batches", r.schedule.spec.micro_batches},
                        {"virtual_stages", r.schedule.chunks_per_rank()},
                        {"schedule", ranks.at("ranks")},
                        {"makespan", r.sim.makespan},
                        {"bubble", r.sim.bubble},
                        {"stage_bubble", r.sim.stage_bubble},
                        {"peak_activations", r.sim.peak_activations},
                        {"busy", r.sim.busy},
                        {"idle", r.sim.idle},
                        {"deadlock", r.sim.deadlock ? nlohmann::json(*r.sim.deadlock) : nlohmann::json(nullptr)},
                        {"time_unit", r.unit}};
  doc.update(r.extra);
  fmt::print("{}\n", doc.dump(2));
}

void run_sched(const SchedOptions& o) {
  const Report report = o.config_opt->count() ? config_report(o) : flag_report(o);
  if (o.format == "json") {
    print_json(report);
  } else if (o.format == "csv") {
    print_csv(report);
  } else {
    print_text(report);
  }
}

}  // namespace

void add_sched_command(CLI::App& app) {
  auto opt = std::make_shared<SchedOptions>();
  auto* cmd = app.add_subcommand(
      "sched",
      "Show a pipeline schedule and its simulated cost, or the plan a CONFIG would train with "
      "(schedule, partition, placement); needs no GPU");
  opt->config_opt = cmd->add_option("config", opt->config,
                                    "YAML config: show the plan `conveyor train CONFIG` would run, simulated with "
                                    "layer costs from a short CPU profile (devices.kind cpu) or the cost model")
                        ->check(config_path_check("a schedule from --schedule, --stages and --micro-batches"));
  opt->set_opt = cmd->add_option("--set", opt->overrides,
                                 "With CONFIG: override a key with a YAML value, e.g. --set pipeline.partition=auto "
                                 "(repeatable)");
  opt->schedule_opt = cmd->add_option("--schedule", opt->schedule, "Schedule: gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv");
  opt->stages_opt = cmd->add_option("--stages", opt->stages, "Pipeline ranks P (>= 1)");
  opt->micro_batches_opt = cmd->add_option("--micro-batches", opt->micro_batches, "Micro-batches M per step (>= 1)");
  opt->virtual_stages_opt = cmd->add_option("--virtual-stages", opt->virtual_stages,
                                            "Chunks per rank V (interleaved-1f1b: >= 2)")
                                ->capture_default_str();
  opt->durations_opt = cmd->add_option("--durations", opt->durations,
                                       "F,B,I,W: µs of one forward, full backward, input backward and weight "
                                       "backward (per chunk)")
                           ->capture_default_str();
  opt->comm_opt = cmd->add_option("--comm", opt->comm,
                                  "LATENCY_US,GBPS: cost each message between ranks latency + bytes / bandwidth "
                                  "(free when not given)");
  opt->message_bytes_opt = cmd->add_option("--message-bytes", opt->message_bytes,
                                           "Bytes per activation or gradient message, with --comm")
                               ->capture_default_str();
  cmd->add_option("--format", opt->format, "grid (text), csv (the schedule with # comments) or json (stdout: JSON only)")
      ->check(CLI::IsMember({"grid", "csv", "json"}))
      ->capture_default_str();
  cmd->callback([opt] { run_sched(*opt); });
}

}  // namespace conveyor
