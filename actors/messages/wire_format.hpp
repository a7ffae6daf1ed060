#pragma once
// How the protocol messages that cross processes serialize through CAF's middleman:
// inspect() overloads found by ADL, registered by add_wire_types() (messages.hpp).
//
// Wire format: CAF's binary serializer over the fields in the order written below;
// enums as their uint8 value; vectors element by element (so keep them short: action
// lists, losses, per-parameter gradient sums, timings). Tensors never cross CAF:
//   PipeHeader    the metadata of a PipeMessage; the payload moves on the edge's channel
//   WeightsReply  per model stage the names, shapes and dtypes; the bytes follow on the
//                 transport (edge_tags.hpp weight_tag) and a receiving process gets
//                 PendingPayload placeholders until fetch_remote_weights() fills them
// Changing anything here changes the protocol: bump kProtocolVersion (protocol.hpp).
//
// REQUIRES: visible wherever these types become CAF messages (messages.hpp includes it),
// so that every translation unit instantiates the same serialization.
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "actors/messages/edge_tags.hpp"
#include "actors/messages/pending_payload.hpp"
#include "actors/plan/protocol.hpp"

namespace conveyor {
namespace wire {

template <class Inspector>
using save_t = std::enable_if_t<Inspector::reads_state, typename Inspector::result_type>;
template <class Inspector>
using load_t = std::enable_if_t<!Inspector::reads_state, typename Inspector::result_type>;

// Plain structs (no enum, no pointer) use one overload for both directions; T may be
// const (CAF's to_string inspects const values).
template <class Inspector, class T, class Plain>
using both_t = std::enable_if_t<std::is_same_v<std::remove_const_t<T>, Plain>,
                                typename Inspector::result_type>;

template <class E>
std::uint8_t u8(E e) {
  return static_cast<std::uint8_t>(e);
}

/// What crosses CAF in place of a list of named tensors: names, shapes and dtypes. The
/// bytes follow on a channel, each under a tag of its own.
struct TensorListMeta {
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::uint8_t> dtypes;
};

inline TensorListMeta meta_of(const std::vector<NamedTensor>& tensors) {
  TensorListMeta m;
  for (const auto& t : tensors) {
    m.names.push_back(t.name);
    m.shapes.push_back(t.tensor.shape().dims());
    m.dtypes.push_back(u8(t.tensor.dtype()));
  }
  return m;
}

/// The tensors `m` describes as PendingPayload placeholders, the i-th waiting for the
/// bytes tagged tag_of(i). An error for lists of different lengths or an unknown dtype.
template <class TagOf>
caf::error placeholders(const TensorListMeta& m, TagOf tag_of, std::vector<NamedTensor>* out) {
  if (m.shapes.size() != m.names.size() || m.dtypes.size() != m.names.size())
    return caf::make_error(caf::sec::invalid_argument, "tensor list: inconsistent lists");
  out->clear();
  for (std::size_t i = 0; i < m.names.size(); ++i) {
    if (m.dtypes[i] > u8(DType::i32))
      return caf::make_error(caf::sec::invalid_argument, "tensor list: unknown dtype of " + m.names[i]);
    for (auto d : m.shapes[i])
      if (d < 0) return caf::make_error(caf::sec::invalid_argument, "tensor list: bad shape of " + m.names[i]);
    Shape shape(m.shapes[i]);
    const auto dtype = static_cast<DType>(m.dtypes[i]);
    const auto bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
    auto storage = std::make_shared<PendingPayload>(bytes, tag_of(static_cast<int>(i)));
    out->push_back(NamedTensor{m.names[i], Tensor::wrap(storage, shape, dtype)});
  }
  return caf::none;
}

}  // namespace wire

// -- sched::Action: stage, kind, micro_batch, chunk (in its namespace, for ADL) --
namespace sched {


template <class Inspector>
wire::save_t<Inspector> inspect(Inspector& f, const Action& x) {
  auto kind = wire::u8(x.kind);
  return f(caf::meta::type_name("Action"), x.stage, kind, x.micro_batch, x.chunk);
}

template <class Inspector>
wire::load_t<Inspector> inspect(Inspector& f, Action& x) {
  std::uint8_t kind = 0;
  auto done = caf::meta::load_callback([&]() -> caf::error {
    x.kind = static_cast<ActionKind>(kind);
    return caf::none;
  });
  return f(caf::meta::type_name("Action"), x.stage, kind, x.micro_batch, x.chunk, done);
}

}  // namespace sched

// -- StepPlan: round, step, phase, actions --

template <class Inspector>
wire::save_t<Inspector> inspect(Inspector& f, const StepPlan& x) {
  auto phase = wire::u8(x.phase);
  std::vector<sched::Action> actions;
  if (x.actions) actions = *x.actions;
  return f(caf::meta::type_name("StepPlan"), x.round, x.step, phase, actions, x.trace_id);
}

template <class Inspector>
wire::load_t<Inspector> inspect(Inspector& f, StepPlan& x) {
  std::uint8_t phase = 0;
  std::vector<sched::Action> actions;
  auto done = caf::meta::load_callback([&]() -> caf::error {
    x.phase = static_cast<Phase>(phase);
    x.actions = std::make_shared<const std::vector<sched::Action>>(std::move(actions));
    return caf::none;
  });
  return f(caf::meta::type_name("StepPlan"), x.round, x.step, phase, actions, x.trace_id, done);
}

// -- PipeHeader: kind, round, step, phase, micro_batch, from, to, shape, dtype, trace_id --

template <class Inspector>
wire::save_t<Inspector> inspect(Inspector& f, const PipeHeader& x) {
  auto kind = wire::u8(x.kind), phase = wire::u8(x.phase), dtype = wire::u8(x.dtype);
  return f(caf::meta::type_name("PipeHeader"), kind, x.round, x.step, phase, x.micro_batch,
           x.from_model_stage, x.to_model_stage, x.shape, dtype, x.trace_id);
}

template <class Inspector>
wire::load_t<Inspector> inspect(Inspector& f, PipeHeader& x) {
  std::uint8_t kind = 0, phase = 0, dtype = 0;
  auto done = caf::meta::load_callback([&]() -> caf::error {
    x.kind = static_cast<PipeKind>(kind);
    x.phase = static_cast<Phase>(phase);
    x.dtype = static_cast<DType>(dtype);
    return caf::none;
  });
  return f(caf::meta::type_name("PipeHeader"), kind, x.round, x.step, phase, x.micro_batch,
           x.from_model_stage, x.to_model_stage, x.shape, dtype, x.trace_id, done);
}

// -- StageReport and its parts --

template <class Inspector, class T>
wire::both_t<Inspector, T, ActionTiming> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("ActionTiming"), x.action, x.start_ns, x.end_ns);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, ModelStageGradSquares> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("ModelStageGradSquares"), x.model_stage, x.squares);
}

