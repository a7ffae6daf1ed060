#pragma once
// The small GPT the snapshot tests of actors/fault cut and restore: 3 blocks of 16, so that
// a state has every kind of tensor and still takes microseconds.
#include "kernels/model/gpt_config.hpp"

namespace conveyor::fault_test {

inline GptConfig small_model() {
  GptConfig c;
  c.layers = 3;
  c.d_model = 16;
  c.heads = 2;
  c.seq_len = 8;
  c.vocab = 32;
  return c;
}

}  // namespace conveyor::fault_test
