// `conveyor train` with bad input: exit code 2, one `error:` line on stderr naming the
// culprit (key or file) and the bad value, nothing on stdout, and nothing written to the
// --out folder (not created when absent, left empty when it already existed).
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

struct BadInput {
  std::string what;
  // Writes the files the case needs into its own temp dir; returns the arguments after
  // `conveyor train` (without --out) and the parts the error line must hold.
  std::function<void(const TempDir&, std::vector<std::string>& args,
                     std::vector<std::string>& parts)>
      setup;
};

// Raw uint16 little-endian token ids, as nanoGPT writes them.
std::string uint16_file(const std::vector<std::uint16_t>& ids) {
  std::string bytes;
  for (auto id : ids) {
    bytes.push_back(static_cast<char>(id & 0xff));
    bytes.push_back(static_cast<char>(id >> 8));
  }
  return bytes;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// `part` with "{file}" replaced by `file`.
std::string with_file(std::string part, const std::string& file) {
  if (const auto at = part.find("{file}"); at != std::string::npos) part.replace(at, 6, file);
  return part;
}

bool is_empty_dir(const fs::path& p) { return fs::is_directory(p) && fs::is_empty(p); }

// Runs the case twice, with --out naming a folder that does not exist and one that exists
// and is empty, each in a fresh temp dir.
void check_rejected(const BadInput& c) {
  for (const bool out_exists : {false, true}) {
    TempDir dir;
    std::vector<std::string> args{"train"}, parts;
    c.setup(dir, args, parts);
    const fs::path out = dir.path() / "out";
    if (out_exists) fs::create_directory(out);
    args.insert(args.end(), {"--out", out.string()});

    const CommandResult r = run_conveyor(args, 30);
    INFO("case: " << c.what << (out_exists ? " (--out exists)" : " (--out absent)"));
    INFO("stderr: " << r.err);
    INFO("stdout: " << r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    const auto lines = split_lines(r.err);
    CHECK(lines.size() == 1);  // CHECK, not REQUIRE: every case reports
    const std::string first = lines.empty() ? "" : lines[0];
    CHECK(first.rfind("error: ", 0) == 0);
    for (const auto& part : parts) CHECK_MESSAGE(contains(first, part), "missing: " << part);
    if (out_exists) {
      CHECK(is_empty_dir(out));
    } else {
      CHECK_FALSE(fs::exists(out));
    }
  }
}

void check_all_rejected(const std::vector<BadInput>& cases) {
  for (const auto& c : cases) check_rejected(c);
}

// A case that only adds `--set` overrides; `parts` must appear in the error line.
BadInput bad_set(std::string what, std::vector<std::string> sets, std::vector<std::string> parts) {
  return {std::move(what), [sets, parts](const TempDir&, auto& args, auto& want) {
            for (const auto& s : sets) args.insert(args.end(), {"--set", s});
            want = parts;
          }};
}

// A case whose data file holds `bytes`; "{file}" in `parts` stands for its path.
BadInput bad_data(std::string what, std::string bytes, std::vector<std::string> sets,
                  std::vector<std::string> parts) {
  return {std::move(what), [bytes, sets, parts](const TempDir& dir, auto& args, auto& want) {
            const std::string file = dir.write("data.bin", bytes);
            args.insert(args.end(), {"--set", "data.path=" + file});
            for (const auto& s : sets) args.insert(args.end(), {"--set", s});
            for (const auto& p : parts) want.push_back(with_file(p, file));
          }};
}

// A case whose config file holds `text`; "{file}" in `parts` stands for its path.
BadInput bad_config(std::string what, std::string text, std::vector<std::string> parts) {
  return {std::move(what), [text, parts](const TempDir& dir, auto& args, auto& want) {
            const std::string file = dir.write("config.yaml", text);
            args.push_back(file);
            for (const auto& p : parts) want.push_back(with_file(p, file));
          }};
}

}  // namespace

TEST_CASE("a bad config key or value exits 2 with one error line naming it, and writes nothing") {
  check_all_rejected({
      bad_set("unknown key by --set", {"model.layerz=4"}, {"--set", "model.layerz"}),
      bad_config("unknown key in the file", "model:\n  layers: 4\n  layerz: 4\n",
                 {"{file}:3", "model.layerz"}),
      bad_config("wrong type in the file", "train:\n  steps: many\n",
                 {"{file}:2", "train.steps", "many"}),
      bad_set("wrong type by --set (integer)", {"model.layers=abc"}, {"model.layers", "abc"}),
      bad_set("wrong type by --set (number)", {"train.lr=fast"}, {"train.lr", "fast"}),
      bad_set("zero size", {"model.layers=0"}, {"model.layers", "0"}),
      bad_set("zero d_model", {"model.d_model=0"}, {"model.d_model", "0"}),
      bad_set("negative size", {"pipeline.micro_batches=-3"}, {"pipeline.micro_batches", "-3"}),
      bad_set("negative micro-batch size", {"pipeline.micro_batch_size=-1"},
              {"pipeline.micro_batch_size", "-1"}),
      bad_set("zero steps", {"train.steps=0"}, {"train.steps", "0"}),
      bad_set("more stages than layers", {"model.layers=4", "pipeline.stages=5"},
              {"pipeline.stages", "5", "model.layers", "4"}),
      bad_set("heads not dividing d_model", {"model.d_model=64", "model.heads=3"},
              {"model.heads", "3", "model.d_model", "64"}),
      bad_set("unknown schedule", {"pipeline.schedule=zigzag"},
              {"pipeline.schedule", "zigzag", "gpipe", "1f1b"}),
      bad_set("unknown data format", {"data.format=csv"}, {"data.format", "csv", "text", "tokens"}),
      bad_set("unknown checkpoint writers", {"checkpoint.writers=all"},
              {"checkpoint.writers", "all", "node0", "every_node"}),
      bad_set("a zero wait for other nodes' shards", {"checkpoint.remote_timeout_s=0"},
              {"checkpoint.remote_timeout_s", "0"}),
  });
}

TEST_CASE("a bad model.arch combination exits 2 with one error line naming the key, and writes nothing") {
  check_all_rejected({
      bad_set("unknown architecture", {"model.arch=mistral"}, {"model.arch", "mistral", "gpt2", "llama"}),
      bad_set("a llama key with gpt2", {"model.kv_heads=2"}, {"model.kv_heads", "2", "model.arch gpt2"}),
      bad_set("a llama number with gpt2", {"model.norm_eps=1e-6"},
              {"model.norm_eps", "1e-06", "model.arch llama"}),
      bad_set("kv_heads not dividing heads", {"model.arch=llama", "model.kv_heads=3"},
              {"model.kv_heads", "3", "model.heads", "4"}),
      bad_set("an odd head size for rotary", {"model.arch=llama", "model.d_model=36"},
              {"model.heads", "4", "= 9", "rotary"}),
      bad_set("a llama3 number without llama3 scaling", {"model.arch=llama", "model.rope_scaling_factor=16"},
              {"model.rope_scaling_factor", "16", "model.rope_scaling none"}),
      bad_set("llama3 bounds in the wrong order",
              {"model.arch=llama", "model.rope_scaling=llama3", "model.rope_high_freq_factor=0.5"},
              {"model.rope_high_freq_factor", "0.5", "model.rope_low_freq_factor", "1"}),
      bad_set("unknown rope scaling", {"model.arch=llama", "model.rope_scaling=yarn"},
              {"model.rope_scaling", "yarn", "none", "llama3"}),
      bad_set("a negative ffn_dim", {"model.arch=llama", "model.ffn_dim=-1"}, {"model.ffn_dim", "-1"}),
  });
}

TEST_CASE("a bad parallel.data exits 2 with one error line naming the key, and writes nothing") {
  check_all_rejected({
      bad_set("zero replicas", {"parallel.data=0"}, {"parallel.data", "0"}),
      bad_set("negative replicas", {"parallel.data=-2"}, {"parallel.data", "-2"}),
      bad_set("replicas not dividing the micro-batches",
              {"parallel.data=3", "fault.policy=abort"},
              {"parallel.data", "3", "pipeline.micro_batches", "8"}),
      // Over processes a failed stage restores its snapshot (no cross-process replica copy).
      {"replicas over several processes with stage restarts and no snapshots",
       [](const TempDir&, auto& args, auto& want) {
         args.insert(args.end(), {"--set", "parallel.data=2", "--set", "fault.policy=restart",
                                  "--set", "fault.snapshot_every=0", "--nnodes", "2",
                                  "--node-rank", "0", "--rdzv", "127.0.0.1:1"});
         want = {"parallel.data: 2 over 2 processes", "fault.policy restart",
                 "fault.snapshot_every must be > 0"};
       }},
      // Checked before the rendezvous: a wrong split never waits for the other nodes.
      {"fewer stage actors than nodes",
       [](const TempDir&, auto& args, auto& want) {
         args.insert(args.end(), {"--set", "parallel.data=2", "--set", "fault.policy=abort",
                                  "--set", "pipeline.stages=1", "--nnodes", "4",
                                  "--node-rank", "0", "--rdzv", "127.0.0.1:1"});
         want = {"parallel.data=2", "pipeline.stages=1", "4 nodes", "at least one stage"};
       }},
      {"checkpoints of replicas whose replica 0 spans nodes",
       [](const TempDir&, auto& args, auto& want) {
         args.insert(args.end(), {"--set", "parallel.data=2", "--set", "fault.policy=abort",
                                  "--set", "pipeline.stages=2", "--set", "checkpoint.every=2",
                                  "--nnodes", "4", "--node-rank", "0", "--rdzv",
                                  "127.0.0.1:1"});
         want = {"checkpoint.every", "parallel.data: 2", "replica 0", "nodes 0, 1"};
       }},
      // Each stage's AdamW state is split over its replicas: only node 0 merges the parts.
      {"nodes writing their own shards of split optimizer state",
       [](const TempDir&, auto& args, auto& want) {
         args.insert(args.end(), {"--set", "parallel.data=2", "--set", "optim.shard_state=true", "--set",
                                  "checkpoint.writers=every_node", "--nnodes", "2", "--node-rank", "0",
                                  "--rdzv", "127.0.0.1:1"});
         want = {"checkpoint.writers: every_node", "optim.shard_state", "checkpoint.writers: node0"};
       }},
  });
}

TEST_CASE("a bad data file exits 2 with one error line naming the file, and writes nothing") {
  check_all_rejected({
      {"missing data file",
       [](const TempDir& dir, auto& args, auto& want) {
         const std::string file = dir / "no_such_corpus.txt";
         args.insert(args.end(), {"--set", "data.path=" + file});
         want = {file};
       }},
      bad_data("empty text file", "", {}, {"{file}", "empty"}),
      bad_data("empty tokens file", "", {"data.format=tokens"}, {"{file}", "empty"}),
      bad_data("tokens file of odd length", "abcde", {"data.format=tokens"}, {"{file}", "5"}),
      bad_data("token id >= model.vocab", uint16_file({1, 2, 3, 4, 5, 6, 7, 150, 8, 9}),
               {"data.format=tokens", "model.vocab=100"},
               {"{file}", "150", "position 7", "model.vocab", "100"}),
      bad_data("text too short for one sequence in each split", "Hello, world.\n", {},
               {"{file}: corpus of 14 tokens is too small", "model.seq_len", "check data.path"}),
  });
}

TEST_CASE("a bad config file exits 2 with one error line naming the file, and writes nothing") {
  check_all_rejected({
      bad_config("not YAML", "model: [1, 2\ntrain: {\n", {"{file}", "YAML"}),
      bad_config("not a mapping (a list)", "- model\n- train\n", {"{file}", "mapping"}),
      bad_config("not a mapping (a scalar)", "just some words\n", {"{file}", "mapping"}),
      {"missing config file",
       [](const TempDir& dir, auto& args, auto& want) {
         const std::string file = dir / "no_such_config.yaml";
         args.push_back(file);
         want = {file};
       }},
  });
}

TEST_CASE("a bad command line exits 2 with one error line naming the flag, and writes nothing") {
  check_all_rejected({
      bad_set("--set without '='", {"model.layers"}, {"--set", "model.layers"}),
      {"unknown flag",
       [](const TempDir&, auto& args, auto& want) {
         args.push_back("--bogus-flag");
         want = {"--bogus-flag"};
       }},
      {"--format xml",
       [](const TempDir&, auto& args, auto& want) {
         args.insert(args.end(), {"--format", "xml"});
         want = {"--format", "xml"};
       }},
  });
}

TEST_CASE("a bad config without --out creates no runs folder in the working dir") {
  TempDir dir;
  const CommandResult r = run_conveyor(
      {"train", source_path("configs/tiny.yaml"), "--set", "model.layerz=4"}, 30,
      dir.path().string());
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(fs::is_empty(dir.path()));
}

TEST_CASE("a path that is not UTF-8 is refused at start, before anything is written") {
  TempDir dir;
  const std::string out = dir / "run-\xff";
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2", "--out", out});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--out: the path is not valid UTF-8") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  const auto data = run_conveyor({"train", "configs/tiny.yaml", "--set", "data.path=" + (dir / "d-\xfe.txt"),
                                  "--out", dir / "run"});
  CHECK(data.exit_code == 2);
  CHECK(data.err.find("data.path: the path is not valid UTF-8") != std::string::npos);
}

TEST_CASE("an --out that is a loop of symbolic links is bad input, exit 2") {
  TempDir dir;
  fs::create_symlink(dir.path() / "b", dir.path() / "a");
  fs::create_symlink(dir.path() / "a", dir.path() / "b");
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2", "--out", dir / "a"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("Too many levels of symbolic links") != std::string::npos);
}
