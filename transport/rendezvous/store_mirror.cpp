#include "transport/rendezvous/store_mirror.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>

namespace conveyor {
namespace {

// Errors that no retry can mend: the primary or the follower said no, or spoke nonsense.
bool permanent(RendezvousErrc code) {
  return code == RendezvousErrc::invalid_request || code == RendezvousErrc::protocol ||
         code == RendezvousErrc::refused;
}

}  // namespace

StoreMirror::StoreMirror(RendezvousServer& follower, StoreMirrorOptions options)
    : follower_(follower), options_(std::move(options)) {
  options_.primary.connect_timeout = std::min(options_.primary.connect_timeout, options_.poll);
  thread_ = std::thread([this] { run(); });
}

StoreMirror::~StoreMirror() { stop(); }

void StoreMirror::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stopped_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::int64_t StoreMirror::seq() const { return seq_.load(); }

std::string StoreMirror::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

bool StoreMirror::stopping() const {
  std::lock_guard lock(mu_);
  return stop_;
}

bool StoreMirror::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !stopped_.wait_for(lock, d, [&] { return stop_; });
}

void StoreMirror::log(std::string_view line) const {
  if (options_.log)
    options_.log(line);
  else
    fmt::print(stderr, "{}\n", line);
}

void StoreMirror::note_error(std::string why) {
  std::lock_guard lock(mu_);
  last_error_ = std::move(why);
}

void StoreMirror::run() {
  std::optional<RendezvousClient> client;  // made again after each failure
  bool lost = false;                       // the primary could not be reached lately
  while (!stopping()) {
    try {
      if (!client) client.emplace(options_.primary);
      const rendezvous::ChangesReply changes = client->follow(seq_.load(), options_.poll);
      if (rendezvous::Status s = follower_.adopt(changes); !s.ok()) {
        if (!follower_.following()) return;  // promoted: nothing left to mirror
        throw RendezvousError(
            RendezvousErrc::invalid_request,
            "rendezvous: the follower refused the primary's changes: " + s.message());
      }
      seq_.store(changes.seq);
      if (lost)
        log(fmt::format("rendezvous mirror: following the primary again at seq {}", changes.seq));
      lost = false;
    } catch (const RendezvousError& e) {
      note_error(e.what());
      client.reset();
      if (permanent(e.code())) return end(e.what());
      if (!lost)
        log(fmt::format("rendezvous mirror: lost the primary at seq {} ({}); trying again every {}",
                        seq_.load(), e.what(), rendezvous::describe_duration(options_.retry)));
      lost = true;
      if (!pause(options_.retry)) return;
    } catch (const std::exception& e) {  // not the primary's doing: no retry would help
      note_error(e.what());
      return end(e.what());
    }
  }
}

void StoreMirror::end(std::string_view why) const {
  log(fmt::format("rendezvous mirror: stopped at seq {}: {}", seq_.load(), why));
}

}  // namespace conveyor
