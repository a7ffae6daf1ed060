#include "actors/messages/error_text.hpp"

namespace conveyor {

std::string error_text(const caf::actor_system& system, const caf::error& error) {
  const auto& ctx = error.context();
  if (ctx.match_elements<std::string>()) return ctx.get_as<std::string>(0);
  return system.render(error);
}

std::string exception_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

caf::error failure(std::string text) {
  return caf::make_error(caf::sec::runtime_error, std::move(text));
}

}  // namespace conveyor
