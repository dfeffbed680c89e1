#include "core/file_formats/summary_writer.h"

#include <cstring>

#include "core/file_formats/event_file.h"
#include "core/timers.h"

namespace fastmts {
namespace {

// A protobuf wire reader over one message's bytes.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }

  bool varint(uint64_t* out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) return false;
      const auto byte = static_cast<unsigned char>(rest_.front());
      rest_.remove_prefix(1);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        // Protobuf writes the shortest form; a longer one would not come
        // back byte for byte.
        if (byte == 0 && shift > 0) return false;
        *out = value;
        return true;
      }
    }
    return false;
  }

  // One field: its number, wire type, its whole encoding (key included)
  // and, for length-delimited fields, the payload.
  bool field(int* number, int* wire_type, std::string_view* whole, std::string_view* payload) {
    const char* start = rest_.data();
    uint64_t key;
    if (!varint(&key) || (key >> 3) == 0 || (key >> 3) > (1u << 29)) return false;
    *number = static_cast<int>(key >> 3);
    *wire_type = static_cast<int>(key & 7);
    switch (*wire_type) {
      case 0: {
        uint64_t ignored;
        if (!varint(&ignored)) return false;
        break;
      }
      case 1:
      case 5: {
        const size_t n = *wire_type == 1 ? 8 : 4;
        if (rest_.size() < n) return false;
        rest_.remove_prefix(n);
        break;
      }
      case 2: {
        uint64_t length;
        if (!varint(&length) || length > rest_.size()) return false;
        *payload = rest_.substr(0, length);
        rest_.remove_prefix(length);
        break;
      }
      default:
        return false;  // groups: not in a Summary
    }
    *whole = std::string_view(start, rest_.data() - start);
    return true;
  }

 private:
  std::string_view rest_;
};

