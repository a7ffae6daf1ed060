#include "transport/rendezvous/frame.hpp"

#include <fmt/format.h>

#include <cstring>
#include <set>
#include <type_traits>

namespace conveyor::rendezvous {
namespace {

template <class>
inline constexpr bool kAlwaysFalse = false;

class Writer {
 public:
  explicit Writer(FrameType type) {
    out_.resize(kLengthBytes);  // patched by finish()
    out_.push_back(static_cast<std::uint8_t>(type));
  }
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void i64(std::int64_t v) {
    auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
  }
  void raw(std::span<const std::uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void bytes(std::span<const std::uint8_t> b) {
    u32(static_cast<std::uint32_t>(b.size()));
    raw(b);
  }
  void str(std::string_view s) {
    bytes({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
  }
  Bytes finish() && {
    auto length = static_cast<std::uint32_t>(out_.size() - kLengthBytes);
    for (std::size_t i = 0; i < 4; ++i) out_[i] = static_cast<std::uint8_t>(length >> (8 * i));
    return std::move(out_);
  }

 private:
  Bytes out_;
};

// Reads fields in order; the first failure sticks and later reads return zeros.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}

  std::uint8_t u8() {
    if (!need(1, "u8")) return 0;
    return in_[pos_++];
  }
  bool boolean(const char* field) {
    std::uint8_t v = u8();
    if (v > 1) fail(fmt::format("{} is {} (not 0 or 1)", field, v));
    return v == 1;
  }
  std::uint32_t u32() {
    if (!need(4, "u32")) return 0;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t{in_[pos_++]} << (8 * i);
    return v;
  }
  std::int64_t i64() {
    if (!need(8, "i64")) return 0;
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{in_[pos_++]} << (8 * i);
    return static_cast<std::int64_t>(v);
  }
  std::span<const std::uint8_t> raw(std::size_t n, const char* what) {
    if (!need(n, what)) return {};
    auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  Bytes bytes() {
    std::uint32_t n = u32();
    auto s = raw(n, "bytes field");  // checked against what is left before any copy
    return Bytes(s.begin(), s.end());
  }
  std::string str() {
    std::uint32_t n = u32();
    auto s = raw(n, "string field");
    return std::string(reinterpret_cast<const char*>(s.data()), s.size());
  }
  std::size_t left() const { return in_.size() - pos_; }
  void fail(std::string why) {
    if (status_.ok()) status_ = Status::error(std::move(why));
  }
  /// Ok when every read fit and nothing is left over.
  Status finish(std::string_view type) {
    if (status_.ok() && left() != 0)
      fail(fmt::format("{} bytes left over after the last field", left()));
    if (!status_.ok()) return Status::error(fmt::format("malformed {} frame: {}", type, status_.message()));
    return status_;
  }

 private:
  bool need(std::size_t n, const char* what) {
    if (!status_.ok()) return false;
    if (left() < n) {
      fail(fmt::format("{} needs {} bytes but only {} remain", what, n, left()));
      return false;
    }
    return true;
  }

  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
  Status status_ = Status::ok_status();
};

void write_fields(Writer& w, const Message& m) {
  std::visit(
      [&w](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Challenge>) {
          w.u8(v.auth_required ? 1 : 0);
          w.raw(v.nonce);
        } else if constexpr (std::is_same_v<T, Auth>) {
          w.bytes(v.mac);
          w.str(v.process);
          w.str(v.origin);
        } else if constexpr (std::is_same_v<T, Refused>) {
          w.str(v.reason);
        } else if constexpr (std::is_same_v<T, JoinRequest>) {
          w.u32(v.rank);
          w.u32(v.world_size);
          w.u32(v.timeout_ms);
        } else if constexpr (std::is_same_v<T, BarrierRequest>) {
          w.u32(v.rank);
          w.str(v.name);
          w.u32(v.timeout_ms);
        } else if constexpr (std::is_same_v<T, SetRequest>) {
          w.str(v.key);
          w.bytes(v.value);
        } else if constexpr (std::is_same_v<T, GetRequest>) {
          w.str(v.key);
        } else if constexpr (std::is_same_v<T, WaitRequest>) {
          w.str(v.key);
          w.u32(v.timeout_ms);
        } else if constexpr (std::is_same_v<T, HeartbeatRequest>) {
          w.u32(v.rank);
        } else if constexpr (std::is_same_v<T, DeadRanksRequest>) {
          w.u32(v.max_silence_ms);
        } else if constexpr (std::is_same_v<T, FollowRequest>) {
          w.i64(v.since_seq);
          w.u32(v.timeout_ms);
        } else if constexpr (std::is_same_v<T, ChangesReply>) {
          w.i64(v.seq);
          w.u32(v.world_size);
          w.u32(static_cast<std::uint32_t>(v.joined.size()));
          for (const JoinedRank& j : v.joined) {
            w.u32(j.rank);
            w.str(j.process);
            w.str(j.where);
          }
          w.u32(static_cast<std::uint32_t>(v.values.size()));
          for (const ChangedValue& cv : v.values) {
            w.str(cv.key);
            w.bytes(cv.value);
          }
        } else if constexpr (std::is_same_v<T, ValueReply>) {
          w.u8(v.value ? 1 : 0);
          if (v.value) w.bytes(*v.value);
        } else if constexpr (std::is_same_v<T, RanksReply>) {
          w.u32(static_cast<std::uint32_t>(v.ranks.size()));
          for (std::uint32_t r : v.ranks) w.u32(r);
        } else if constexpr (std::is_same_v<T, ClockReply>) {
          w.i64(v.steady_receive_ns);
          w.i64(v.steady_send_ns);
          w.i64(v.system_receive_ns);
          w.i64(v.system_send_ns);
        } else if constexpr (std::is_same_v<T, ErrorReply>) {
          w.u8(static_cast<std::uint8_t>(v.code));
          w.str(v.message);
        } else if constexpr (std::is_same_v<T, Welcome> || std::is_same_v<T, ClockProbe> ||
                             std::is_same_v<T, OkReply>) {
          // no fields
        } else {
          static_assert(kAlwaysFalse<T>, "every message type needs an encoding");
        }
      },
      m);
}

// A count read from the wire, checked against what is left before anything is reserved:
// each entry takes at least `min_entry_bytes`.
std::uint32_t entry_count(Reader& r, std::size_t min_entry_bytes, const char* what) {
  const std::uint32_t count = r.u32();
  if (count > r.left() / min_entry_bytes) {
    r.fail(fmt::format("{} {} announced but only {} bytes follow", count, what, r.left()));
    return 0;
  }
  return count;
}

ChangesReply read_changes(Reader& r) {
  ChangesReply c;
  c.seq = r.i64();
  if (c.seq < 0) r.fail(fmt::format("seq {} is negative", c.seq));
  c.world_size = r.u32();
  const std::uint32_t ranks = entry_count(r, 12, "joined ranks");
  c.joined.reserve(ranks);
  for (std::uint32_t i = 0; i < ranks; ++i) {
    JoinedRank j;
    j.rank = r.u32();
    j.process = r.str();
    j.where = r.str();
    if (j.rank >= c.world_size)
      r.fail(fmt::format("joined rank {} is out of range for world size {}", j.rank, c.world_size));
    else if (!c.joined.empty() && j.rank <= c.joined.back().rank)
      r.fail(fmt::format("joined rank {} follows rank {} (ranks must ascend, each once)", j.rank,
                         c.joined.back().rank));
    c.joined.push_back(std::move(j));
  }
  const std::uint32_t values = entry_count(r, 8, "values");
  c.values.reserve(values);
  std::set<std::string, std::less<>> keys;
  for (std::uint32_t i = 0; i < values; ++i) {
    ChangedValue v;
    v.key = r.str();
    v.value = r.bytes();
    if (!keys.insert(v.key).second) r.fail(fmt::format("key \"{}\" comes twice", v.key));
    c.values.push_back(std::move(v));
  }
  return c;
}

}  // namespace

FrameType type_of(const Message& m) {
  static constexpr FrameType kTypes[] = {
      FrameType::challenge, FrameType::auth,       FrameType::welcome,     FrameType::refused,
      FrameType::join,      FrameType::barrier,    FrameType::set,         FrameType::get,
      FrameType::wait,      FrameType::heartbeat,  FrameType::dead_ranks,  FrameType::clock_probe,
      FrameType::follow,    FrameType::ok,         FrameType::value,       FrameType::ranks,
      FrameType::clock_reply, FrameType::changes,  FrameType::error};
  static_assert(std::size(kTypes) == std::variant_size_v<Message>);
  return kTypes[m.index()];
}

std::string type_name(std::uint8_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::challenge: return "challenge";
    case FrameType::auth: return "auth";
    case FrameType::welcome: return "welcome";
    case FrameType::refused: return "refused";
    case FrameType::join: return "join";
    case FrameType::barrier: return "barrier";
    case FrameType::set: return "set";
    case FrameType::get: return "get";
    case FrameType::wait: return "wait";
    case FrameType::heartbeat: return "heartbeat";
    case FrameType::dead_ranks: return "dead_ranks";
    case FrameType::clock_probe: return "clock_probe";
    case FrameType::follow: return "follow";
    case FrameType::ok: return "ok";
    case FrameType::value: return "value";
    case FrameType::ranks: return "ranks";
    case FrameType::clock_reply: return "clock_reply";
    case FrameType::changes: return "changes";
    case FrameType::error: return "error";
  }
  return fmt::format("unknown type 0x{:02x}", type);
}

bool is_request(const Message& m) {
  auto t = static_cast<std::uint8_t>(type_of(m));
  return t >= 0x10 && t <= 0x18;
}

Bytes encode_frame(const Message& m) {
  Writer w(type_of(m));
  write_fields(w, m);
  return std::move(w).finish();
}

std::size_t changed_value_bytes(std::string_view key, std::span<const std::uint8_t> value) {
  return 4 + key.size() + 4 + value.size();
}

std::size_t changes_frame_length(const ChangesReply& c) {
  std::size_t n = 1 + 8 + 4 + 4 + 4;  // type, seq, world_size, the two counts
  for (const JoinedRank& j : c.joined) n += 4 + 4 + j.process.size() + 4 + j.where.size();
  for (const ChangedValue& v : c.values) n += changed_value_bytes(v.key, v.value);
  return n;
}

std::uint32_t decode_length(std::span<const std::uint8_t, kLengthBytes> header) {
  return std::uint32_t{header[0]} | std::uint32_t{header[1]} << 8 |
         std::uint32_t{header[2]} << 16 | std::uint32_t{header[3]} << 24;
}

Status check_length(std::uint32_t length, std::uint32_t max_frame_bytes) {
  if (length == 0) return Status::error("empty frame (length 0, no type byte)");
  if (length > max_frame_bytes)
    return Status::error(
        fmt::format("frame length {} exceeds the {}-byte limit", length, max_frame_bytes));
  return Status::ok_status();
}

Status decode_payload(std::span<const std::uint8_t> payload, Message* out) {
  if (payload.empty()) return Status::error("empty frame (no type byte)");
  const std::uint8_t type = payload[0];
  Reader r(payload.subspan(1));
  const std::string name = type_name(type);
  switch (static_cast<FrameType>(type)) {
    case FrameType::challenge: {
      Challenge c;
      c.auth_required = r.boolean("auth_required");
      auto n = r.raw(kNonceBytes, "nonce");
      if (n.size() == kNonceBytes) std::memcpy(c.nonce.data(), n.data(), kNonceBytes);
      *out = c;
      break;
    }
    case FrameType::auth: {
      Auth a;
      a.mac = r.bytes();
      a.process = r.str();
      a.origin = r.str();
      *out = std::move(a);
      break;
    }
    case FrameType::welcome: *out = Welcome{}; break;
    case FrameType::refused: *out = Refused{r.str()}; break;
    case FrameType::join: {
      JoinRequest j;
      j.rank = r.u32();
      j.world_size = r.u32();
      j.timeout_ms = r.u32();
      *out = j;
      break;
    }
    case FrameType::barrier: {
      BarrierRequest b;
      b.rank = r.u32();
      b.name = r.str();
      b.timeout_ms = r.u32();
      *out = std::move(b);
      break;
    }
    case FrameType::set: {
      SetRequest s;
      s.key = r.str();
      s.value = r.bytes();
      *out = std::move(s);
      break;
    }
    case FrameType::get: *out = GetRequest{r.str()}; break;
    case FrameType::wait: {
      WaitRequest w;
      w.key = r.str();
      w.timeout_ms = r.u32();
      *out = std::move(w);
      break;
    }
    case FrameType::heartbeat: *out = HeartbeatRequest{r.u32()}; break;
    case FrameType::dead_ranks: *out = DeadRanksRequest{r.u32()}; break;
    case FrameType::clock_probe: *out = ClockProbe{}; break;
    case FrameType::follow: {
      FollowRequest f;
      f.since_seq = r.i64();
      if (f.since_seq < 0) r.fail(fmt::format("since_seq {} is negative", f.since_seq));
      f.timeout_ms = r.u32();
      *out = f;
      break;
    }
    case FrameType::ok: *out = OkReply{}; break;
    case FrameType::value: {
      ValueReply v;
      if (r.boolean("found")) v.value = r.bytes();
      *out = std::move(v);
      break;
    }
    case FrameType::ranks: {
      RanksReply rr;
      std::uint32_t count = r.u32();
      // The count must match the bytes actually present before anything is reserved.
      if (r.left() != std::size_t{count} * 4) {
        r.fail(fmt::format("{} ranks announced but {} bytes follow", count, r.left()));
      } else {
        rr.ranks.reserve(count);
        for (std::uint32_t i = 0; i < count; ++i) rr.ranks.push_back(r.u32());
      }
      *out = std::move(rr);
      break;
    }
    case FrameType::clock_reply: {
      ClockReply c;
      c.steady_receive_ns = r.i64();
      c.steady_send_ns = r.i64();
      c.system_receive_ns = r.i64();
      c.system_send_ns = r.i64();
      *out = c;
      break;
    }
    case FrameType::changes: *out = read_changes(r); break;
    case FrameType::error: {
      ErrorReply e;
      std::uint8_t code = r.u8();
      if (code != 1 && code != 2) r.fail(fmt::format("error code {} is not 1 or 2", code));
      e.code = static_cast<RemoteErrc>(code);
      e.message = r.str();
      *out = std::move(e);
      break;
    }
    default:
      return Status::error(fmt::format("unknown frame type 0x{:02x}", type));
  }
  return r.finish(name);
}

}  // namespace conveyor::rendezvous
