#pragma once
// Errors of the NCCL channel. Every failed NCCL call throws NcclError with the file, the
// line, the call's text, NCCL's error name and its last error message; a wait that passes
// its deadline throws NcclTimeout. Messages name the pipeline edge when there is one, so a
// stuck or broken edge can be found from the message alone.
// Thread-safety: stateless; safe from any thread.
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace conveyor {

class NcclError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A wait on an edge did not complete before its deadline; the communicator was aborted
/// before this was thrown (its edge must be rebuilt with a new unique id).
class NcclTimeout : public NcclError {
 public:
  using NcclError::NcclError;
};

namespace detail {
[[noreturn]] void throw_nccl_error(ncclResult_t status, ncclComm_t comm, const char* call,
                                   const char* file, int line);
}  // namespace detail

}  // namespace conveyor

/// Throws conveyor::NcclError unless `call` returns ncclSuccess.
#define NCCL_CHECK(call)                                                                 \
  do {                                                                                   \
    const ncclResult_t conveyor_nccl_ = (call);                                          \
    if (conveyor_nccl_ != ncclSuccess)                                                   \
      ::conveyor::detail::throw_nccl_error(conveyor_nccl_, nullptr, #call, __FILE__, __LINE__); \
  } while (0)
