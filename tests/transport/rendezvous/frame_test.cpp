#include <doctest/doctest.h>

#include "transport/rendezvous/frame.hpp"

using namespace conveyor::rendezvous;

namespace {

Message round_trip(const Message& m) {
  const Bytes frame = encode_frame(m);
  REQUIRE(frame.size() >= kLengthBytes + 1);
  const std::uint32_t length = decode_length(std::span<const std::uint8_t, 4>(frame.data(), 4));
  REQUIRE(length == frame.size() - kLengthBytes);
  REQUIRE(check_length(length, kDefaultMaxFrameBytes).ok());
  Message out;
  const Status s = decode_payload(std::span(frame).subspan(kLengthBytes), &out);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(out.index() == m.index());
  return out;
}

Status decode(const Bytes& payload) {
  Message out;
  return decode_payload(payload, &out);
}

}  // namespace

TEST_CASE("every frame type survives an encode and decode round trip") {
  Challenge c{true, {}};
  c.nonce[0] = 7;
  c.nonce[31] = 9;
  auto c2 = std::get<Challenge>(round_trip(c));
  CHECK(c2.auth_required);
  CHECK(c2.nonce == c.nonce);

  CHECK(std::get<Auth>(round_trip(Auth{{1, 2, 3}})).mac == Bytes{1, 2, 3});
  round_trip(Welcome{});
  CHECK(std::get<Refused>(round_trip(Refused{"wrong job token"})).reason == "wrong job token");

  auto j = std::get<JoinRequest>(round_trip(JoinRequest{3, 4, 5000}));
  CHECK(j.rank == 3);
  CHECK(j.world_size == 4);
  CHECK(j.timeout_ms == 5000);
  auto b = std::get<BarrierRequest>(round_trip(BarrierRequest{2, "step 7", 100}));
  CHECK(b.rank == 2);
  CHECK(b.name == "step 7");
  CHECK(b.timeout_ms == 100);
  auto s = std::get<SetRequest>(round_trip(SetRequest{"nccl/0-1", Bytes{0, 255, 0}}));
  CHECK(s.key == "nccl/0-1");
  CHECK(s.value == Bytes{0, 255, 0});
  CHECK(std::get<GetRequest>(round_trip(GetRequest{""})).key.empty());
  auto w = std::get<WaitRequest>(round_trip(WaitRequest{"k", 0xFFFFFFFFu}));
  CHECK(w.timeout_ms == 0xFFFFFFFFu);
  CHECK(std::get<HeartbeatRequest>(round_trip(HeartbeatRequest{9})).rank == 9);
  CHECK(std::get<DeadRanksRequest>(round_trip(DeadRanksRequest{250})).max_silence_ms == 250);
  round_trip(ClockProbe{});
  round_trip(OkReply{});
  CHECK(!std::get<ValueReply>(round_trip(ValueReply{})).value);
  CHECK(std::get<ValueReply>(round_trip(ValueReply{Bytes{}})).value == Bytes{});
  CHECK(std::get<RanksReply>(round_trip(RanksReply{{1, 3}})).ranks == std::vector<std::uint32_t>{1, 3});
  auto cr = std::get<ClockReply>(round_trip(ClockReply{-1, 2, INT64_MIN, INT64_MAX}));
  CHECK(cr.steady_receive_ns == -1);
  CHECK(cr.steady_send_ns == 2);
  CHECK(cr.system_receive_ns == INT64_MIN);
  CHECK(cr.system_send_ns == INT64_MAX);
  auto e = std::get<ErrorReply>(round_trip(ErrorReply{RemoteErrc::timeout, "late"}));
  CHECK(e.code == RemoteErrc::timeout);
  CHECK(e.message == "late");
}

TEST_CASE("the length field is little-endian and counts the type byte and fields") {
  const Bytes frame = encode_frame(HeartbeatRequest{0x01020304});
  CHECK(frame == Bytes{5, 0, 0, 0, 0x15, 4, 3, 2, 1});
}

TEST_CASE("a frame length of zero or above the limit is rejected before reading the body") {
  CHECK(!check_length(0, 1024).ok());
  CHECK(check_length(1, 1024).ok());
  CHECK(check_length(1024, 1024).ok());
  const Status s = check_length(0xFFFFFFF0u, kDefaultMaxFrameBytes);
  CHECK(!s.ok());
  CHECK(s.message().find("4294967280") != std::string::npos);
  CHECK(s.message().find("1048576") != std::string::npos);
}

