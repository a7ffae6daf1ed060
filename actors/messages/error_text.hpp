#pragma once
#include <caf/all.hpp>
#include <exception>
#include <string>

namespace conveyor {

/// The message of an error made with make_error(code, "text"), or CAF's rendering.
std::string error_text(const caf::actor_system& system, const caf::error& error);

/// The message of the exception `e` holds ("unknown error" for one that is not a
/// std::exception).
std::string exception_text(std::exception_ptr e);

/// An actor failure carrying a human-readable message.
caf::error failure(std::string text);

}  // namespace conveyor
