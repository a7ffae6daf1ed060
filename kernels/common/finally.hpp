#pragma once
// Runs a callable when the scope that holds it ends (a coroutine frame included): the
// clean-up of a connection or a session however its coroutine leaves.
//   Finally done{[&] { --open_connections; }};
namespace conveyor {

template <class F>
struct Finally {
  F f;
  ~Finally() { f(); }
};
template <class F>
Finally(F) -> Finally<F>;

}  // namespace conveyor
