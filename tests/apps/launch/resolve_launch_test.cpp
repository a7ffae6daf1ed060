// Launch parameters come from flags, else from the first launcher whose environment is
// present (torchrun, Slurm, Open MPI), else a single node; every bad value is one line
// naming the flag or variable and the value.
#include <doctest/doctest.h>

#include "apps/launch/launch_spec.hpp"
#include "tests/apps/launch/launch_test_support.hpp"

using namespace conveyor;
using namespace conveyor::launch_test;

namespace {

LaunchSpec resolve(const LaunchFlags& flags, const Env& env = {}) {
  return resolve_launch(flags, lookup(env));
}
LaunchSpec resolve(const Env& env) { return resolve({}, env); }

std::string flag_error(const LaunchFlags& flags, const Env& env = {}) {
  return input_error([&] { resolve(flags, env); });
}
std::string env_error(const Env& env) { return input_error([&] { resolve(env); }); }

void check_spec(const LaunchSpec& s, int nnodes, int node_rank, const std::string& host, int port,
                int local_rank, const std::string& source) {
  CHECK(s.nnodes == nnodes);
  CHECK(s.node_rank == node_rank);
  CHECK(s.rdzv_host == host);
  CHECK(s.rdzv_port == port);
  CHECK(s.local_rank == local_rank);
  CHECK(s.source == source);
}

const Env torchrun_env{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
                       {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};
const Env slurm_env{{"SLURM_PROCID", "2"}, {"SLURM_NNODES", "4"}, {"SLURM_NODEID", "2"},
                    {"SLURM_LOCALID", "0"}, {"SLURM_JOB_NODELIST", "node[01-04,07],gpu3"}};
const Env openmpi_env{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"MASTER_ADDR", "head"}};

Env merged(Env a, const Env& b) {
  a.insert(b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("with no flags and no launcher environment the job is one node on localhost") {
  check_spec(resolve(Env{}), 1, 0, "127.0.0.1", 29400, 0, "default");
  // Unrelated variables change nothing.
  check_spec(resolve(Env{{"MASTER_ADDR", "x"}, {"HOME", "/root"}}), 1, 0, "127.0.0.1", 29400, 0,
             "default");
}

TEST_CASE("flags give nnodes and node rank and the rendezvous address") {
  check_spec(resolve({"4", "3", "head-node:1234"}), 4, 3, "head-node", 1234, 0, "flags");
  check_spec(resolve({"2", "0", "[fe80::1]:29400"}), 2, 0, "fe80::1", 29400, 0, "flags");
  // One node needs no rendezvous address.
  check_spec(resolve({"1", "0", std::nullopt}), 1, 0, "127.0.0.1", 29400, 0, "flags");
}

TEST_CASE("flags win over every launcher's environment") {
  const Env all = merged(merged(torchrun_env, slurm_env), openmpi_env);
  check_spec(resolve({"2", "1", "h:7"}, all), 2, 1, "h", 7, 0, "flags");
}

TEST_CASE("a torchrun-style environment is read from RANK and WORLD_SIZE and MASTER_ADDR") {
  check_spec(resolve(torchrun_env), 2, 1, "10.0.0.1", 29500, 0, "torchrun");
  check_spec(resolve(Env{{"RANK", "0"}, {"WORLD_SIZE", "1"}}), 1, 0, "127.0.0.1", 29400, 0,
             "torchrun");
  check_spec(resolve(Env{{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", "5"},
                         {"MASTER_ADDR", "m"}}),
             3, 2, "m", 29400, 5, "torchrun");
}

TEST_CASE("a Slurm environment is read from SLURM_* with node 0 the first host of the node list") {
  check_spec(resolve(slurm_env), 4, 2, "node01", 29400, 0, "slurm");
  check_spec(resolve(merged(slurm_env, {{"MASTER_PORT", "4000"}})), 4, 2, "node01", 4000, 0, "slurm");
  check_spec(resolve(merged(slurm_env, {{"MASTER_ADDR", "ib-node01"}})), 4, 2, "ib-node01", 29400,
             0, "slurm");
  // SLURM_NTASKS stands in for SLURM_NNODES.
  check_spec(resolve(Env{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                         {"SLURM_JOB_NODELIST", "gpu[7-8]"}, {"SLURM_LOCALID", "3"}}),
             2, 1, "gpu7", 29400, 3, "slurm");
  // SLURM_NODELIST, the older name, when SLURM_JOB_NODELIST is absent; the newer one wins.
  const Env old_list{{"SLURM_PROCID", "0"}, {"SLURM_NNODES", "2"}, {"SLURM_NODELIST", "old[3-4]"}};
  check_spec(resolve(old_list), 2, 0, "old3", 29400, 0, "slurm");
  check_spec(resolve(merged(old_list, {{"SLURM_JOB_NODELIST", "new[1-2]"}})), 2, 0, "new1", 29400, 0, "slurm");
}

TEST_CASE("an Open MPI environment is read from OMPI_COMM_WORLD_* and MASTER_ADDR") {
  check_spec(resolve(openmpi_env), 4, 3, "head", 29400, 1, "openmpi");
  check_spec(resolve(Env{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}), 1, 0,
             "127.0.0.1", 29400, 0, "openmpi");
}

TEST_CASE("launchers are tried in order: torchrun then Slurm then Open MPI") {
  CHECK(resolve(merged(merged(torchrun_env, slurm_env), openmpi_env)).source == "torchrun");
  CHECK(resolve(merged(slurm_env, openmpi_env)).source == "slurm");
  CHECK(resolve(openmpi_env).source == "openmpi");
}

TEST_CASE("partial or malformed launch flags are errors naming the flag and the value") {
  check_message(flag_error({"2", std::nullopt, std::nullopt}), {"--nnodes 2", "without --node-rank"});
  check_message(flag_error({std::nullopt, "1", std::nullopt}), {"--node-rank 1", "without --nnodes"});
  check_message(flag_error({std::nullopt, std::nullopt, "h:1"}),
                {"--rdzv h:1", "without --nnodes and --node-rank"});
  check_message(flag_error({"2", "0", std::nullopt}), {"--nnodes 2", "needs --rdzv HOST:PORT"});
  check_message(flag_error({"two", "0", "h:1"}), {"--nnodes 'two'", "not a positive whole number"});
  check_message(flag_error({"0", "0", "h:1"}), {"--nnodes '0'", "out of range"});
  check_message(flag_error({"2", "-1", "h:1"}), {"--node-rank '-1'", "not a whole number"});
  check_message(flag_error({"2", "1x", "h:1"}), {"--node-rank '1x'", "not a whole number"});
  check_message(flag_error({"2", "2", "h:1"}), {"--node-rank=2", "below --nnodes=2"});
  check_message(flag_error({"2", "0", "head"}), {"--rdzv 'head'", "has no port"});
  check_message(flag_error({"2", "0", ":29400"}), {"--rdzv ':29400'", "has no host"});
  check_message(flag_error({"2", "0", "h:"}), {"--rdzv port ''", "not a port number"});
  check_message(flag_error({"2", "0", "h:70000"}), {"--rdzv port '70000'", "out of range", "65535"});
  check_message(flag_error({"2", "0", "h:0"}), {"--rdzv port '0'", "out of range"});
  check_message(flag_error({"2", "0", "h:http"}), {"--rdzv port 'http'", "not a port number"});
  check_message(flag_error({"2", "0", "fe80::1:29400"}), {"'fe80::1:29400'", "brackets"});
  check_message(flag_error({"2", "0", "[fe80::1"}), {"'[fe80::1'", "without ']'"});
  check_message(flag_error({"2", "0", "[fe80::1]"}), {"'[fe80::1]'", "has no port"});
  check_message(flag_error({"99999999999", "0", "h:1"}), {"--nnodes '99999999999'", "out of range"});
}

TEST_CASE("a bad torchrun-style variable is an error naming the variable and the value") {
  check_message(env_error({{"RANK", "0"}}), {"RANK is set but WORLD_SIZE is not"});
  check_message(env_error({{"WORLD_SIZE", "2"}}), {"WORLD_SIZE is set but RANK is not"});
  check_message(env_error(merged({{"RANK", "2"}}, torchrun_env)), {"RANK=2", "below WORLD_SIZE=2"});
  check_message(env_error(merged({{"WORLD_SIZE", "abc"}}, torchrun_env)),
                {"WORLD_SIZE='abc'", "not a positive whole number"});
  check_message(env_error(merged({{"RANK", " 1"}}, torchrun_env)), {"RANK=' 1'", "not a whole number"});
  check_message(env_error(merged({{"MASTER_PORT", "65536"}}, torchrun_env)),
                {"MASTER_PORT='65536'", "out of range"});
  check_message(env_error(merged({{"MASTER_PORT", "29500.0"}}, torchrun_env)),
                {"MASTER_PORT='29500.0'", "not a port number"});
  check_message(env_error(merged({{"LOCAL_RANK", "-3"}}, torchrun_env)), {"LOCAL_RANK='-3'"});
  check_message(env_error(merged({{"MASTER_ADDR", ""}}, torchrun_env)), {"MASTER_ADDR", "empty"});
  check_message(env_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}}),
                {"torchrun started 2 nodes", "MASTER_ADDR is not set"});
}

TEST_CASE("a bad Slurm variable is an error naming the variable and the value") {
  check_message(env_error({{"SLURM_PROCID", "0"}}), {"neither SLURM_NNODES nor SLURM_NTASKS"});
  check_message(env_error(merged({{"SLURM_PROCID", "4"}}, slurm_env)),
                {"SLURM_PROCID=4", "below SLURM_NNODES=4", "--ntasks-per-node=1"});
  check_message(env_error(merged({{"SLURM_NODEID", "1"}}, slurm_env)),
                {"SLURM_NODEID=1", "SLURM_PROCID=2"});
  check_message(env_error(merged({{"SLURM_NNODES", "four"}}, slurm_env)), {"SLURM_NNODES='four'"});
  check_message(env_error(merged({{"SLURM_PROCID", "x"}}, slurm_env)), {"SLURM_PROCID='x'"});
  check_message(env_error(merged({{"SLURM_LOCALID", "?"}}, slurm_env)), {"SLURM_LOCALID='?'"});
  check_message(env_error(merged({{"SLURM_JOB_NODELIST", "node[1-"}}, slurm_env)),
                {"SLURM_JOB_NODELIST='node[1-'"});
  check_message(env_error({{"SLURM_PROCID", "0"}, {"SLURM_NNODES", "2"}}),
                {"slurm started 2 nodes", "MASTER_ADDR is not set", "nor SLURM_JOB_NODELIST"});
  check_message(env_error({{"SLURM_PROCID", "0"}, {"SLURM_NNODES", "2"}, {"SLURM_NODELIST", "n[1-"}}),
                {"SLURM_NODELIST='n[1-'"});
}

TEST_CASE("a bad Open MPI variable is an error naming the variable and the value") {
  check_message(env_error({{"OMPI_COMM_WORLD_RANK", "0"}}), {"OMPI_COMM_WORLD_SIZE is not"});
  // The size alone (a wrapper that exported one of the two) is not a one-process job.
  check_message(env_error({{"OMPI_COMM_WORLD_SIZE", "4"}}), {"OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"});
  check_message(env_error(merged({{"OMPI_COMM_WORLD_RANK", "4"}}, openmpi_env)),
                {"OMPI_COMM_WORLD_RANK=4", "below OMPI_COMM_WORLD_SIZE=4"});
  check_message(env_error(merged({{"OMPI_COMM_WORLD_SIZE", "1e3"}}, openmpi_env)),
                {"OMPI_COMM_WORLD_SIZE='1e3'"});
  check_message(env_error({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
                {"openmpi started 2 nodes", "MASTER_ADDR is not set", "--rdzv"});
}

TEST_CASE("a launch spec describes itself in one line for logs") {
  CHECK(describe(resolve(slurm_env)) == "node 2 of 4 (slurm), rendezvous node01:29400");
  CHECK(describe(resolve({"2", "0", "[::1]:5"})) == "node 0 of 2 (flags), rendezvous [::1]:5");
}

TEST_CASE("the rendezvous address reads back as --rdzv takes it: an IPv6 host in brackets") {
  const LaunchSpec v6 = resolve({"2", "1", "[::1]:29500"});
  CHECK(v6.rdzv_host == "::1");
  CHECK(v6.rdzv_port == 29500);
  CHECK(rendezvous_address(v6) == "[::1]:29500");
  CHECK(rendezvous_address(resolve(merged({{"MASTER_ADDR", "fe80::2"}}, torchrun_env))) ==
        "[fe80::2]:29500");
  CHECK(rendezvous_address(resolve({"2", "1", "10.0.0.1:29500"})) == "10.0.0.1:29500");
  CHECK(rendezvous_address(resolve(slurm_env)) == "node01:29400");
}
