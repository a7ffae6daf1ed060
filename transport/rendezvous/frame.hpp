#pragma once
// The rendezvous wire format and its codec. Pure: no sockets, no clocks; the server and
// the client both frame every byte they exchange through these functions.
//
// Frame
//   u32 length     little-endian; counts the bytes after itself (type + fields), so a
//                  frame occupies 4 + length bytes. 1 <= length <= max_frame_bytes
//                  (default 1 MiB, configurable on both ends). A reader checks the length
//                  before it allocates anything; a bad length drops the connection.
//   u8  type       FrameType below; an unknown type drops the connection.
//   ... fields     in the order listed, nothing after the last one.
// Field encodings
//   u8 / u32 / i64   little-endian (i64 two's complement)
//   str, bytes       u32 little-endian byte count, then the bytes (str: UTF-8, no NUL)
//   nonce, mac       exactly 32 raw bytes where noted
//   bool             u8, 0 or 1 (anything else is malformed)
//
// Conversation (one connection, strictly request → reply, one request at a time)
//   server → client  0x01 challenge   bool auth_required, nonce[32] (std::random_device)
//   client → server  0x02 auth        bytes mac = HMAC-SHA256(job token, nonce), empty
//                                     when the client has no token. The token itself
//                                     never crosses the wire.
//                                     str process: an id of the client's process, the
//                                     same on each of its connections (two processes
//                                     claiming one rank are told apart by it);
//                                     str origin: how messages name that process
//                                     ("host gpu7, pid 4242"). Both may be empty.
//   server → client  0x03 welcome     (no fields)                       — or —
//                    0x04 refused     str reason; then the server closes
//   then requests (client → server) and their replies (server → client):
//     0x10 join        u32 rank, u32 world_size, u32 timeout_ms   → ok | error
//     0x11 barrier     u32 rank, str name, u32 timeout_ms         → ok | error
//     0x12 set         str key, bytes value                       → ok
//     0x13 get         str key                                    → value
//     0x14 wait        str key, u32 timeout_ms                    → value | error
//     0x15 heartbeat   u32 rank                                   → ok | error
//     0x16 dead_ranks  u32 max_silence_ms                         → ranks
//     0x17 clock_probe (no fields)                                → clock_reply
//     0x18 follow      i64 since_seq, u32 timeout_ms              → changes | error
//                      (a standby mirroring this store: store_mirror.hpp)
//   replies
//     0x20 ok          (no fields)
//     0x21 value       bool found, then bytes value when found
//     0x22 ranks       u32 count, then count × u32 rank
//     0x23 clock_reply i64 steady_receive_ns, i64 steady_send_ns,
//                      i64 system_receive_ns, i64 system_send_ns (server clocks)
//     0x24 changes     i64 seq, u32 world_size,
//                      u32 count, count × (u32 rank, str process, str where),
//                      u32 count, count × (str key, bytes value)
//                      what changed after since_seq, up to the store's seq `seq` (values
//                      in the order they were set); the joined ranks are always all of
//                      them. Checked on decode: seq and since_seq >= 0; no rank without a
//                      world size; ranks ascending, each once, below world_size; each key
//                      once; counts no larger than the bytes that follow can hold.
//     0x2F error       u8 code (1 timeout, 2 invalid request), str message
//                      (message without the "rendezvous: " prefix)
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "transport/rendezvous/status.hpp"

