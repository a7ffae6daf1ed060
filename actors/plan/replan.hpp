#pragma once
// Elastic re-planning (issue 44): the layout a job runs on with the nodes it has now. When
// a lost node's replacement does not join within fault.rejoin_timeout_s, the coordinator
// asks replan() for a smaller layout over the survivors' devices (fault.shrink); when a
// node joins later, it asks again with the larger set of nodes (fault.grow says when) and
// gets the configured layout back, or the largest one the nodes present can hold. One
// function serves both directions: a layout is a function of the configured one and the
// nodes present, never of the path the job took to get there.
//
// What must hold:
// - never more than configured: replicas <= parallel.data, stages <= pipeline.stages;
// - the global batch stays: the step's micro-batches M are shared by the R' replicas left,
//   each taking whole configured replicas' shares of M/R (configured_shares: contiguous,
//   the first R mod R' replicas one more, so their counts may differ and each then runs
//   a schedule of its own), each global index is computed once, and since the sampler is
//   a pure function of (seed, step, global micro-batch) no sample is skipped or seen twice;
// - the model is cut by pipeline.partition: uniform (sched::uniform_partition), auto
//   (sched::auto_partition over the costs the job started with) or, for an explicit list
//   written for another stage count, the uniform split with a warning; the schedule and the
//   placement come from make_pipeline_layout, as at start: no second partitioner here;
// - stage actors go to the nodes present in rank order, each node taking as many as it
//   has devices, in actor order (replica-major), so a replica's pipeline edges stay inside
//   a node where its devices allow, as at launch.
// Pure logic: no CAF, no clock; deterministic.
#include <optional>
#include <string>
#include <vector>

#include "actors/plan/partition_mode.hpp"
#include "actors/plan/pipeline_layout.hpp"
#include "actors/plan/recovery_policy.hpp"
#include "actors/plan/replica_placement.hpp"
#include "actors/plan/schedule/partitioner.hpp"
#include "kernels/tensor/device.hpp"

namespace conveyor {

/// What the config asks for, as the job started with it.
struct ConfiguredLayout {
  std::string schedule = "1f1b";  // pipeline.schedule
  int virtual_stages = 1;         // pipeline.virtual_stages
  int stages = 1;                 // pipeline.stages (P)
  int replicas = 1;               // parallel.data (R)
  int micro_batches = 1;          // pipeline.micro_batches: the step's global count (M)
  int layers = 1;                 // model.layers
  PartitionMode partition = PartitionMode::uniform;  // pipeline.partition's mode
  /// The partition the job started with, in half blocks per model stage of P stages (the
  /// config's list, or what uniform or auto chose: JobPlan's placement). A layout of P
  /// stages keeps it, whatever the mode: dropping a replica moves no weights.
  std::vector<int> start_halves;
  /// automatic: the layer costs the job's start partitioned with (partition_choice);
  /// without them auto falls back to uniform, with a warning.
  std::optional<sched::ModelCosts> costs;
};

/// A node present, with the devices its stage actors run on (one actor per device; CPU
/// stages: one Device::cpu() per stage actor the node ran).
struct LiveNode {
  int node = 0;  // node rank
  std::vector<Device> devices;
};

/// Where one stage actor of the new layout runs.
struct ActorSeat {
  int node = 0;
  Device device;
  bool operator==(const ActorSeat&) const = default;
};

/// A layout the job can run: replicas × stages stage actors.
struct ElasticLayout {
  int replicas = 1;
  int stages = 1;
  PartitionMode partition = PartitionMode::uniform;  // how the model was cut this time
  std::vector<int> halves_per_model_stage;
  PipelineLayout pipeline;  // one replica's schedule and placement (rank devices: replica 0's)
  std::vector<ActorSeat> seats;          // per stage actor, replica-major (ReplicaLayout)
  std::vector<MicroBatchShare> shares;   // per replica: its global micro-batches of a step
  // Per replica where their micro-batch counts differ: its own schedule (pipeline's is
  // replica 0's, the largest); empty: every replica runs pipeline.schedule.
  std::vector<sched::Schedule> replica_schedules;

  ReplicaLayout replica_layout() const { return ReplicaLayout{replicas, stages}; }
  /// The nodes that run a stage actor, ascending.
  std::vector<int> nodes() const;
};

/// replan's answer: a layout, or why there is none.
struct Replan {
  std::optional<ElasticLayout> layout;
  /// One line: what was chosen and why ("2 replicas × 2 stages on nodes 0, 1, 2: …"), or
  /// why no layout fits ("1 device left, but one replica of 2 stages needs 2 (fault.shrink
  /// replicas keeps the pipeline)").
  std::string reason;
  /// For the log, each one line: e.g. the explicit partition that became uniform.
  std::vector<std::string> warnings;

  bool ok() const { return layout.has_value(); }
};

/// The largest layout within `configured` that `nodes` can hold, as `policy` says:
///   replicas   keep P stages, drop whole replicas: the most R' <= R with R'·P devices;
///   stages     keep R replicas, shrink the pipeline: the most P' <= P with R·P' devices
///              and a valid schedule of P' stages over M/R micro-batches and the layers;
///   automatic  replicas when R > 1 and one replica still fits, else one replica (or R
///              when R == 1) with as many stages as fit.
/// With every configured device present it is the configured layout.
/// REQUIRES: `configured` valid as the job started with it (validated config).
Replan replan(const ConfiguredLayout& configured, const std::vector<LiveNode>& nodes,
              ShrinkPolicy policy);

/// Whether a node that joined is taken in at this boundary (fault.grow): at_step at any
/// step boundary, at_checkpoint only at one where a checkpoint is taken, never not at all.
bool grow_now(GrowPolicy policy, bool checkpoint_boundary);

/// "2 replicas × 3 stages": for logs and reasons.
std::string describe_shape(int replicas, int stages);

}  // namespace conveyor
