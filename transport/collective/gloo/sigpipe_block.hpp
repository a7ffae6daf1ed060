#pragma once
// Gloo writes to its TCP sockets with writev(), which raises SIGPIPE on a socket whose
// peer has gone, and SIGPIPE's default action ends the process. Gloo handles the EPIPE
// that comes with it (the bucket fails with "Connection closed by peer") but leaves the
// signal to its host: Python ignores SIGPIPE, a C++ process does not. Rather than change
// the process-wide disposition, every thread that writes through Gloo blocks SIGPIPE:
// the device's I/O thread (created while the constructor holds one of these, it inherits
// the blocked mask), the group's worker thread, and the constructor while it connects.
// On destruction a SIGPIPE that arrived meanwhile is discarded before the thread's mask is
// restored, so it cannot be delivered afterwards.
// Thread-safety: affects the calling thread only; destroy on the thread that made it.
#include <signal.h>

namespace conveyor {

class SigpipeBlock {
 public:
  SigpipeBlock();
  ~SigpipeBlock();
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t previous_;
  bool was_blocked_ = false;
};

}  // namespace conveyor
