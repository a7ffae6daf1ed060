// UCX takes SIGHUP as its debug signal when libucs loads (UCX_DEBUG_SIGNO); its handler
// raises a log level and returns, so a hang-up neither stops nor kills the process.
// take_signal_from_ucx gives the signal back, with what it was before UCX took it.
#include <doctest/doctest.h>
#include <signal.h>

#include <cstdlib>

#include "transport/ucx/ucx_debug_signal.hpp"

using namespace conveyor;

namespace {

void (*sighup_handler())(int) {
  struct sigaction now {};
  REQUIRE(::sigaction(SIGHUP, nullptr, &now) == 0);
  return now.sa_handler;
}

}  // namespace

TEST_CASE("UCX holds SIGHUP as its debug signal until take_signal_from_ucx gives it back as it was") {
  // The environment's UCX_DEBUG_SIGNO would be read by libucs before this test could unset it.
  REQUIRE_MESSAGE(std::getenv("UCX_DEBUG_SIGNO") == nullptr, "run without UCX_DEBUG_SIGNO");
  // This binary links libucs: its constructor replaced SIGHUP's disposition already.
  const auto before = sighup_handler();
  CHECK((before != SIG_DFL && before != SIG_IGN));
  CHECK(take_signal_from_ucx(SIGHUP));
  const auto after = sighup_handler();
  CHECK((after == SIG_DFL || after == SIG_IGN));  // the test runner's, from before UCX
  CHECK(take_signal_from_ucx(SIGHUP));  // idempotent
  CHECK((sighup_handler() == after));
  CHECK(take_signal_from_ucx(SIGTERM));  // never UCX's: nothing to give back
}
