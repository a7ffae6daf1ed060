#include "actors/trace/trace_record.hpp"

namespace conveyor::trace {

std::string_view record_kind_name(RecordKind k) {
  switch (k) {
    case RecordKind::action: return "action";
    case RecordKind::pipe_send: return "pipe_send";
    case RecordKind::pipe_receive: return "pipe_receive";
    case RecordKind::plan_send: return "plan_send";
    case RecordKind::plan_receive: return "plan_receive";
    case RecordKind::report_send: return "report_send";
    case RecordKind::report_receive: return "report_receive";
    case RecordKind::optimizer_send: return "optimizer_send";
    case RecordKind::optimizer_receive: return "optimizer_receive";
    case RecordKind::done_send: return "done_send";
    case RecordKind::done_receive: return "done_receive";
    case RecordKind::step_begin: return "step_begin";
    case RecordKind::replan: return "replan";
    case RecordKind::joined: return "joined";
  }
  return "unknown";
}

bool is_send(RecordKind k) {
  return k == RecordKind::pipe_send || k == RecordKind::plan_send ||
         k == RecordKind::report_send || k == RecordKind::optimizer_send ||
         k == RecordKind::done_send;
}

bool is_receive(RecordKind k) {
  return k == RecordKind::pipe_receive || k == RecordKind::plan_receive ||
         k == RecordKind::report_receive || k == RecordKind::optimizer_receive ||
         k == RecordKind::done_receive;
}

bool peer_is_node(RecordKind k) { return k == RecordKind::replan || k == RecordKind::joined; }

Stream stream_of(RecordKind k) {
  if (is_send(k)) return Stream::send;
  if (is_receive(k)) return Stream::receive;
  return Stream::compute;
}

}  // namespace conveyor::trace
