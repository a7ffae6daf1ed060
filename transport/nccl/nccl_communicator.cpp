#include "transport/nccl/nccl_communicator.hpp"

#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "kernels/cuda/check.hpp"

namespace conveyor {
namespace {

// Asynchronous errors are checked this often while a host wait spins on an event: often
// enough to stop early on a dead peer, rarely enough to cost nothing on an 8 KiB message.
constexpr auto kErrorCheckEvery = std::chrono::microseconds(200);

std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

// What the constructor shares with its setup thread; outlives a thread left parked.
struct Setup {
  enum class Phase { joining, connecting, done };
  std::mutex mu;
  std::condition_variable cv;
  Phase phase = Phase::joining;
  bool abandoned = false;  // the constructor gave up while the thread was joining
  ncclComm_t comm = nullptr;
  std::exception_ptr error;

  void finish(std::exception_ptr e) {
    std::lock_guard lock(mu);
    error = std::move(e);
    phase = Phase::done;
    cv.notify_all();
  }
};

void run_setup(const std::shared_ptr<Setup>& setup, ncclUniqueId id, int ranks, int rank,
               int device, const std::string& name,
               const NcclCommunicator::FirstOperation& first) {
  ncclComm_t comm = nullptr;
  try {
    CUDA_CHECK(cudaSetDevice(device));  // NCCL binds the communicator to the current device
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;              // see the header: non-blocking costs a thread per call
    config.commName = name.c_str();   // shows in NCCL's own logs (NCCL_DEBUG=INFO)
    NCCL_CHECK(ncclCommInitRankConfig(&comm, ranks, id, rank, &config));
  } catch (...) {
    setup->finish(std::current_exception());
    return;
  }
  {
    std::unique_lock lock(setup->mu);
    if (setup->abandoned) {  // nobody will use it: the constructor has thrown already
      lock.unlock();
      (void)ncclCommAbort(comm);
      return;
    }
    setup->comm = comm;
    setup->phase = Setup::Phase::connecting;
  }
  std::exception_ptr error;
  try {
    first(comm);
  } catch (...) {
    error = std::current_exception();
  }
  setup->finish(std::move(error));
}

}  // namespace

ncclUniqueId NcclCommunicator::new_id() {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

NcclCommunicator::NcclCommunicator(const ncclUniqueId& id, int rank, int device,
                                   std::string edge, std::chrono::milliseconds timeout,
                                   const FirstOperation& first, int ranks)
    : rank_(rank), device_(device), edge_(std::move(edge)), timeout_(timeout) {
  if (ranks < 2 || rank < 0 || rank >= ranks)
    throw std::invalid_argument(describe() + ": rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks) + " (a communicator has 2 or more ranks)");
  auto setup = std::make_shared<Setup>();
  // The thread gets copies: it may outlive this constructor (see the header).
  std::thread worker(
      [setup, id, ranks, rank, device, name = edge_, first] {
        run_setup(setup, id, ranks, rank, device, name, first);
      });
  std::unique_lock lock(setup->mu);
  const bool finished = setup->cv.wait_until(lock, Clock::now() + timeout_,
                                             [&] { return setup->phase == Setup::Phase::done; });
  if (finished) {
    lock.unlock();
    worker.join();
    comm_ = setup->comm;
    if (setup->error) {
      abort();
      try {
        std::rethrow_exception(setup->error);
      } catch (const std::exception& e) {
        throw NcclError(describe() + ": setup failed: " + e.what());
      }
    }
    return;
  }
  if (setup->phase == Setup::Phase::joining) {
    setup->abandoned = true;
    lock.unlock();
    worker.detach();
    throw NcclTimeout(describe() + ": joining the communicator did not complete within " +
                      seconds_text(timeout_) +
                      " (transport.timeout_s): the peer rank never joined");
  }
  // Joined, but the first operation waits for a peer that does not connect: aborting
  // from here makes NCCL return from it on the setup thread.
  ncclComm_t stuck = setup->comm;
  lock.unlock();
  (void)ncclCommAbort(stuck);
  worker.join();
  throw NcclTimeout(describe() + ": connecting to the peer (the edge's first message) did not "
                    "complete within " + seconds_text(timeout_) +
                    " (transport.timeout_s); the communicator was aborted");
}

NcclCommunicator::~NcclCommunicator() {
  // ncclCommDestroy flushes outstanding work and may wait on the peer; a stage that is
  // being torn down (often because its peer failed) must not wait on anything, and the
  // owners drain their streams before this runs. Abort frees the same resources.
  abort();
}

std::string NcclCommunicator::describe() const {
  return "nccl: edge '" + edge_ + "' (rank " + std::to_string(rank_) + " on cuda:" +
         std::to_string(device_) + ")";
}

void NcclCommunicator::abort() noexcept {
  if (!comm_) return;
  ncclComm_t comm = comm_;
  comm_ = nullptr;
  (void)ncclCommAbort(comm);  // nothing to do about a failure: the handle is gone either way
}

void NcclCommunicator::fail(ncclResult_t state, std::string_view what) {
  const char* last = comm_ ? ncclGetLastError(comm_) : nullptr;
  std::string message = describe() + ": " + std::string(what) + " failed: " +
                        ncclGetErrorString(state);
  if (last && *last) message += " (" + std::string(last) + ")";
  abort();
  throw NcclError(message + "; the communicator was aborted");
}

void NcclCommunicator::fail_call(ncclResult_t status, const char* call, const char* file,
                                 int line) {
  fail(status, std::string(file) + ":" + std::to_string(line) + ": " + call);
}

void NcclCommunicator::fail_timeout(std::string_view what) {
  const std::string message = describe() + ": " + std::string(what) +
                              " did not complete within " + seconds_text(timeout_) +
                              " (transport.timeout_s); the communicator was aborted";
  abort();
  throw NcclTimeout(message);
}

void NcclCommunicator::fail_cancelled(std::string_view what, std::string_view why) {
  const std::string message = describe() + ": " + std::string(what) + ": " + std::string(why) +
                              "; the communicator was aborted";
  abort();
  throw NcclError(message);
}

void NcclCommunicator::check(std::string_view what) {
  if (!comm_)
    throw NcclError(describe() + ": " + std::string(what) + ": the communicator was aborted earlier");
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) fail(r, "ncclCommGetAsyncError during " + std::string(what));
  if (state != ncclSuccess && state != ncclInProgress) fail(state, what);
}

void NcclCommunicator::wait(cudaEvent_t event, std::string_view what,
                            Clock::time_point deadline, const std::function<bool()>& cancelled,
                            std::string_view why_cancelled) {
  auto next_check = Clock::now();
  for (;;) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) CUDA_CHECK(status);
    (void)cudaGetLastError();  // "not ready" is an answer, not an error to report later
    const auto now = Clock::now();
    if (now >= next_check) {
      check(what);
      if (cancelled && cancelled()) fail_cancelled(what, why_cancelled);
      next_check = now + kErrorCheckEvery;
    }
    if (now >= deadline) fail_timeout(what);
  }
}

}  // namespace conveyor
