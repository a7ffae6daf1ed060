#pragma once
// One step of a pipeline schedule, as a small value that prints and parses back.
//
// Text form: <rank><KIND><micro-batch>[c<chunk>], e.g. "2F5", "1SEND_B3", "0F3c1".
// The chunk suffix is printed when the chunk is not 0 (or always, with str(true));
// parse() accepts it either way, so "0F3" and "0F3c0" are the same action.
//
// Communication actions name the chunk on the rank that runs them: SEND_F/SEND_B carry the
// output of that chunk's F/(B or I) for the micro-batch; RECV_F/RECV_B bring the input of
// that chunk's F/(B or I). Pure value type: no CAF, no I/O.
#include <string>
#include <string_view>

namespace conveyor::sched {

/// F forward, B full backward, I backward for the input, W backward for the weights;
/// the rest move an activation (F) or a gradient (B) between ranks.
enum class ActionKind { F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B };

/// "F", "SEND_B", …
std::string_view kind_name(ActionKind kind);
/// F, B, I and W compute; the other kinds move data.
bool is_compute(ActionKind kind);
bool is_send(ActionKind kind);
bool is_recv(ActionKind kind);
/// B or I: the backward action that consumes the next stage's gradient and makes this one's.
bool is_input_backward(ActionKind kind);

struct Action {
  int stage = 0;        // the pipeline RANK that runs it (pipeline.stages counts ranks)
  ActionKind kind = ActionKind::F;
  int micro_batch = 0;
  int chunk = 0;        // model chunk on that rank (0 unless virtual stages / zbv)

  /// "2F5"; the chunk suffix only when chunk != 0 ("0F3c1").
  std::string str() const;
  /// With show_chunk the suffix is printed for chunk 0 too ("0F3c0"): used for schedules
  /// with several chunks per rank, where "0F3" would read as ambiguous.
  std::string str(bool show_chunk) const;
  /// Inverse of str(); surrounding whitespace is ignored. Throws InputError on bad text.
  static Action parse(std::string_view text);

  friend bool operator==(const Action&, const Action&) = default;
};

}  // namespace conveyor::sched
