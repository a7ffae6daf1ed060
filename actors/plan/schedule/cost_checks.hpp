#pragma once
// The input checks of the cost lists behind the two duration lookups (simulator.hpp: per
// rank; stage_costs.hpp: per model stage), with one wording.
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/common/error.hpp"

namespace conveyor::sched {

/// Throws InputError "<who>: costs.<name> has N values; give <expected>" unless
/// v.size() is one of `sizes`, and "<who>: costs.<name> must be >= 0" for a negative or
/// NaN value.
inline void check_cost_list(const std::vector<double>& v, const std::string& who,
                            const std::string& name, std::initializer_list<std::size_t> sizes,
                            const std::string& expected) {
  if (std::find(sizes.begin(), sizes.end(), v.size()) == sizes.end())
    throw InputError(who + ": costs." + name + " has " + std::to_string(v.size()) +
                     " values; give " + expected);
  for (double d : v)
    if (!(d >= 0)) throw InputError(who + ": costs." + name + " must be >= 0");
}

}  // namespace conveyor::sched
