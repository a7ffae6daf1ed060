#include "transport/nccl/nccl_error.hpp"

namespace conveyor::detail {

void throw_nccl_error(ncclResult_t status, ncclComm_t comm, const char* call, const char* file,
                      int line) {
  std::string message = std::string(file) + ":" + std::to_string(line) + ": " + call +
                        " failed: " + ncclGetErrorString(status);
  // NCCL keeps a readable reason (which peer, which transport) beside the code.
  const char* last = ncclGetLastError(comm);
  if (last && *last) message += " (" + std::string(last) + ")";
  throw NcclError(message);
}

}  // namespace conveyor::detail
