#include "transport/collective/gloo/gloo_peer_sockets.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <gloo/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace conveyor {
namespace {

bool same_address(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
}

// A duplicate of this process's connected socket whose local address is `local`; -1 when
// there is none. The address is checked on the duplicate itself, so a descriptor closed
// and reused between listing and duplicating cannot be taken for it. A connected TCP
// socket's local address is shared by no other connected socket here: Gloo's listener of
// a pair accepts one connection.
int duplicate_socket_at(const sockaddr_storage& local) {
  DIR* fds = opendir("/proc/self/fd");
  if (!fds) return -1;
  int found = -1;
  while (const dirent* entry = readdir(fds)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == dirfd(fds)) continue;
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) continue;
    struct stat st {};
    sockaddr_storage mine{}, peer{};
    socklen_t mine_size = sizeof mine, peer_size = sizeof peer;
    if (fstat(copy, &st) == 0 && S_ISSOCK(st.st_mode) &&
        getsockname(copy, reinterpret_cast<sockaddr*>(&mine), &mine_size) == 0 &&
        getpeername(copy, reinterpret_cast<sockaddr*>(&peer), &peer_size) == 0 &&
        same_address(mine, local)) {
      found = copy;
      break;
    }
    close(copy);
  }
  closedir(fds);
  return found;
}

}  // namespace

GlooPeerSockets GlooPeerSockets::take(gloo::Context& context) {
  GlooPeerSockets sockets;
  for (int rank = 0; rank < context.size; ++rank) {
    if (rank == context.rank) continue;
    const auto* address =
        dynamic_cast<const gloo::transport::tcp::Address*>(&context.getPair(rank)->address());
    const int fd = address ? duplicate_socket_at(address->getSockaddr()) : -1;
    if (fd < 0)
      throw std::runtime_error("the TCP connection to rank " + std::to_string(rank) +
                               " was not found among this process's sockets");
    sockets.descriptors_.push_back(fd);
  }
  return sockets;
}

GlooPeerSockets::~GlooPeerSockets() {
  for (const int fd : descriptors_) close(fd);
}

GlooPeerSockets::GlooPeerSockets(GlooPeerSockets&& other) noexcept
    : descriptors_(std::exchange(other.descriptors_, {})) {}

GlooPeerSockets& GlooPeerSockets::operator=(GlooPeerSockets&& other) noexcept {
  if (this != &other) {
    for (const int fd : descriptors_) close(fd);
    descriptors_ = std::exchange(other.descriptors_, {});
  }
  return *this;
}

void GlooPeerSockets::shut_down() const {
  for (const int fd : descriptors_) shutdown(fd, SHUT_RDWR);  // ENOTCONN: already ended
}

}  // namespace conveyor