bool is_utf8(std::string_view s) {
  size_t i = 0;
  // ASCII eight bytes at a time (tags nearly always are).
  for (uint64_t word; i + 8 <= s.size(); i += 8) {
    std::memcpy(&word, s.data() + i, sizeof(word));
    if (word & 0x8080808080808080ull) break;
  }
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    const uint32_t min_of_length[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_of_length[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

// Summary.Value's fields, as protobuf knows them (summary.proto).
bool is_value_field(int number, int wire_type) {
  switch (number) {
    case 2:  // simple_value
      return wire_type == 5;
    case 1:  // tag
    case 3:  // obsolete_old_style_histogram
    case 4:  // image
    case 5:  // histo
    case 6:  // audio
    case 7:  // node_name
    case 8:  // tensor
    case 9:  // metadata
      return wire_type == 2;
    default:
      return false;
  }
}

constexpr int kValueTag = 1, kValueMetadata = 9;

void append_varint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// One Summary.Value as serialized: the whole `value` field of the Summary
// (key and length included), its tag, and its metadata field (key and
// length included; empty when absent).
struct ValueField {
  std::string_view whole, payload, tag, metadata;
};

// Checks one value is as protobuf serializes it: known fields with their
// wire types, in field-number order (the serializer's, not the .proto's),
// at most one of the `value` oneof, text fields non-empty and in UTF-8. The
// messages inside (histo, tensor, metadata...) are copied as they are: the
// caller hands over only what TF's C++ serialized (summary ops' outputs).
bool parse_value(std::string_view whole, std::string_view payload, ValueField* out) {
  *out = ValueField{whole, payload, {}, {}};
  // Most values of a merged summary are scalars: a tag (1), then a
  // simple_value (2), nothing else. Read that shape directly.
  if (payload.size() >= 8 && payload[0] == 0x0a) {
    const auto tag_size = static_cast<unsigned char>(payload[1]);
    if (tag_size > 0 && tag_size < 0x80 && payload.size() == 2u + tag_size + 5u &&
        payload[2 + tag_size] == 0x15) {
      out->tag = payload.substr(2, tag_size);
      return is_utf8(out->tag);
    }
  }
  WireReader reader(payload);
  int previous = 0;
  bool oneof_set = false;
  while (!reader.done()) {
    int number, wire_type;
    std::string_view field, field_payload;
    if (!reader.field(&number, &wire_type, &field, &field_payload)) return false;
    if (!is_value_field(number, wire_type) || number <= previous) return false;
    previous = number;
    if (number >= 2 && number <= 8 && number != 7) {
      if (oneof_set) return false;
      oneof_set = true;
    }
    // proto3 writes no empty text field: an explicit one is not as written.
    if ((number == kValueTag || number == 7) && field_payload.empty()) return false;
    if (number == kValueTag) out->tag = field_payload;
    if (number == kValueMetadata) out->metadata = field;
    if (number == 7 && !is_utf8(field_payload)) return false;
  }
  return is_utf8(out->tag);
}

}  // namespace

std::optional<std::string> SeenSummaryTags::strip_one(std::string_view summary,
                                                      std::unordered_set<std::string>* pending,
                                                      std::vector<std::string>* new_shapes) {
  // Parse and check every value first; the Summary has only `value` fields.
  std::vector<ValueField> values;
  values.reserve(summary.size() / 8 + 1);  // a value takes 8 bytes at least
  std::string shape;  // the tags in order, each length-prefixed
  shape.reserve(summary.size());
  bool any_metadata = false;
  WireReader reader(summary);
  while (!reader.done()) {
    int number, wire_type;
    std::string_view whole, payload;
    if (!reader.field(&number, &wire_type, &whole, &payload)) return std::nullopt;
    if (number != 1 || wire_type != 2) return std::nullopt;
    values.emplace_back();
    if (!parse_value(whole, payload, &values.back())) return std::nullopt;
    append_varint(&shape, values.back().tag.size());
    shape.append(values.back().tag);
    any_metadata = any_metadata || !values.back().metadata.empty();
  }
  // The common case, a merged summary with no metadata whose tags were all
  // marked before: nothing to drop, nothing to mark.
  if (!any_metadata && (shape == last_known_shape_ || known_shapes_.count(shape))) {
    if (shape != last_known_shape_) last_known_shape_ = shape;
    return std::string(summary);
  }
  std::string out;
  out.reserve(summary.size());
  std::string key;
  for (const ValueField& value : values) {
    key.assign(value.tag);
    // TF: metadata dropped once the tag was seen, else the tag marked seen
    // (a SummaryMetadata message is truthy whether or not it is set).
    const bool seen = tags_.count(key) || pending->count(key);
    if (!seen) pending->insert(key);
    if (!seen || value.metadata.empty()) {
      out.append(value.whole);
      continue;
    }
    const size_t at = static_cast<size_t>(value.metadata.data() - value.payload.data());
    out.push_back(0x0a);
    append_varint(&out, value.payload.size() - value.metadata.size());
    out.append(value.payload.substr(0, at));
    out.append(value.payload.substr(at + value.metadata.size()));
  }
  if (!any_metadata) new_shapes->push_back(shape);
  return out;
}

bool SeenSummaryTags::contains(const std::string& tag) const {
  std::lock_guard<std::mutex> lock(mu_);
  return tags_.count(tag) != 0;
}

void SeenSummaryTags::add(const std::string& tag) {
  std::lock_guard<std::mutex> lock(mu_);
  tags_.insert(tag);
}

std::vector<std::string> SeenSummaryTags::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::vector<std::string>(tags_.begin(), tags_.end());
}

std::optional<std::vector<std::string>> SeenSummaryTags::strip_repeated_metadata(
    const std::vector<std::string_view>& summaries) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unordered_set<std::string> pending;  // tags of the summaries before, in TF's order
  std::vector<std::string> new_shapes;
  std::vector<std::string> out;
  out.reserve(summaries.size());
  for (std::string_view summary : summaries) {
    std::optional<std::string> one = strip_one(summary, &pending, &new_shapes);
    if (!one) return std::nullopt;
    out.push_back(std::move(*one));
  }
  tags_.insert(pending.begin(), pending.end());
  for (std::string& shape : new_shapes) known_shapes_.insert(std::move(shape));
  return out;
}

void SummaryWriter::add_stripped_summaries(const std::vector<std::string>& summaries,
                                           int64_t step) {
  for (const std::string& summary : summaries)  // TF's _add_event: each at its own time
    add_event(event_bytes(wall_time_seconds(), step, EventWhat::kSummary, summary));
}

void SummaryWriter::add_simple_value(std::string_view tag, float value, int64_t step) {
  tags_->add(std::string(tag));
  add_event(event_bytes(wall_time_seconds(), step, EventWhat::kSummary,
                        simple_value_summary(tag, value)));
}

void SummaryWriter::add_session_log_start(int64_t step) {
  static const std::string kStart("\x08\x01", 2);  // SessionLog{status: START}
  add_event(event_bytes(wall_time_seconds(), step, EventWhat::kSessionLog, kStart));
}

bool SummaryWriter::add_serialized(EventWhat what, std::string_view payload, int64_t step) {
  return events_->add(event_bytes(wall_time_seconds(), step, what, payload),
                      /*wait_for_room=*/true);
}

std::optional<SummaryWriter::Reserved> SummaryWriter::reserve_serialized(EventWhat what,
                                                                        int64_t step) {
  Reserved reserved{events_->reserve(), wall_time_seconds(), what, step};
  if (reserved.record == nullptr) return std::nullopt;
  return reserved;
}

void SummaryWriter::fill_serialized(const Reserved& reserved, std::string_view payload) {
  events_->fill(reserved.record,
                event_bytes(reserved.wall_time, reserved.step, reserved.what, payload));
}

void SummaryWriter::add_event(std::string event) {
  // A writer closed meanwhile drops the record, as TF's closed writer does.
  events_->add(std::move(event), /*wait_for_room=*/false);
}

}  // namespace fastmts
