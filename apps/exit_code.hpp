#pragma once

namespace conveyor {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;  // a bug: a broken invariant (std::logic_error)
constexpr int kExitFailed = 1;    // the run failed (a stage, a lost node, a disk, a device)
constexpr int kExitBadInput = 2;

/// Thrown to end the command with `code` once everything is said (e.g. the code of a
/// supervised worker); main() returns it.
struct ExitStatus {
  int code = 0;
};

}  // namespace conveyor
