#pragma once
// model.recompute: which activations a stage keeps from forward to backward, and which it
// computes again at the start of each block's backward (activation recomputation).
//   none       keep every activation backward needs (the fastest; the most memory)
//   attention  keep the block input and the MLP half; recompute ln1, qkv and attention
//              (the CPU also drops its (T, T) attention probabilities: the largest part)
//   full       keep only each block's input; recompute the whole block but its last GEMM
//              (fc2's output is not needed by backward)
// What must hold: the recomputation runs the same kernels on the same inputs as forward,
// so losses and gradients are bitwise identical for every setting (the tests compare).
// The LM head and the embedding are never recomputed.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

enum class Recompute { none, attention, full };

std::string_view recompute_name(Recompute r);
std::optional<Recompute> parse_recompute(std::string_view name);
const std::vector<std::string>& known_recompute_names();

/// Whether forward drops (and backward recomputes) the attention half of a block: ln1 and
/// its statistics, qkv, the attention output (and its softmax state).
inline bool recomputes_attention(Recompute r) { return r != Recompute::none; }
/// Whether forward also drops the MLP half: res2, ln2 and its statistics, fc1, GELU.
inline bool recomputes_mlp(Recompute r) { return r == Recompute::full; }

}  // namespace conveyor
