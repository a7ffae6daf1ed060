#include "apps/launch/launch_spec.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "apps/launch/slurm_nodelist.hpp"
#include "kernels/common/error.hpp"
#include "transport/rendezvous/error.hpp"

namespace conveyor {
namespace {

// How a value is named in messages: "--nnodes 'x'" for a flag, "RANK='x'" for a variable.
std::string named(std::string_view name, std::string_view value) {
  if (name.starts_with("--")) return std::string(name) + " '" + std::string(value) + "'";
  return std::string(name) + "='" + std::string(value) + "'";
}

// A whole decimal number in [lo, hi]: no sign, spaces or trailing text.
int parse_int(std::string_view name, std::string_view value, int lo, int hi,
              std::string_view what) {
  int v = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec == std::errc::invalid_argument || ptr != end || value[0] == '-')
    throw InputError("launch: " + named(name, value) + " is not " + std::string(what));
  if (ec == std::errc::result_out_of_range || v < lo || v > hi)
    throw InputError("launch: " + named(name, value) + " is out of range: expected " +
                     std::string(what) + " from " + std::to_string(lo) + " to " +
                     std::to_string(hi));
  return v;
}

int parse_port(std::string_view name, std::string_view value) {
  return parse_int(name, value, 1, 65535, "a port number");
}

void check_rank_below(std::string_view rank_name, int rank, std::string_view size_name,
                      int size) {
  if (rank >= size)
    throw InputError("launch: " + std::string(rank_name) + "=" + std::to_string(rank) +
                     " must be below " + std::string(size_name) + "=" + std::to_string(size));
}

constexpr int kMaxNodes = 1 << 20;

// --rdzv HOST:PORT or [IPV6]:PORT.
void parse_rdzv(const std::string& value, LaunchSpec& spec) {
  std::string host;
  std::string port;
  if (value.starts_with('[')) {
    const auto close = value.find(']');
    if (close == std::string::npos)
      throw InputError("launch: " + named("--rdzv", value) + " has '[' without ']'");
    host = value.substr(1, close - 1);
    if (close + 1 >= value.size() || value[close + 1] != ':')
      throw InputError("launch: " + named("--rdzv", value) +
                       " has no port: expected HOST:PORT, e.g. 10.0.0.1:29400");
    port = value.substr(close + 2);
  } else {
    const auto colon = value.rfind(':');
    if (colon == std::string::npos)
      throw InputError("launch: " + named("--rdzv", value) +
                       " has no port: expected HOST:PORT, e.g. 10.0.0.1:29400");
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (host.find(':') != std::string::npos)
      throw InputError("launch: " + named("--rdzv", value) +
                       " is ambiguous: write an IPv6 host in brackets, [::1]:29400");
  }
  if (host.empty())
    throw InputError("launch: " + named("--rdzv", value) + " has no host: expected HOST:PORT");
  spec.rdzv_host = host;
  spec.rdzv_port = parse_port("--rdzv port", port);
}

LaunchSpec from_flags(const LaunchFlags& flags) {
  if (!flags.nnodes || !flags.node_rank) {
    std::string given;
    if (flags.nnodes) given = "--nnodes " + *flags.nnodes;
    if (flags.node_rank) given = "--node-rank " + *flags.node_rank;
    if (flags.rdzv) given += std::string(given.empty() ? "" : " and ") + "--rdzv " + *flags.rdzv;
    throw InputError("launch: " + given + " given without " +
                     (flags.nnodes ? "--node-rank" : flags.node_rank ? "--nnodes" : "--nnodes and --node-rank") +
                     ": a multi-node launch needs --nnodes N --node-rank R --rdzv HOST:PORT");
  }
  LaunchSpec spec;
  spec.source = "flags";
  spec.nnodes = parse_int("--nnodes", *flags.nnodes, 1, kMaxNodes, "a positive whole number");
  spec.node_rank = parse_int("--node-rank", *flags.node_rank, 0, kMaxNodes, "a whole number");
  check_rank_below("--node-rank", spec.node_rank, "--nnodes", spec.nnodes);
  if (flags.rdzv) {
    parse_rdzv(*flags.rdzv, spec);
  } else if (spec.nnodes > 1) {
    throw InputError("launch: --nnodes " + std::to_string(spec.nnodes) +
                     " needs --rdzv HOST:PORT (where node 0's rendezvous store listens)");
  }
  return spec;
}

// Reads the variables every launcher shares: MASTER_ADDR / MASTER_PORT.
void rendezvous_from_env(const EnvLookup& getenv, LaunchSpec& spec,
                         const std::optional<std::string>& fallback_host,
                         std::string_view fallback_name) {
  if (const auto port = getenv("MASTER_PORT")) spec.rdzv_port = parse_port("MASTER_PORT", *port);
  if (const auto addr = getenv("MASTER_ADDR")) {
    if (addr->empty()) throw InputError("launch: MASTER_ADDR is set but empty");
    spec.rdzv_host = *addr;
  } else if (fallback_host) {
    spec.rdzv_host = *fallback_host;
  } else if (spec.nnodes > 1) {
    throw InputError("launch: " + spec.source + " started " + std::to_string(spec.nnodes) +
                     " nodes but MASTER_ADDR is not set" +
                     (fallback_name.empty() ? "" : " (nor " + std::string(fallback_name) + ")") +
                     ": set MASTER_ADDR to node 0's host name, or pass --rdzv HOST:PORT");
  }
}

int local_rank_from(const EnvLookup& getenv, const char* name) {
  const auto v = getenv(name);
  return v ? parse_int(name, *v, 0, kMaxNodes, "a whole number") : 0;
}

LaunchSpec from_torchrun(const EnvLookup& getenv) {
  LaunchSpec spec;
  spec.source = "torchrun";
  const auto rank = getenv("RANK");
  const auto world = getenv("WORLD_SIZE");
  if (!rank || !world)
    throw InputError(std::string("launch: ") + (rank ? "RANK" : "WORLD_SIZE") +
                     " is set but " + (rank ? "WORLD_SIZE" : "RANK") +
                     " is not (a torchrun-style launch sets both)");
  spec.nnodes = parse_int("WORLD_SIZE", *world, 1, kMaxNodes, "a positive whole number");
  spec.node_rank = parse_int("RANK", *rank, 0, kMaxNodes, "a whole number");
  check_rank_below("RANK", spec.node_rank, "WORLD_SIZE", spec.nnodes);
  spec.local_rank = local_rank_from(getenv, "LOCAL_RANK");
  rendezvous_from_env(getenv, spec, std::nullopt, "");
  return spec;
}

LaunchSpec from_slurm(const EnvLookup& getenv) {
  LaunchSpec spec;
  spec.source = "slurm";
  spec.node_rank = parse_int("SLURM_PROCID", *getenv("SLURM_PROCID"), 0, kMaxNodes, "a whole number");
  const auto nnodes = getenv("SLURM_NNODES");
  const auto ntasks = getenv("SLURM_NTASKS");
  const char* size_name = nnodes ? "SLURM_NNODES" : "SLURM_NTASKS";
  if (!nnodes && !ntasks)
    throw InputError("launch: SLURM_PROCID is set but neither SLURM_NNODES nor SLURM_NTASKS is");
  spec.nnodes = parse_int(size_name, nnodes ? *nnodes : *ntasks, 1, kMaxNodes, "a positive whole number");
  if (spec.node_rank >= spec.nnodes)
    throw InputError("launch: SLURM_PROCID=" + std::to_string(spec.node_rank) +
                     " must be below " + size_name + "=" + std::to_string(spec.nnodes) +
                     " (conveyor runs one process per node: srun --ntasks-per-node=1)");
  if (const auto node_id = getenv("SLURM_NODEID")) {
    const int id = parse_int("SLURM_NODEID", *node_id, 0, kMaxNodes, "a whole number");
    if (id != spec.node_rank)
      throw InputError("launch: SLURM_NODEID=" + std::to_string(id) + " differs from SLURM_PROCID=" +
                       std::to_string(spec.node_rank) +
                       " (conveyor runs one process per node: srun --ntasks-per-node=1)");
  }
  spec.local_rank = local_rank_from(getenv, "SLURM_LOCALID");
  // SLURM_NODELIST: the older name, still what some sites' wrappers set alone.
  const char* list_name =
      !getenv("SLURM_JOB_NODELIST") && getenv("SLURM_NODELIST") ? "SLURM_NODELIST" : "SLURM_JOB_NODELIST";
  std::optional<std::string> first_host;
  if (const auto list = getenv(list_name)) first_host = first_slurm_host(*list, list_name);
  rendezvous_from_env(getenv, spec, first_host, list_name);
  return spec;
}

LaunchSpec from_openmpi(const EnvLookup& getenv) {
  LaunchSpec spec;
  spec.source = "openmpi";
  const auto size = getenv("OMPI_COMM_WORLD_SIZE");
  if (!size)
    throw InputError("launch: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
  if (!getenv("OMPI_COMM_WORLD_RANK"))
    throw InputError("launch: OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
  spec.nnodes = parse_int("OMPI_COMM_WORLD_SIZE", *size, 1, kMaxNodes, "a positive whole number");
  spec.node_rank = parse_int("OMPI_COMM_WORLD_RANK", *getenv("OMPI_COMM_WORLD_RANK"), 0,
                             kMaxNodes, "a whole number");
  check_rank_below("OMPI_COMM_WORLD_RANK", spec.node_rank, "OMPI_COMM_WORLD_SIZE", spec.nnodes);
  spec.local_rank = local_rank_from(getenv, "OMPI_COMM_WORLD_LOCAL_RANK");
  rendezvous_from_env(getenv, spec, std::nullopt, "");
  return spec;
}

}  // namespace

EnvLookup process_environment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

LaunchSpec resolve_launch(const LaunchFlags& flags, const EnvLookup& getenv) {
  if (flags.nnodes || flags.node_rank || flags.rdzv) return from_flags(flags);
  if (getenv("RANK") || getenv("WORLD_SIZE")) return from_torchrun(getenv);
  if (getenv("SLURM_PROCID")) return from_slurm(getenv);
  if (getenv("OMPI_COMM_WORLD_RANK") || getenv("OMPI_COMM_WORLD_SIZE")) return from_openmpi(getenv);
  return LaunchSpec{};
}

std::string rendezvous_address(const LaunchSpec& spec) {
  return rendezvous::host_port(spec.rdzv_host, static_cast<unsigned>(spec.rdzv_port));
}

std::string describe(const LaunchSpec& spec) {
  return "node " + std::to_string(spec.node_rank) + " of " + std::to_string(spec.nnodes) + " (" +
         spec.source + "), rendezvous " + rendezvous_address(spec);
}

}  // namespace conveyor
