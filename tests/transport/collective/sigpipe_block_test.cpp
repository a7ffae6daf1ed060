// SigpipeBlock: a thread writing to a socket or pipe whose reader has gone gets EPIPE
// instead of the SIGPIPE that would end the process (what Gloo's writev() meets when a
// peer dies), and leaves with its signal mask as it was and no SIGPIPE pending.
#include <doctest/doctest.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "transport/collective/gloo/sigpipe_block.hpp"

namespace conveyor {
namespace {

bool sigpipe_blocked() {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

bool sigpipe_pending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

TEST_CASE("a write to a peer that has gone fails with EPIPE under SigpipeBlock instead of ending the process") {
  std::thread writer([] {  // a thread of its own: the test runner's mask stays untouched
    REQUIRE(!sigpipe_blocked());
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    close(fds[0]);  // the reader goes away
    {
      SigpipeBlock block;
      CHECK(sigpipe_blocked());
      const char byte = 'x';
      errno = 0;
      // Without the block, SIGPIPE's default action ends the test process right here.
      CHECK(write(fds[1], &byte, 1) == -1);
      CHECK(errno == EPIPE);
    }
    CHECK(!sigpipe_blocked());
    CHECK(!sigpipe_pending());  // discarded, not delivered later
    close(fds[1]);
  });
  writer.join();
}

}  // namespace
}  // namespace conveyor
