#pragma once
// Where this process sits in a multi-host job: how many nodes (one conveyor process
// each), which one this is, and where node 0's rendezvous store listens. Read from the
// command line or from the environment of the launcher that started the process, first
// match wins:
//
//   source     when                        nnodes                node_rank       rdzv host                       rdzv port
//   flags      any of --nnodes/--node-rank/--rdzv given (then --nnodes and --node-rank both; --rdzv HOST:PORT when nnodes > 1)
//   torchrun   RANK or WORLD_SIZE set      WORLD_SIZE            RANK            MASTER_ADDR                     MASTER_PORT
//   slurm      SLURM_PROCID set            SLURM_NNODES, else    SLURM_PROCID    MASTER_ADDR, else the first      MASTER_PORT
//                                          SLURM_NTASKS                          host of SLURM_JOB_NODELIST
//                                                                                (else of SLURM_NODELIST)
//   openmpi    OMPI_COMM_WORLD_RANK or     OMPI_COMM_WORLD_SIZE  ..._RANK        MASTER_ADDR
//              ..._SIZE set (both needed)
//   default    none of the above           1                     0               127.0.0.1                       29400
//
// A missing port is 29400; a missing host is 127.0.0.1 for a single node and an error
// otherwise. local_rank comes from LOCAL_RANK, SLURM_LOCALID or OMPI_COMM_WORLD_LOCAL_RANK
// (0 from flags). Every bad value is an InputError naming the flag or variable and the
// value. Pure: the environment is a function, so tests pass a map.
#include <functional>
#include <optional>
#include <string>

namespace conveyor {

inline constexpr int kDefaultRdzvPort = 29400;

/// The launch flags as typed on the command line, unparsed (absent when not given), so
/// that resolve_launch() checks them with the same messages as the environment.
struct LaunchFlags {
  std::optional<std::string> nnodes;     // --nnodes N
  std::optional<std::string> node_rank;  // --node-rank R
  std::optional<std::string> rdzv;       // --rdzv HOST:PORT ([v6::addr]:PORT for IPv6)
};

struct LaunchSpec {
  int nnodes = 1;
  int node_rank = 0;
  std::string rdzv_host = "127.0.0.1";
  int rdzv_port = kDefaultRdzvPort;
  int local_rank = 0;
  std::string source = "default";  // "flags", "torchrun", "slurm", "openmpi", "default"
};

/// Looks up one environment variable; std::nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;

/// The process environment, for the apps (tests pass their own lookup).
EnvLookup process_environment();

/// See the table above. Guarantees 0 <= node_rank < nnodes, 1 <= rdzv_port <= 65535,
/// local_rank >= 0 and a non-empty rdzv_host.
LaunchSpec resolve_launch(const LaunchFlags& flags, const EnvLookup& getenv);

/// "10.0.0.1:29400"; an IPv6 host in brackets, "[::1]:29400", as --rdzv takes it.
std::string rendezvous_address(const LaunchSpec& spec);

/// "node 1 of 4 (slurm), rendezvous 10.0.0.1:29400" for logs.
std::string describe(const LaunchSpec& spec);

}  // namespace conveyor
