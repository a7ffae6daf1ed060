#pragma once
// One trace record: an action a stage ran, or one end of an actor message. Plain,
// trivially copyable, fixed size (64 bytes), so buffers are flat arrays and the file is
// a header followed by records (trace_file.hpp writes the byte layout down).
//
// Ids: every record has an id unique in the whole job, writer << 40 | sequence, where the
// writer is rank + 1 for a stage and 0 for the coordinator, and the sequence counts from
// 1 per writer. Stage ranks are global, so ids from several processes never collide —
// but a re-layout (issue 44) may move a stage actor onto another process, whose buffer of
// that actor then counts from 1 again: each process counts in a range of its own, its
// sequences starting at (process index mod 256) << 32 (first_sequence_of), so ids repeat
// only with more than 256 processes and 2^32 records of one writer.
// `cause` is the id of the record that made this one happen (0: none): a receive points
// at its send, a send at the action that produced it, an action at the receive of its
// input, a stage's plan receive at the coordinator's plan send.
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace conveyor::trace {

/// What a record is. Values are part of the file format: append, never renumber.
enum class RecordKind : std::uint8_t {
  action = 0,        // a stage ran an action of its plan (F, B, I, W)
  pipe_send = 1,     // a stage sent an activation / gradient (PipeMessage)
  pipe_receive = 2,  // a stage took a PipeMessage out of its mailbox
  plan_send = 3,     // the coordinator sent a StepPlan
  plan_receive = 4,
  report_send = 5,   // a stage sent its StageReport
  report_receive = 6,
  optimizer_send = 7,     // the coordinator asked for the optimizer step (OptimizerStep)
  optimizer_receive = 8,
  done_send = 9,          // a stage answered OptimizerDone
  done_receive = 10,
  step_begin = 11,   // the coordinator started a round (a marker: start == end)
  // Issue 44: the job moved onto another layout, from the loss's detection (replan: `peer`
  // the node lost for good) or the join (joined: `peer` the node taken in) to every actor
  // of the new layout restored; `step` the step the run goes on from.
  replan = 12,
  joined = 13,
};
inline constexpr int kRecordKinds = 14;

/// The track a record is drawn on.
enum class Stream : std::uint8_t { compute, send, receive };

std::string_view record_kind_name(RecordKind k);
bool is_send(RecordKind k);
bool is_receive(RecordKind k);
Stream stream_of(RecordKind k);
/// replan and joined: their `peer` is a node, not a stage actor.
bool peer_is_node(RecordKind k);

inline constexpr std::int16_t kCoordinator = -1;  // `stage` of the coordinator's records
/// Stage actors a trace can name: `stage` and `peer` are 16-bit (0 .. 32767).
inline constexpr int kMaxTracedActors = 32768;
inline constexpr std::uint8_t kNoAction = 0xFF;

struct Record {
  std::uint64_t id = 0;
  std::uint64_t cause = 0;
  std::int64_t start_ns = 0;  // host steady clock (CLOCK_MONOTONIC), ns
  std::int64_t end_ns = 0;
  std::int64_t step = 0;
  std::uint64_t bytes = 0;    // payload of a PipeMessage; 0 otherwise
  std::uint32_t round = 0;    // the StepPlan counter (train and eval plans), from 1
  std::int32_t micro_batch = -1;
  std::int16_t stage = kCoordinator;  // who wrote it: a rank, or the coordinator
  std::int16_t peer = -1;             // the other end of a message
  RecordKind kind = RecordKind::action;
  std::uint8_t action = kNoAction;  // sched::ActionKind of an action; F (activation) or
                                    // B (gradient) for a PipeMessage
  std::uint8_t chunk = 0;           // the chunk on `stage` that ran / produced / consumes it
  std::uint8_t phase = 0;           // 0 train, 1 eval (Phase)
};
static_assert(sizeof(Record) == 64, "the file format stores 64-byte records");
static_assert(std::is_trivially_copyable_v<Record>);

inline constexpr int kWriterShift = 40;
inline std::uint64_t make_id(int writer, std::uint64_t sequence) {
  return (static_cast<std::uint64_t>(writer) << kWriterShift) | sequence;
}
/// Where the sequences of process `process_index` start (see Ids above).
inline std::uint64_t first_sequence_of(std::uint32_t process_index) {
  return static_cast<std::uint64_t>(process_index % 256) << 32;
}
/// rank + 1 for a stage, 0 for the coordinator.
inline int writer_of_stage(int stage) { return stage + 1; }

}  // namespace conveyor::trace
