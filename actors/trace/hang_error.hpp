#pragma once
// The run was stopped by the hang watchdog; what() is the whole diagnosis (wait-for
// graph, verdict, last trace records). The app exits with kExitHang (3).
#include <stdexcept>

namespace conveyor {

/// Exit code of a run stopped by the watchdog.
constexpr int kExitHang = 3;

class HangError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace conveyor
