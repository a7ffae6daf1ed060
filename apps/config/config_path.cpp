#include "apps/config/config_path.hpp"

namespace conveyor {

CLI::Validator config_path_check(const std::string& left_out) {
  // An empty description keeps the --help line as it was (CLI11 prints it beside the type).
  return CLI::Validator(
      [left_out](std::string& path) -> std::string {
        if (!path.empty()) return "";
        return "the config path is empty: give a YAML config file, or leave CONFIG out for " + left_out;
      },
      "");
}

}  // namespace conveyor
