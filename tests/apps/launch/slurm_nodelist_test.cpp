// Slurm's compressed host lists expand as Slurm writes them, and a malformed one is an
// InputError naming SLURM_JOB_NODELIST and the value.
#include "apps/launch/slurm_nodelist.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/apps/launch/launch_test_support.hpp"

using namespace conveyor;
using namespace conveyor::launch_test;
using Hosts = std::vector<std::string>;

TEST_CASE("a Slurm node list's first host keeps the range's zero padding") {
  CHECK(first_slurm_host("node[01-04,07],gpu3") == "node01");
  CHECK(first_slurm_host("gpu3,node[01-04]") == "gpu3");
  CHECK(first_slurm_host("single") == "single");
  CHECK(first_slurm_host("n[7]") == "n7");
  CHECK(first_slurm_host("rack[2-3]-node[010-011]") == "rack2-node010");
  CHECK(first_slurm_host("a-b.c[5-6].example.org") == "a-b.c5.example.org");
}

TEST_CASE("a Slurm node list expands every range and group in order") {
  CHECK(expand_slurm_nodelist("node[01-04,07],gpu3") ==
        Hosts{"node01", "node02", "node03", "node04", "node07", "gpu3"});
  CHECK(expand_slurm_nodelist("n[8-10]") == Hosts{"n8", "n9", "n10"});
  CHECK(expand_slurm_nodelist("n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(expand_slurm_nodelist("r[1-2]n[1,3]") == Hosts{"r1n1", "r1n3", "r2n1", "r2n3"});
  CHECK(expand_slurm_nodelist("a,b,c") == Hosts{"a", "b", "c"});
  CHECK(expand_slurm_nodelist("x[1-2]y") == Hosts{"x1y", "x2y"});
}

TEST_CASE("a malformed Slurm node list is an error naming the variable and the value") {
  const auto error = [](const std::string& list) {
    return input_error([&] { first_slurm_host(list); });
  };
  check_message(error(""), {"SLURM_JOB_NODELIST=''", "empty"});
  check_message(error("node[01-04"), {"SLURM_JOB_NODELIST='node[01-04'", "not closed"});
  check_message(error("node01]"), {"SLURM_JOB_NODELIST='node01]'", "no '['"});
  check_message(error("node[04-01]"), {"'node[04-01]'", "04-01", "backwards"});
  check_message(error("node[a-b]"), {"'node[a-b]'", "expected a number"});
  check_message(error("node[]"), {"'node[]'", "expected a number"});
  check_message(error("node[1-]"), {"'node[1-]'", "expected a number"});
  check_message(error("node[1;2]"), {"'node[1;2]'", "unexpected ';'"});
  check_message(error("a,,b"), {"'a,,b'", "empty host name"});
  check_message(error("a,"), {"'a,'", "ends with ','"});
  check_message(error("a b"), {"'a b'", "space"});
  check_message(error("n[1-2[3]]"), {"'n[1-2[3]]'", "not closed"});
  check_message(input_error([] { expand_slurm_nodelist("n[0-99999]", 1000); }),
                {"'n[0-99999]'", "more than 1000 hosts"});
}
