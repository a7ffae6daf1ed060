#include <doctest/doctest.h>

#include "actors/plan/schedule/action.hpp"
#include "kernels/common/error.hpp"

using conveyor::InputError;
using namespace conveyor::sched;

TEST_CASE("An action prints as rank, kind, micro-batch and, when not 0, chunk") {
  CHECK(Action{2, ActionKind::F, 5, 0}.str() == "2F5");
  CHECK(Action{1, ActionKind::SEND_B, 3, 0}.str() == "1SEND_B3");
  CHECK(Action{0, ActionKind::F, 3, 1}.str() == "0F3c1");
  CHECK(Action{0, ActionKind::F, 3, 0}.str(true) == "0F3c0");
  CHECK(Action{12, ActionKind::RECV_F, 40, 3}.str() == "12RECV_F40c3");
}

TEST_CASE("Every action kind round-trips through its text form") {
  for (ActionKind kind : {ActionKind::F, ActionKind::B, ActionKind::I, ActionKind::W,
                          ActionKind::SEND_F, ActionKind::RECV_F, ActionKind::SEND_B,
                          ActionKind::RECV_B}) {
    for (int stage : {0, 3, 17}) {
      for (int mb : {0, 9, 123}) {
        for (int chunk : {0, 1, 5}) {
          const Action a{stage, kind, mb, chunk};
          CHECK(Action::parse(a.str()) == a);
          CHECK(Action::parse(a.str(true)) == a);
        }
      }
    }
  }
}

TEST_CASE("Parsing ignores surrounding whitespace and reads chunk 0 written out") {
  CHECK(Action::parse("  2F5 \t") == Action{2, ActionKind::F, 5, 0});
  CHECK(Action::parse("0F3c0") == Action::parse("0F3"));
  CHECK(Action::parse("3W7c1") == Action{3, ActionKind::W, 7, 1});
}

TEST_CASE("Parsing rejects malformed action text with an InputError") {
  for (const char* bad : {"", "F3", "2X5", "2F", "2Fc1", "2F5c", "2F5x", "-1F2", "2 F5",
                          "2SEND5", "1SEND_X3", "9999999999F1", "2f5"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(Action::parse(bad), InputError);
  }
  CHECK_THROWS_WITH(Action::parse("2X5"), doctest::Contains("bad action \"2X5\""));
}

TEST_CASE("Action kinds are classified as compute, send or receive") {
  CHECK(is_compute(ActionKind::W));
  CHECK_FALSE(is_compute(ActionKind::SEND_F));
  CHECK(is_send(ActionKind::SEND_B));
  CHECK(is_recv(ActionKind::RECV_F));
  CHECK(is_input_backward(ActionKind::I));
  CHECK(is_input_backward(ActionKind::B));
  CHECK_FALSE(is_input_backward(ActionKind::W));
  CHECK(kind_name(ActionKind::RECV_B) == "RECV_B");
}
