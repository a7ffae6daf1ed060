#pragma once
// What a fault.inject entry's parsing says, for the tests of its errors.
#include <stdexcept>
#include <string>

#include "actors/fault/fault_spec.hpp"

namespace conveyor::testing {

/// The message parse_fault_spec(entry) throws; "<accepted>" when it throws none.
inline std::string parse_error(const std::string& entry) {
  try {
    parse_fault_spec(entry);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<accepted>";
}

}  // namespace conveyor::testing
