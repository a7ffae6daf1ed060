// The enum-valued config keys (apps/config/config_enums.hpp): each table reads back both
// ways, a key takes exactly its table's names, and the resolved config writes the name.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "apps/config/config_enums.hpp"
#include "apps/config/config_keys.hpp"
#include "apps/config/config_loader.hpp"

using namespace conveyor;

namespace {

template <class E>
void check_round_trip() {
  for (const auto& name : enum_names<E>()) {
    const auto value = parse_enum<E>(name);
    REQUIRE(value.has_value());
    CHECK(enum_name(*value) == name);
  }
  CHECK_FALSE(parse_enum<E>("no-such-name").has_value());
  CHECK_FALSE(parse_enum<E>("").has_value());
}

// `key` takes each of E's names and writes it back as given.
template <class E>
void check_key(const std::string& key) {
  for (const auto& name : enum_names<E>()) {
    INFO(key << " = " << name);
    const RunConfig c = load_run_config("", {key + "=" + name});
    CHECK(find_config_key(key)->get(c).Scalar() == name);
  }
}

}  // namespace

TEST_CASE("every config enum's names parse to the value they name, and nothing else parses") {
  check_round_trip<PipelineSchedule>();
  check_round_trip<PartitionMode>();
  check_round_trip<DeviceKind>();
  check_round_trip<ModelDtype>();
  check_round_trip<StageThreads>();
  check_round_trip<AttentionChoice>();
  check_round_trip<MasterDtype>();
  check_round_trip<GradDtype>();
  check_round_trip<TransportKind>();
  check_round_trip<CheckpointWriters>();
  check_round_trip<NanPolicy>();
  check_round_trip<FaultPolicy>();
  check_round_trip<BuddyCopies>();
  check_round_trip<ShrinkPolicy>();
  check_round_trip<GrowPolicy>();
}

TEST_CASE("the enum keys take their names and write them back, auto is spelled auto") {
  // (pipeline.schedule: config_loader_test loads every schedule with the chunks it needs.)
  check_key<StageThreads>("runtime.stage_threads");
  check_key<AttentionChoice>("runtime.attention");
  check_key<NanPolicy>("fault.on_nan");
  check_key<FaultPolicy>("fault.policy");
  check_key<BuddyCopies>("fault.buddy_copies");
  check_key<LeaderFailoverPolicy>("fault.leader_failover");
  check_key<GrowPolicy>("fault.grow");
  check_key<CheckpointWriters>("checkpoint.writers");
  check_key<TransportKind>("transport.kind");
  check_key<MasterDtype>("optim.master");
  CHECK(enum_name(BuddyCopies::automatic) == "auto");
  CHECK(enum_name(TransportKind::automatic) == "auto");
  CHECK(enum_name(ModelDtype::automatic) == "auto");
  CHECK(enum_name(PartitionMode::automatic) == "auto");
  // "explicit" names the mode a list sets; as a value it is refused.
  CHECK_THROWS(load_run_config("", {"pipeline.partition=explicit"}));
}
