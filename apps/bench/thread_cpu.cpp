#include "apps/bench/thread_cpu.hpp"

#include <filesystem>
#include <fstream>
#include <string>

namespace conveyor {

std::optional<ProcessCpu> process_cpu(pid_t pid, std::string_view thread_name) {
  namespace fs = std::filesystem;
  const fs::path tasks = fs::path("/proc") / std::to_string(pid) / "task";
  std::error_code ec;
  ProcessCpu cpu;
  bool any = false;
  for (const auto& task : fs::directory_iterator(tasks, ec)) {
    std::ifstream stat(task.path() / "schedstat");
    double ns = 0;
    if (!(stat >> ns)) continue;  // the thread ended meanwhile
    any = true;
    cpu.total_s += ns / 1e9;
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm == thread_name) {
      cpu.thread_s += ns / 1e9;
      cpu.thread_found = true;
    }
  }
  if (!any) return std::nullopt;
  return cpu;
}

}  // namespace conveyor
