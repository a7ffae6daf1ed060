#include "actors/coordinator/job_failure.hpp"

#include "actors/messages/error_text.hpp"

namespace conveyor {
namespace {

constexpr std::string_view kOpening = "the job failed on node 0: ";

}  // namespace

caf::error job_failed(const std::string& why) { return failure(std::string(kOpening) + why); }

std::optional<std::string> job_failure_reason(const caf::error& e) {
  if (!e || e != caf::sec::runtime_error) return std::nullopt;
  const auto& ctx = e.context();
  if (!ctx.match_elements<std::string>()) return std::nullopt;
  const auto& text = ctx.get_as<std::string>(0);
  if (text.rfind(kOpening, 0) != 0) return std::nullopt;
  return text.substr(kOpening.size());
}

}  // namespace conveyor
