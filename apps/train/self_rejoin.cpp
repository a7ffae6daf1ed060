#include "apps/train/self_rejoin.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "apps/text/message_text.hpp"
#include "apps/train/node_replacement.hpp"
#include "apps/train/supervisor.hpp"

extern char** environ;

namespace conveyor {
namespace {

constexpr const char* kSelfRejoins = "CONVEYOR_SELF_REJOINS";
std::vector<std::string> g_command_line;  // set once by main, before any thread

int self_rejoins() {
  const char* v = std::getenv(kSelfRejoins);
  return v ? std::atoi(v) : 0;
}

// The new image must not inherit the old one's sockets (a listening port nobody
// accepts on, connections peers think closed): every descriptor past stderr closes on exec.
void close_on_exec_past_stderr() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd > 2 && fd != own) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  ::closedir(dir);
}

}  // namespace

void remember_command_line(int argc, char** argv) { g_command_line.assign(argv, argv + argc); }

bool may_rejoin_itself(const RunConfig& config) {
  return takes_replacements(config) && !supervised() && self_rejoins() < config.fault.max_restarts &&
         !g_command_line.empty();
}

void rejoin_as_replacement(const std::string& why) {
  std::fprintf(stderr,
               "conveyor train: %s; node 0 has taken this node's stages away and waits for a replacement: "
               "this process starts again and rejoins the job as its own replacement\n",
               one_line_message(why).c_str());
  std::fflush(nullptr);
  // The environment of the new image, with the count of rejoins one higher; built here,
  // not with setenv, which other threads' getenv must not race.
  const std::string count = std::string(kSelfRejoins) + "=" + std::to_string(self_rejoins() + 1);
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kSelfRejoins, std::strlen(kSelfRejoins)) != 0 || (*e)[std::strlen(kSelfRejoins)] != '=')
      env.push_back(*e);
  env.push_back(const_cast<char*>(count.c_str()));
  env.push_back(nullptr);
  std::vector<char*> args;
  for (auto& a : g_command_line) args.push_back(a.data());
  args.push_back(nullptr);
  close_on_exec_past_stderr();
  ::execve("/proc/self/exe", args.data(), env.data());
  std::fprintf(stderr, "conveyor train: could not start again as this node's replacement: %s\n", std::strerror(errno));
}

}  // namespace conveyor
