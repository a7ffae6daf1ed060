// checkpoint.writers every_node: at start every node proves it sees node 0's checkpoint
// folder (shared_folder_check.hpp), against a real rendezvous store on loopback. Node 1's
// view of the filesystem is the real one, or one that hides node 0's probe file: a host
// on which checkpoint.dir is another (local) folder.
#include <doctest/doctest.h>

#include <filesystem>
#include <future>
#include <string>

#include "actors/checkpoint/filesystem.hpp"
#include "apps/train/shared_folder_check.hpp"
#include "kernels/common/error.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"
#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

namespace {

// The real filesystem, but node 0's probe files are not there: another host's folder.
class OtherHost final : public checkpoint::Filesystem {
 public:
  std::unique_ptr<checkpoint::WritableFile> create(const std::string& p) override { return real().create(p); }
  std::unique_ptr<checkpoint::ReadableFile> open(const std::string& p) override { return real().open(p); }
  void rename(const std::string& a, const std::string& b) override { real().rename(a, b); }
  void sync_dir(const std::string& d) override { real().sync_dir(d); }
  void remove_file(const std::string& p) override { real().remove_file(p); }
  void remove_all(const std::string& p) override { real().remove_all(p); }
  void make_dirs(const std::string& d) override { real().make_dirs(d); }
  bool exists(const std::string& p) override { return p.find(".probe-") == std::string::npos && real().exists(p); }
  bool is_dir(const std::string& p) override { return real().is_dir(p); }
  std::vector<checkpoint::DirEntry> list(const std::string& d) override { return real().list(d); }

 private:
  static checkpoint::Filesystem& real() { return checkpoint::posix_filesystem(); }
};

std::string check_error(RendezvousClient& store, int node, const std::string& folder, checkpoint::Filesystem& fs) {
  try {
    check_shared_folder(store, node, 2, folder, fs, 5s);
  } catch (const InputError& e) {
    return e.what();
  }
  return "seen";
}

// Node 0 and node 1 check at once; their two outcomes.
std::pair<std::string, std::string> check_two(const std::string& folder, checkpoint::Filesystem& node1_fs) {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  RendezvousClient node0(testing::client_options(server)), node1(testing::client_options(server));
  auto one = std::async(std::launch::async, [&] { return check_error(node1, 1, "ignored", node1_fs); });
  const auto zero = check_error(node0, 0, folder, checkpoint::posix_filesystem());
  return {zero, one.get()};
}

}  // namespace

TEST_CASE("every node seeing node 0's checkpoint folder passes the start, and leaves no probe behind") {
  testing::ScratchDir dir("shared_seen");
  const auto folder = dir / "run/checkpoints";  // created by the check
  const auto [zero, one] = check_two(folder, checkpoint::posix_filesystem());
  CHECK(zero == "seen");
  CHECK(one == "seen");
  REQUIRE(std::filesystem::is_directory(folder));
  CHECK(std::filesystem::is_empty(folder));
}

TEST_CASE("a node that does not see node 0's checkpoint folder fails the start on both nodes, naming the folder") {
  testing::ScratchDir dir("shared_blind");
  OtherHost other;
  const auto [zero, one] = check_two(dir.path(), other);
  for (const auto& why : {zero, one}) {
    INFO(why);
    CHECK(why.find("node 1 does not see node 0's checkpoint folder " + dir.path()) != std::string::npos);
    CHECK(why.find("checkpoint.dir must be one folder that every node sees") != std::string::npos);
    CHECK(why.find("checkpoint.writers: node0") != std::string::npos);
  }
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("a node 0 that never publishes its folder fails the other nodes' start within the bound") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  RendezvousClient node1(testing::client_options(server));
  try {
    check_shared_folder(node1, 1, 2, "ignored", checkpoint::posix_filesystem(), 200ms);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("checking that every node sees the checkpoint folder") != std::string::npos);
  }
}