namespace conveyor::rendezvous {

using Bytes = std::vector<std::uint8_t>;

inline constexpr std::uint32_t kDefaultMaxFrameBytes = 1u << 20;
inline constexpr std::size_t kLengthBytes = 4;
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;
using Nonce = std::array<std::uint8_t, kNonceBytes>;

enum class FrameType : std::uint8_t {
  challenge = 0x01,
  auth = 0x02,
  welcome = 0x03,
  refused = 0x04,
  join = 0x10,
  barrier = 0x11,
  set = 0x12,
  get = 0x13,
  wait = 0x14,
  heartbeat = 0x15,
  dead_ranks = 0x16,
  clock_probe = 0x17,
  follow = 0x18,
  ok = 0x20,
  value = 0x21,
  ranks = 0x22,
  clock_reply = 0x23,
  changes = 0x24,
  error = 0x2F,
};

enum class RemoteErrc : std::uint8_t { timeout = 1, invalid_request = 2 };

// Handshake.
struct Challenge { bool auth_required = false; Nonce nonce{}; };
struct Auth { Bytes mac; std::string process, origin; };
struct Welcome {};
struct Refused { std::string reason; };
// Requests.
struct JoinRequest { std::uint32_t rank = 0, world_size = 0, timeout_ms = 0; };
struct BarrierRequest { std::uint32_t rank = 0; std::string name; std::uint32_t timeout_ms = 0; };
struct SetRequest { std::string key; Bytes value; };
struct GetRequest { std::string key; };
struct WaitRequest { std::string key; std::uint32_t timeout_ms = 0; };
struct HeartbeatRequest { std::uint32_t rank = 0; };
struct DeadRanksRequest { std::uint32_t max_silence_ms = 0; };
struct ClockProbe {};
struct FollowRequest { std::int64_t since_seq = 0; std::uint32_t timeout_ms = 0; };
// Replies.
struct OkReply {};
struct ValueReply { std::optional<Bytes> value; };
struct RanksReply { std::vector<std::uint32_t> ranks; };
struct ClockReply {
  std::int64_t steady_receive_ns = 0, steady_send_ns = 0;
  std::int64_t system_receive_ns = 0, system_send_ns = 0;
};
struct JoinedRank {
  std::uint32_t rank = 0;
  std::string process, where;  // as the rank's join named them (store.hpp's Joiner)
  bool operator==(const JoinedRank&) const = default;
};
struct ChangedValue {
  std::string key;
  Bytes value;
  bool operator==(const ChangedValue&) const = default;
};
struct ChangesReply {
  std::int64_t seq = 0;
  std::uint32_t world_size = 0;  // 0: no rank joined yet
  std::vector<JoinedRank> joined;
  std::vector<ChangedValue> values;
};
struct ErrorReply { RemoteErrc code = RemoteErrc::invalid_request; std::string message; };

using Message = std::variant<Challenge, Auth, Welcome, Refused, JoinRequest, BarrierRequest,
                             SetRequest, GetRequest, WaitRequest, HeartbeatRequest,
                             DeadRanksRequest, ClockProbe, FollowRequest, OkReply, ValueReply,
                             RanksReply, ClockReply, ChangesReply, ErrorReply>;

FrameType type_of(const Message& m);
/// "join", "barrier", ... ; "unknown type 0x7f" for bytes outside FrameType.
std::string type_name(std::uint8_t type);
/// True for the frames a client may send after the handshake.
bool is_request(const Message& m);

/// The whole frame: length, type, fields.
Bytes encode_frame(const Message& m);

/// The length field of `c` encoded (type byte and fields), and what one more value adds
/// to it: a store fills a changes reply up to the frame limit with these.
std::size_t changes_frame_length(const ChangesReply& c);
std::size_t changed_value_bytes(std::string_view key, std::span<const std::uint8_t> value);

/// The value of a frame's length field.
std::uint32_t decode_length(std::span<const std::uint8_t, kLengthBytes> header);
/// REQUIRES: nothing. Ok when 1 <= length <= max_frame_bytes.
Status check_length(std::uint32_t length, std::uint32_t max_frame_bytes);
/// Decodes the `length` bytes after the length field (type byte first). Fails on an
/// unknown type, a field running past the end, bytes left over, or a bad bool.
Status decode_payload(std::span<const std::uint8_t> payload, Message* out);

}  // namespace conveyor::rendezvous
