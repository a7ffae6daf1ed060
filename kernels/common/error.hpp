#pragma once
// Errors a user can fix (bad config, bad data file, bad command-line value).
// The apps turn them into a one-line message and exit code 2; everything else is a bug.
#include <stdexcept>
#include <string>

namespace conveyor {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace conveyor
