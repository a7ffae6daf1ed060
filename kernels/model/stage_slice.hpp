#pragma once
#include <string>

namespace conveyor {

/// The contiguous part of the model that one pipeline stage (or chunk) holds:
/// transformer blocks [first_block, first_block + num_blocks), plus the token (and, for
/// GPT-2, position) embedding when `has_embedding`, and the final norm, LM head and
/// cross-entropy loss when `has_head`. A slice may hold zero blocks only if it holds
/// the embedding or the head.
///
/// Half blocks: a block is two halves, each a step of the residual stream (B, T, C):
///   attention half: norm, qkv, attention, its output projection and residual add (res2)
///   MLP half:       norm, the MLP (GELU or SwiGLU) and its residual add (the block output)
/// so a slice may begin or end between them: `starts_at_mlp` (block first_block's attention
/// half is on the slice before) and `ends_after_attention` (block end_block() - 1's MLP half
/// is on the slice after). A cut between halves lets the partitioner balance stages finer
/// than a whole block (the head costs about one block). A block's parameters are its
/// attention half's then its MLP half's (GPT-2: six each, block_params.hpp; Llama: three).
struct StageSlice {
  int first_block = 0;
  int num_blocks = 0;  // blocks of which the slice holds at least one half
  bool has_embedding = false;
  bool has_head = false;
  bool starts_at_mlp = false;
  bool ends_after_attention = false;

  int end_block() const { return first_block + num_blocks; }
  /// Half-block positions: half 2b is block b's attention half, 2b + 1 its MLP half.
  int first_half() const { return 2 * first_block + (starts_at_mlp ? 1 : 0); }
  int end_half() const { return 2 * end_block() - (ends_after_attention ? 1 : 0); }
  int num_halves() const { return end_half() - first_half(); }
  /// Whether the slice holds block `block`'s attention / MLP half.
  bool holds_attention(int block) const {
    return 2 * block >= first_half() && 2 * block < end_half();
  }
  bool holds_mlp(int block) const {
    return 2 * block + 1 >= first_half() && 2 * block + 1 < end_half();
  }

  /// The slice holding halves [first_half, first_half + num_halves).
  static StageSlice of_halves(int first_half, int num_halves, bool has_embedding,
                              bool has_head) {
    StageSlice s;
    const int end = first_half + num_halves;
    s.first_block = first_half / 2;
    s.num_blocks = num_halves > 0 ? (end + 1) / 2 - s.first_block : 0;
    s.starts_at_mlp = num_halves > 0 && first_half % 2 == 1;
    s.ends_after_attention = num_halves > 0 && end % 2 == 1;
    s.has_embedding = has_embedding;
    s.has_head = has_head;
    return s;
  }

  friend bool operator==(const StageSlice&, const StageSlice&) = default;
};

}  // namespace conveyor
