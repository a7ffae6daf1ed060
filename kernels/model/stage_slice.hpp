#pragma once
#include <string>

namespace conveyor {

/// The contiguous part of the GPT that one pipeline stage (or chunk) holds:
/// transformer blocks [first_block, first_block + num_blocks), plus the token and
/// position embedding when `has_embedding`, and the final LayerNorm, LM head and
/// cross-entropy loss when `has_head`. A slice may hold zero blocks only if it holds
/// the embedding or the head.
struct StageSlice {
  int first_block = 0;
  int num_blocks = 0;
  bool has_embedding = false;
  bool has_head = false;

  int end_block() const { return first_block + num_blocks; }
  friend bool operator==(const StageSlice&, const StageSlice&) = default;
};

}  // namespace conveyor
