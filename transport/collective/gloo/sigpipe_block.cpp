#include "transport/collective/gloo/sigpipe_block.hpp"

#include <pthread.h>

#include <cerrno>
#include <ctime>

namespace conveyor {
namespace {

sigset_t only_sigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

}  // namespace

SigpipeBlock::SigpipeBlock() {
  const sigset_t pipe = only_sigpipe();
  pthread_sigmask(SIG_BLOCK, &pipe, &previous_);
  was_blocked_ = sigismember(&previous_, SIGPIPE) == 1;
}

SigpipeBlock::~SigpipeBlock() {
  if (was_blocked_) return;  // the caller blocks it anyway: nothing to discard or restore
  const sigset_t pipe = only_sigpipe();
  const timespec now{0, 0};
  // Each call takes one pending SIGPIPE (thread- or process-directed); EAGAIN: none left.
  while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE || errno == EINTR) {
  }
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace conveyor
