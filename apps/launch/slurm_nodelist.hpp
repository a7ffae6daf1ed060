#pragma once
// Slurm's compressed host lists, as in SLURM_JOB_NODELIST: `node[01-04,07],gpu3`.
//
//   list   := item (',' item)*                 commas inside brackets do not split
//   item   := (text | '[' ranges ']')+         several bracket groups multiply:
//                                              `r[1-2]n[1-2]` → r1n1 r1n2 r2n1 r2n2
//   ranges := range (',' range)*
//   range  := digits | digits '-' digits       the lower bound's width is kept:
//                                              `[08-10]` → 08 09 10
// Pure functions; no Slurm needed.
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

/// Every host of `nodelist`, in Slurm's order. Throws InputError naming `variable` (where
/// the list came from) and the value for a malformed list, or one that expands to more
/// than `max_hosts` hosts.
std::vector<std::string> expand_slurm_nodelist(std::string_view nodelist, std::size_t max_hosts = 100000,
                                               std::string_view variable = "SLURM_JOB_NODELIST");

/// The first host of `nodelist` (`node[01-04,07],gpu3` → `node01`), without expanding
/// the rest. Throws InputError as above.
std::string first_slurm_host(std::string_view nodelist, std::string_view variable = "SLURM_JOB_NODELIST");

}  // namespace conveyor