TEST_CASE("unknown types, truncated fields, leftovers and bad bools are malformed") {
  CHECK(decode(Bytes{0x7F}).message().find("unknown frame type 0x7f") != std::string::npos);
  CHECK(!decode(Bytes{}).ok());
  // join needs 12 bytes of fields
  CHECK(decode(Bytes{0x10, 1, 0, 0, 0}).message().find("malformed join frame") != std::string::npos);
  // a string announcing more bytes than follow
  CHECK(!decode(Bytes{0x13, 0xFF, 0xFF, 0xFF, 0x7F, 'a'}).ok());
  // one byte too many after a heartbeat's rank
  CHECK(decode(Bytes{0x15, 0, 0, 0, 0, 0}).message().find("left over") != std::string::npos);
  // a bool that is neither 0 nor 1
  CHECK(!decode(Bytes{0x21, 2}).ok());
  // a ranks count that does not match the bytes present (no huge reservation)
  CHECK(!decode(Bytes{0x22, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0}).ok());
  // an error code outside the known ones
  CHECK(!decode(Bytes{0x2F, 9, 0, 0, 0, 0}).ok());
}

TEST_CASE("only client requests count as requests") {
  CHECK(is_request(JoinRequest{}));
  CHECK(is_request(ClockProbe{}));
  CHECK(!is_request(Auth{}));
  CHECK(!is_request(OkReply{}));
  CHECK(!is_request(Welcome{}));
  CHECK(type_name(0x42) == "unknown type 0x42");
}

TEST_CASE("follow and changes frames survive a round trip and count their own length") {
  auto f = std::get<FollowRequest>(round_trip(FollowRequest{INT64_MAX, 250}));
  CHECK(f.since_seq == INT64_MAX);
  CHECK(f.timeout_ms == 250);
  const ChangesReply c{
      42, 3, {{0, "p0", "host a"}, {2, "", ""}}, {{"lost/1", Bytes{'1'}}, {"", Bytes{}}}};
  auto c2 = std::get<ChangesReply>(round_trip(c));
  CHECK(c2.seq == 42);
  CHECK(c2.world_size == 3);
  CHECK(c2.joined == c.joined);
  CHECK(c2.values == c.values);
  CHECK(changes_frame_length(c) == encode_frame(c).size() - kLengthBytes);
  CHECK(changes_frame_length(ChangesReply{}) == encode_frame(ChangesReply{}).size() - kLengthBytes);
  CHECK(is_request(FollowRequest{}));
  CHECK(!is_request(ChangesReply{}));
  CHECK(type_name(0x18) == "follow");
  CHECK(type_name(0x24) == "changes");
}

TEST_CASE("follow and changes frames with impossible fields are malformed, saying which") {
  auto message = [](const Message& m) {
    const Bytes frame = encode_frame(m);
    return decode(Bytes(frame.begin() + kLengthBytes, frame.end())).message();
  };
  CHECK(message(FollowRequest{-1, 0}) == "malformed follow frame: since_seq -1 is negative");
  CHECK(message(ChangesReply{-5, 0, {}, {}}) == "malformed changes frame: seq -5 is negative");
  CHECK(message(ChangesReply{1, 2, {{5, "", ""}}, {}}) ==
        "malformed changes frame: joined rank 5 is out of range for world size 2");
  CHECK(message(ChangesReply{1, 0, {{0, "", ""}}, {}}) ==
        "malformed changes frame: joined rank 0 is out of range for world size 0");
  CHECK(message(ChangesReply{1, 4, {{2, "", ""}, {2, "", ""}}, {}}) ==
        "malformed changes frame: joined rank 2 follows rank 2 (ranks must ascend, each once)");
  CHECK(message(ChangesReply{1, 4, {}, {{"k", {}}, {"k", {1}}}}) ==
        "malformed changes frame: key \"k\" comes twice");
  // Counts larger than the bytes that follow could hold: refused before any reservation.
  const Bytes huge_ranks{0x24, 1,    0,    0,    0,    0, 0, 0, 0, 4, 0,
                         0,    0,    0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0};
  CHECK(decode(huge_ranks).message() ==
        "malformed changes frame: 4294967295 joined ranks announced but only 4 bytes follow");
  const Bytes huge_values{0x24, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0};
  CHECK(decode(huge_values).message() ==
        "malformed changes frame: 65535 values announced but only 0 bytes follow");
  // A value's length running past the end.
  const Bytes cut{0x24, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0,
                  0,    0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'k', 9, 0};
  CHECK(decode(cut).message().find("malformed changes frame") == 0);
}