template <class Inspector>
wire::save_t<Inspector> inspect(Inspector& f, const StageReport& x) {
  auto phase = wire::u8(x.phase);
  return f(caf::meta::type_name("StageReport"), x.rank, x.round, x.step, phase, x.losses,
           x.grad_squares, x.timings, x.trace_id, x.allreduce_busy_ms, x.allreduce_exposed_ms);
}

template <class Inspector>
wire::load_t<Inspector> inspect(Inspector& f, StageReport& x) {
  std::uint8_t phase = 0;
  auto done = caf::meta::load_callback([&]() -> caf::error {
    x.phase = static_cast<Phase>(phase);
    return caf::none;
  });
  return f(caf::meta::type_name("StageReport"), x.rank, x.round, x.step, phase, x.losses,
           x.grad_squares, x.timings, x.trace_id, x.allreduce_busy_ms, x.allreduce_exposed_ms,
           done);
}

// -- optimizer step --

template <class Inspector, class T>
wire::both_t<Inspector, T, OptimizerStep> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("OptimizerStep"), x.step, x.lr, x.grad_scale, x.trace_id, x.skip);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, OptimizerDone> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("OptimizerDone"), x.rank, x.step, x.allgather_ms, x.trace_id);
}

// -- WeightsReply: rank, then per model stage its number and (name, shape, dtype) list --

template <class Inspector>
wire::save_t<Inspector> inspect(Inspector& f, const WeightsReply& x) {
  std::vector<int> model_stages;
  std::vector<std::vector<std::string>> names;
  std::vector<std::vector<std::vector<std::int64_t>>> shapes;
  std::vector<std::vector<std::uint8_t>> dtypes;
  for (const auto& m : x.model_stages) {
    model_stages.push_back(m.model_stage);
    names.emplace_back();
    shapes.emplace_back();
    dtypes.emplace_back();
    for (const auto& t : m.tensors) {
      names.back().push_back(t.name);
      shapes.back().push_back(t.tensor.shape().dims());
      dtypes.back().push_back(wire::u8(t.tensor.dtype()));
    }
  }
  return f(caf::meta::type_name("WeightsReply"), x.rank, model_stages, names, shapes, dtypes);
}

template <class Inspector>
wire::load_t<Inspector> inspect(Inspector& f, WeightsReply& x) {
  std::vector<int> model_stages;
  std::vector<std::vector<std::string>> names;
  std::vector<std::vector<std::vector<std::int64_t>>> shapes;
  std::vector<std::vector<std::uint8_t>> dtypes;
  auto done = caf::meta::load_callback([&]() -> caf::error {
    const auto n = model_stages.size();
    if (names.size() != n || shapes.size() != n || dtypes.size() != n)
      return caf::make_error(caf::sec::invalid_argument, "WeightsReply: inconsistent lists");
    x.model_stages.clear();
    int index = 0;  // over the whole reply: weight_tag (edge_tags.hpp)
    for (std::size_t i = 0; i < n; ++i) {
      ModelStageWeights m{model_stages[i], {}};
      if (shapes[i].size() != names[i].size() || dtypes[i].size() != names[i].size())
        return caf::make_error(caf::sec::invalid_argument, "WeightsReply: inconsistent lists");
      for (std::size_t j = 0; j < names[i].size(); ++j) {
        Shape shape(shapes[i][j]);
        const auto dtype = static_cast<DType>(dtypes[i][j]);
        const auto bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
        auto storage = std::make_shared<PendingPayload>(
            bytes, weight_tag(x.rank, index++));
        m.tensors.push_back(NamedTensor{names[i][j], Tensor::wrap(storage, shape, dtype)});
      }
      x.model_stages.push_back(std::move(m));
    }
    return caf::none;
  });
  return f(caf::meta::type_name("WeightsReply"), x.rank, model_stages, names, shapes, dtypes,
           done);
}

}  // namespace conveyor
