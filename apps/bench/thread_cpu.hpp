#pragma once
// CPU time of another process and of one of its threads, from Linux's
// /proc/PID/task/TID/schedstat (nanoseconds on a CPU): what `bench serve` uses to say how
// much of a served run's CPU went to its HTTP thread, a figure the machine's noise does
// not blur as it blurs tokens/s. Linux only; nullopt where the files cannot be read.
#include <sys/types.h>

#include <optional>
#include <string_view>

namespace conveyor {

struct ProcessCpu {
  double total_s = 0;   // every live thread of the process
  double thread_s = 0;  // the threads named `thread_name`
  bool thread_found = false;
};

std::optional<ProcessCpu> process_cpu(pid_t pid, std::string_view thread_name);

}  // namespace conveyor
