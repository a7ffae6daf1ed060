#pragma once

namespace conveyor {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitFault = 3;  // a run stopped by its failure policy

/// Thrown by a command that has reported its own outcome and wants this exit code.
struct ExitRequest {
  int code;
};

}  // namespace conveyor
