// The wire reader and the printer of text_format.h. Over the usual 400
// lines on purpose: reading the wire as upb keeps it and printing it as
// Python's text_format does are one contract, checked byte for byte by
// tests/test_text_format.py; split, each half would restate the other's
// rules.
#include "core/file_formats/text_format.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "core/file_formats/python_float_repr.h"

namespace fastmts {
namespace text_format {
namespace {

// Python's parser (upb) refuses deeper messages; deeper ones built in
// Python are left to Python's printer. Also bounds this printer's stack.
constexpr int kMaxDepth = 100;
constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;
constexpr uint32_t kMaxDenseNumber = 4096;  // larger numbers: binary search

enum WireType : uint8_t {
  kVarint = 0,
  kFixed64Wire = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32Wire = 5,
};

struct Failure {
  Status status;
  std::string message;
};

[[noreturn]] void malformed(const std::string& what) { throw Failure{Status::kMalformed, what}; }
[[noreturn]] void unsupported(const std::string& what) {
  throw Failure{Status::kUnsupported, what};
}

WireType wire_type_of(FieldType t) {
  switch (t) {
    case FieldType::kDouble:
    case FieldType::kFixed64:
    case FieldType::kSFixed64:
      return kFixed64Wire;
    case FieldType::kFloat:
    case FieldType::kFixed32:
    case FieldType::kSFixed32:
      return kFixed32Wire;
    case FieldType::kString:
    case FieldType::kBytes:
    case FieldType::kMessage:
      return kLengthDelimited;
    case FieldType::kGroup:
      return kStartGroup;
    default:
      return kVarint;
  }
}

bool is_scalar_number(FieldType t) {  // may be packed
  const WireType w = wire_type_of(t);
  return w == kVarint || w == kFixed32Wire || w == kFixed64Wire;
}

bool is_signed(FieldType t) {
  return t == FieldType::kInt32 || t == FieldType::kInt64 || t == FieldType::kSInt32 ||
         t == FieldType::kSInt64 || t == FieldType::kSFixed32 || t == FieldType::kSFixed64 ||
         t == FieldType::kEnum;
}

bool is_32_bit(FieldType t) {
  return t == FieldType::kInt32 || t == FieldType::kUInt32 || t == FieldType::kSInt32 ||
         t == FieldType::kFixed32 || t == FieldType::kSFixed32 || t == FieldType::kEnum ||
         t == FieldType::kFloat;
}

// The value Python holds for a wire value: 32-bit types keep the low 32
// bits (a negative int32 arrives as a 10-byte varint), sint* are zigzag
// decoded, signed types sign-extended. Returned as the 64-bit pattern of
// the (signed or unsigned) Python int.
uint64_t held_value(FieldType t, uint64_t raw) {
  switch (t) {
    case FieldType::kSInt32: {
      const uint32_t n = static_cast<uint32_t>(raw);
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>((n >> 1) ^ (0u - (n & 1)))));
    }
    case FieldType::kSInt64:
      return (raw >> 1) ^ (0 - (raw & 1));
    case FieldType::kBool:
      return raw != 0;
    default:
      break;
  }
  if (is_32_bit(t)) {
    const uint32_t low = static_cast<uint32_t>(raw);
    return is_signed(t) ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(low))) : low;
  }
  return raw;
}

// Python's ListFields skips a field without presence whose stored bytes
// are all zero (so -0.0 is listed, 0.0 is not).
bool is_nonzero(FieldType t, uint64_t raw) {
  if (t == FieldType::kBool) return raw != 0;
  return is_32_bit(t) ? static_cast<uint32_t>(raw) != 0 : raw != 0;
}

// Strict UTF-8, as Python's decoder and upb check it: no overlong forms,
// surrogates or code points above U+10FFFF.
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const uint8_t c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
      return false;
    p += n + 1;
  }
  return true;
}

// text_encoding.CEscape(bytes, as_utf8=False): printable ASCII as itself,
// six C escapes, every other byte as three octal digits.
struct EscapeTable {
  char text[256][4];
  uint8_t size[256];
  EscapeTable() {
    for (int c = 0; c < 256; ++c) {
      if (c >= 0x20 && c < 0x7f) {
        text[c][0] = static_cast<char>(c);
        size[c] = 1;
      } else {
        text[c][0] = '\\';
        text[c][1] = static_cast<char>('0' + (c >> 6));
        text[c][2] = static_cast<char>('0' + ((c >> 3) & 7));
        text[c][3] = static_cast<char>('0' + (c & 7));
        size[c] = 4;
      }
    }
    const std::pair<char, char> named[] = {
        {'\t', 't'}, {'\n', 'n'}, {'\r', 'r'}, {'"', '"'}, {'\'', '\''}, {'\\', '\\'}};
    for (const auto& [c, letter] : named) {
      text[static_cast<uint8_t>(c)][0] = '\\';
      text[static_cast<uint8_t>(c)][1] = letter;
      size[static_cast<uint8_t>(c)] = 2;
    }
  }
};
const EscapeTable kEscapes;

// `keep_utf8`: CEscape(str, as_utf8=True), which escapes only ASCII and so
// leaves the bytes of every non-ASCII character as they are.
void append_escaped(std::string& out, std::string_view s, bool keep_utf8) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const auto* run = p;  // characters printed as themselves, appended at once
    while (p < end && (kEscapes.size[*p] == 1 || (keep_utf8 && *p >= 0x80))) ++p;
    out.append(reinterpret_cast<const char*>(run), p - run);
    if (p < end) {
      out.append(kEscapes.text[*p], kEscapes.size[*p]);
      ++p;
    }
  }
}

template <typename Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

class Reader {
 public:
  explicit Reader(std::string_view s)
      : p_(reinterpret_cast<const uint8_t*>(s.data())), end_(p_ + s.size()) {}
  bool done() const { return p_ == end_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (p_ == end_) malformed("truncated varint");
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);  // bits past 64 dropped, as upb does
      if (!(b & 0x80)) return v;
    }
    malformed("varint longer than 10 bytes");
  }
  uint64_t fixed(int size) {
    if (end_ - p_ < size) malformed("truncated fixed-width value");
    uint64_t v = 0;
    for (int i = size - 1; i >= 0; --i) v = (v << 8) | p_[i];  // little-endian on any host
    p_ += size;
    return v;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_)) malformed("length-delimited field past the end");
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  // (number, wire type) of the next field. As upb reads them: at most 5
  // bytes and 32 bits; field number 0 is refused in a message, not inside an
  // unknown group that is skipped.
  std::pair<uint32_t, WireType> tag(bool in_skipped_group = false) {
    uint64_t key = 0;
    for (int i = 0;; ++i) {
      if (i == 5) malformed("field tag longer than 5 bytes");
      if (p_ == end_) malformed("truncated field tag");
      const uint8_t b = *p_++;
      key |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if (!(b & 0x80)) break;
    }
    if (key > 0xffffffffu || ((key >> 3) == 0 && !in_skipped_group)) malformed("bad field tag");
    const uint8_t wire = key & 7;
    if (wire > kFixed32Wire) malformed("bad wire type");
    return {static_cast<uint32_t>(key >> 3), static_cast<WireType>(wire)};
  }
  // Skips the value of a field nobody prints (unknown, or of the wrong
  // wire type: Python's parser keeps those as unknown fields).
  void skip(uint32_t number, WireType wire, int depth) {
    switch (wire) {
      case kVarint:
        varint();
        return;
      case kFixed64Wire:
        fixed(8);
        return;
      case kFixed32Wire:
        fixed(4);
        return;
      case kLengthDelimited:
        bytes();
        return;
      case kStartGroup:
        if (depth >= kMaxDepth) unsupported("groups nested too deep");
        for (;;) {
          if (done()) malformed("unterminated group");
          const auto [n, w] = tag(/*in_skipped_group=*/true);
          if (w == kEndGroup) {
            if (n != number) malformed("mismatched end-group tag");
            return;
          }
          skip(n, w, depth + 1);
        }
      case kEndGroup:
        malformed("unexpected end-group tag");
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// One value of a field in the wire, in wire order (seq).
struct Occurrence {
  uint32_t field;  // index in the message's fields
  uint32_t seq;
  WireType wire;
  uint64_t raw;           // varint / fixed value
  std::string_view data;  // length-delimited payload (also a packed run)
};

// A map entry read from the wire, with the value Python's map holds.
struct MapItem {
  uint64_t key = 0;  // held_value of an integral / bool key
  std::string_view key_text;
  uint64_t value = 0;  // scalar value (raw wire value)
  std::string_view value_data;  // string / bytes / single message segment
  std::string merged;           // the value message, when it came in pieces
  std::vector<std::string_view> segments;  // those pieces
  bool is_merged = false;
  bool in_map = true;
  std::string_view value_message() const { return is_merged ? std::string_view(merged) : value_data; }
};

class Printer {
 public:
  // With a `sink`, the text in `out` is handed to it whenever it holds
  // `chunk_bytes` or more (between fields, and within a long string).
  Printer(const Schema& schema, bool as_utf8, bool floats_as_doubles, std::string* out,
          Sink* sink = nullptr, size_t chunk_bytes = 0)
      : schema_(schema), as_utf8_(as_utf8), floats_as_doubles_(floats_as_doubles), out_(out),
        primary_(out), sink_(sink), chunk_bytes_(chunk_bytes) {}

  // Hands what is printed so far to the sink, if any.
  void drain() {
    if (sink_ == nullptr || out_ != primary_ || out_->empty()) return;
    sink_->write(*out_);
    out_->clear();
  }

  void message(int type, std::string_view wire, int indent) {
    if (depth_ >= kMaxDepth) unsupported("message nesting deeper than " + std::to_string(kMaxDepth));
    const Schema::Message& m = schema_.message(type);
    if (!m.spec.unsupported.empty()) unsupported(m.spec.unsupported);
    Frame& f = frame(depth_);
    ++depth_;
    collect(f, m, wire);
    std::vector<Occurrence>& occ = f.occ;
    if (!std::is_sorted(occ.begin(), occ.end(), by_field))
      std::stable_sort(occ.begin(), occ.end(), by_field);
    for (size_t i = 0; i < occ.size();) {
      size_t j = i;
      while (j < occ.size() && occ[j].field == occ[i].field) ++j;
      field(f, m.spec.fields[occ[i].field], i, j, indent);
      i = j;
    }
    --depth_;
  }

 private:
  struct Frame {  // per nesting level, reused across messages
    std::vector<Occurrence> occ;
    std::vector<int> oneof_field;     // the oneof's current member (last set)
    std::vector<uint32_t> oneof_since;  // seq from which that member counts
    bool has_unknown = false;         // a field Python's parser keeps as unknown was skipped
    std::vector<MapItem> items;
  };

  static bool by_field(const Occurrence& a, const Occurrence& b) { return a.field < b.field; }

  Frame& frame(int depth) {
    while (static_cast<int>(frames_.size()) <= depth) frames_.push_back(std::make_unique<Frame>());
    return *frames_[depth];
  }

  std::string& out() { return *out_; }
  void maybe_drain() {
    if (sink_ != nullptr && out_->size() >= chunk_bytes_) drain();
  }

  bool known_enum(const FieldSpec& f, uint64_t raw) const {
    return schema_.enum_name(f.enum_type, static_cast<int32_t>(static_cast<uint32_t>(raw))) != nullptr;
  }
  bool drops(const FieldSpec& f, uint64_t raw) const {  // a closed enum's unknown value
    return f.type == FieldType::kEnum && schema_.enum_spec(f.enum_type).closed && !known_enum(f, raw);
  }

  // Reads the message's fields as Python's parser would keep them.
  void collect(Frame& f, const Schema::Message& m, std::string_view wire) {
    f.occ.clear();
    f.oneof_field.assign(m.oneof_count, -1);
    f.oneof_since.assign(m.oneof_count, 0);
    f.has_unknown = false;
    Reader r(wire);
    uint32_t seq = 0;
    while (!r.done()) {
      const auto [number, wire_type] = r.tag();
      if (wire_type == kEndGroup) malformed("unexpected end-group tag");
      const int index = m.find(number);
      if (index < 0) {
        // Python prints extensions (in their number's place), which this
        // schema cannot name.
        if (m.in_extension_range(number))
          unsupported("extension field " + std::to_string(number) + " of " + m.spec.full_name);
        r.skip(number, wire_type, depth_);
        f.has_unknown = true;
        continue;
      }
      const FieldSpec& spec = m.spec.fields[index];
      if (spec.type == FieldType::kGroup)
        unsupported("group field " + m.spec.full_name + "." + spec.name);
      Occurrence o{static_cast<uint32_t>(index), seq++, wire_type, 0, {}};
      if (wire_type == wire_type_of(spec.type) ||
          (wire_type == kLengthDelimited && spec.repeated && is_scalar_number(spec.type))) {
        switch (wire_type) {
          case kVarint: o.raw = r.varint(); break;
          case kFixed64Wire: o.raw = r.fixed(8); break;
          case kFixed32Wire: o.raw = r.fixed(4); break;
          default: o.data = r.bytes(); break;
        }
      } else {
        r.skip(number, wire_type, depth_);
        f.has_unknown = true;
        continue;
      }
      if (wire_type == kVarint && drops(spec, o.raw)) {
        f.has_unknown = true;
        continue;
      }
      if (spec.oneof >= 0 && f.oneof_field[spec.oneof] != index) {
        f.oneof_field[spec.oneof] = index;
        f.oneof_since[spec.oneof] = o.seq;
      }
      f.occ.push_back(o);
    }
  }

  // Prints field `spec` from its occurrences f.occ[begin, end).
  void field(Frame& f, const FieldSpec& spec, size_t begin, size_t end, int indent) {
    if (spec.oneof >= 0) {
      const bool current = f.oneof_field[spec.oneof] == static_cast<int>(f.occ[begin].field);
      const uint32_t since = current ? f.oneof_since[spec.oneof] : UINT32_MAX;
      while (begin < end && f.occ[begin].seq < since) check_unprinted(spec, f.occ[begin++]);
      if (begin == end) return;
    }
    if (spec.is_map) {
      map(f, spec, begin, end, indent);
    } else if (spec.repeated) {
      for (size_t i = begin; i < end; ++i) repeated(spec, f.occ[i], indent);
    } else if (spec.type == FieldType::kMessage) {
      // Occurrences of a singular message merge, as parsing their bytes one
      // after the other does; each must parse on its own all the same.
      std::string merged;
      std::string_view data = f.occ[begin].data;
      if (end - begin > 1) {
        for (size_t i = begin; i < end; ++i) {
          validate_message(spec.message_type, f.occ[i].data);
          merged.append(f.occ[i].data);
        }
        data = merged;
      }
      open(spec, indent);
      message(spec.message_type, data, indent + 2);
      close(indent);
    } else {
      const Occurrence& last = f.occ[end - 1];
      for (size_t i = begin; i + 1 < end; ++i) check_unprinted(spec, f.occ[i]);
      if (wire_type_of(spec.type) == kLengthDelimited) {
        if (spec.has_presence || !last.data.empty()) string_field(spec, last.data, indent);
      } else if (spec.has_presence || is_nonzero(spec.type, last.raw)) {
        scalar_field(spec, last.raw, indent);
      }
    }
  }

  void repeated(const FieldSpec& spec, const Occurrence& o, int indent) {
    if (spec.type == FieldType::kMessage) {
      open(spec, indent);
      message(spec.message_type, o.data, indent + 2);
      close(indent);
    } else if (spec.type == FieldType::kString || spec.type == FieldType::kBytes) {
      string_field(spec, o.data, indent);
    } else if (o.wire == kLengthDelimited) {  // packed
      Reader r(o.data);
      const WireType w = wire_type_of(spec.type);
      if (w != kVarint && o.data.size() % (w == kFixed32Wire ? 4 : 8) != 0)
        malformed("packed field of a bad length");
      while (!r.done()) {
        const uint64_t raw = w == kVarint ? r.varint() : r.fixed(w == kFixed32Wire ? 4 : 8);
        if (!drops(spec, raw)) scalar_field(spec, raw, indent);
      }
    } else {
      scalar_field(spec, o.raw, indent);
    }
  }

  // The map's entries from the wire, in the order read, in f.items.
  void map_items(Frame& f, const Schema::Message& entry, const FieldSpec& key,
                 const FieldSpec& value, size_t begin, size_t end) {
    std::vector<MapItem>& items = f.items;
    items.clear();
    if (depth_ >= kMaxDepth) unsupported("message nesting too deep");
    Frame& ef = frame(depth_);  // entries are read one after the other
    for (size_t i = begin; i < end; ++i) {
      collect(ef, entry, f.occ[i].data);
      MapItem item;
      // An entry with any unknown field (a closed enum's unknown value
      // included) is kept by Python's parser (upb) as an unknown field of
      // the map's message, out of the map.
      item.in_map = !ef.has_unknown;
      std::string_view first_segment;
      int segments = 0;
      for (const Occurrence& o : ef.occ) {
        const FieldSpec& s = entry.spec.fields[o.field];
        if (&s == &key) {
          if (key.type == FieldType::kString && !valid_utf8(o.data))
            unsupported("string that is not UTF-8 in " + entry.spec.full_name);
          item.key = held_value(key.type, o.raw);
          item.key_text = o.data;
        } else if (value.type == FieldType::kMessage) {
          if (segments++ == 0) {
            first_segment = o.data;
          } else {
            if (segments == 2) {
              item.merged.assign(first_segment);
              item.segments.push_back(first_segment);
            }
            item.merged.append(o.data);
            item.segments.push_back(o.data);
          }
        } else {
          if (value.type == FieldType::kString && !valid_utf8(o.data))
            unsupported("string that is not UTF-8 in " + entry.spec.full_name);
          item.value = o.raw;
          item.value_data = o.data;
        }
      }
      item.value_data = value.type == FieldType::kMessage ? first_segment : item.value_data;
      item.is_merged = segments > 1;
      items.push_back(std::move(item));
    }
  }

  // One map entry as Python prints it: key and scalar value when set.
  void map_entry(const FieldSpec& spec, const FieldSpec& key, const FieldSpec& value,
                 const MapItem& item, bool text_key, int indent) {
    open(spec, indent);
    const bool key_set = text_key ? !item.key_text.empty() : item.key != 0;
    if (key.has_presence || key_set) {
      if (text_key) {
        string_field(key, item.key_text, indent + 2);
      } else {
        scalar_held(key, item.key, indent + 2);
      }
    }
    if (value.type == FieldType::kMessage) {
      open(value, indent + 2);
      message(value.message_type, item.value_message(), indent + 4);
      close(indent + 2);
    } else if (wire_type_of(value.type) == kLengthDelimited) {
      if (value.has_presence || !item.value_data.empty())
        string_field(value, item.value_data, indent + 2);
    } else if (value.has_presence || is_nonzero(value.type, item.value)) {
      scalar_field(value, item.value, indent + 2);
    }
    close(indent);
  }

  // Python prints each entry sorted by key, as the message
  // GetEntryClass()(key=k, value=map[k]): key and a scalar value only when
  // set (not zero, in proto3), a message value always.
  void map(Frame& f, const FieldSpec& spec, size_t begin, size_t end, int indent) {
    const Schema::Message& entry = schema_.message(spec.message_type);
    const FieldSpec& key = entry.spec.fields[entry.find(1)];
    const FieldSpec& value = entry.spec.fields[entry.find(2)];
    map_items(f, entry, key, value, begin, end);
    std::vector<MapItem>& items = f.items;
    if (value.type == FieldType::kMessage) {
      for (const MapItem& item : items) {  // what Python's parser reads besides
        if (!item.in_map) validate_message(value.message_type, item.value_message());
        for (std::string_view segment : item.segments) validate_message(value.message_type, segment);
      }
    }
    items.erase(std::remove_if(items.begin(), items.end(), [](const MapItem& item) { return !item.in_map; }),
                items.end());
    const bool text_key = key.type == FieldType::kString;
    const bool signed_key = is_signed(key.type);
    std::stable_sort(items.begin(), items.end(), [&](const MapItem& a, const MapItem& b) {
      if (text_key) return a.key_text < b.key_text;  // UTF-8 bytes sort as code points
      if (signed_key) return static_cast<int64_t>(a.key) < static_cast<int64_t>(b.key);
      return a.key < b.key;
    });
    auto same_key = [&](const MapItem& a, const MapItem& b) {
      return text_key ? a.key_text == b.key_text : a.key == b.key;
    };
    for (size_t i = 0; i < items.size(); ++i) {
      const MapItem& item = items[i];
      if (i + 1 < items.size() && same_key(item, items[i + 1])) {  // a later entry replaced it
        if (value.type == FieldType::kMessage) validate_message(value.message_type, item.value_message());
        continue;
      }
      map_entry(spec, key, value, item, text_key, indent);
    }
  }

  // Values Python's parser reads but the text does not show (replaced by a
  // later value) must still be well-formed, or Python would refuse them.
  void check_unprinted(const FieldSpec& spec, const Occurrence& o) {
    if (spec.type == FieldType::kMessage) {
      validate_message(spec.message_type, o.data);
    } else if (spec.type == FieldType::kString && !valid_utf8(o.data)) {
      unsupported("string field " + spec.name + " is not UTF-8");
    }
  }
  void validate_message(int type, std::string_view data) {
    std::string discard;
    std::string* saved = out_;
    out_ = &discard;
    message(type, data, 0);
    out_ = saved;
  }

  void open(const FieldSpec& spec, int indent) {
    out().append(indent, ' ');
    out() += spec.name;
    out() += " {\n";
  }
  void close(int indent) {
    out().append(indent, ' ');
    out() += "}\n";
    maybe_drain();
  }
  void name(const FieldSpec& spec, int indent) {
    out().append(indent, ' ');
    out() += spec.name;
    out() += ": ";
  }

  void string_field(const FieldSpec& spec, std::string_view s, int indent) {
    // A string field is printed from its UTF-8 encoding; one that is not
    // UTF-8 cannot come from a Python message (and proto2's leniency is not
    // reproduced).
    if (spec.type == FieldType::kString && !valid_utf8(s))
      unsupported("string field " + spec.name + " is not UTF-8");
    name(spec, indent);
    out() += '"';
    // text_format escapes bytes fields always as bytes, string fields as
    // text when as_utf8 (non-ASCII characters then stay as they are).
    const bool keep_utf8 = as_utf8_ && spec.type == FieldType::kString;
    // A long bytes field (a constant's tensor_content) is escaped piece by
    // piece, each byte on its own, so the sink gets it in chunks.
    const size_t piece = (sink_ != nullptr && !keep_utf8) ? chunk_bytes_ / 4 + 1 : s.size() + 1;
    for (size_t at = 0; at < s.size(); at += piece) {
      append_escaped(out(), s.substr(at, piece), keep_utf8);
      maybe_drain();
    }
    out() += "\"\n";
    maybe_drain();
  }

  void scalar_field(const FieldSpec& spec, uint64_t raw, int indent) {
    switch (spec.type) {
      case FieldType::kFloat: {
        uint32_t bits = static_cast<uint32_t>(raw);
        float v;
        std::memcpy(&v, &bits, sizeof v);
        name(spec, indent);
        if (floats_as_doubles_) {
          append_python_double(out(), static_cast<double>(v));
        } else {
          append_python_float32(out(), v);
        }
        out() += '\n';
        return;
      }
      case FieldType::kDouble: {
        double v;
        std::memcpy(&v, &raw, sizeof v);
        name(spec, indent);
        append_python_double(out(), v);
        out() += '\n';
        return;
      }
      default:
        scalar_held(spec, held_value(spec.type, raw), indent);
    }
  }

  // An integral, bool or enum field whose Python value is `v`.
  void scalar_held(const FieldSpec& spec, uint64_t v, int indent) {
    name(spec, indent);
    if (spec.type == FieldType::kBool) {
      out() += v ? "true" : "false";
    } else if (spec.type == FieldType::kEnum) {
      const int32_t number = static_cast<int32_t>(v);
      if (const std::string* n = schema_.enum_name(spec.enum_type, number)) {
        out() += *n;
      } else {
        append_int(out(), number);
      }
    } else if (is_signed(spec.type)) {
      append_int(out(), static_cast<int64_t>(v));
    } else {
      append_int(out(), v);
    }
    out() += '\n';
  }

  const Schema& schema_;
  const bool as_utf8_;
  const bool floats_as_doubles_;
  std::string* out_;
  std::string* const primary_;
  Sink* const sink_;
  const size_t chunk_bytes_;
  int depth_ = 0;
  std::vector<std::unique_ptr<Frame>> frames_;
};

bool valid_map_key(FieldType t) {
  return t != FieldType::kFloat && t != FieldType::kDouble && t != FieldType::kBytes &&
         t != FieldType::kMessage && t != FieldType::kGroup && t != FieldType::kEnum;
}

}  // namespace

Schema::Schema(std::vector<MessageSpec> messages, std::vector<EnumSpec> enums) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("text format schema: " + what); };
  if (messages.empty()) bad("no message types");
  for (EnumSpec& e : enums) {
    std::stable_sort(e.values.begin(), e.values.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    // Python names a number by its first value (values_by_number).
    e.values.erase(std::unique(e.values.begin(), e.values.end(),
                               [](const auto& a, const auto& b) { return a.first == b.first; }),
                   e.values.end());
  }
  enums_ = std::move(enums);
  const int n_messages = static_cast<int>(messages.size());
  for (MessageSpec& spec : messages) {
    Message m;
    std::stable_sort(spec.fields.begin(), spec.fields.end(),
                     [](const FieldSpec& a, const FieldSpec& b) { return a.number < b.number; });
    uint32_t dense = 0;
    for (size_t i = 0; i < spec.fields.size(); ++i) {
      const FieldSpec& f = spec.fields[i];
      const std::string where = spec.full_name + "." + f.name;
      if (f.number == 0 || f.number > kMaxFieldNumber) bad("bad field number in " + where);
      if (i > 0 && spec.fields[i - 1].number == f.number) bad("duplicate field number in " + where);
      if (f.name.empty()) bad("field without a name in " + spec.full_name);
      const int t = static_cast<int>(f.type);
      if (t < 1 || t > 18) bad("bad field type in " + where);
      if (f.type == FieldType::kMessage && (f.message_type < 0 || f.message_type >= n_messages))
        bad("bad message type index in " + where);
      if (f.type == FieldType::kEnum &&
          (f.enum_type < 0 || f.enum_type >= static_cast<int>(enums_.size())))
        bad("bad enum index in " + where);
      if (f.oneof < -1 || (f.oneof >= 0 && f.repeated)) bad("bad oneof in " + where);
      m.oneof_count = std::max(m.oneof_count, f.oneof + 1);
      if (f.is_map && (!f.repeated || f.type != FieldType::kMessage)) bad("bad map field " + where);
      if (f.number <= kMaxDenseNumber) dense = f.number + 1;
    }
    for (const auto& [start, end] : spec.extension_ranges)
      if (start >= end) bad("bad extension range in " + spec.full_name);
    m.by_number.assign(dense, -1);
    for (size_t i = 0; i < spec.fields.size(); ++i)
      if (spec.fields[i].number < dense) m.by_number[spec.fields[i].number] = static_cast<int>(i);
    m.spec = std::move(spec);
    messages_.push_back(std::move(m));
  }
  // Map entry types, once every type is in place (they may come in any order).
  for (const Message& m : messages_) {
    for (const FieldSpec& f : m.spec.fields) {
      if (!f.is_map) continue;
      const Message& entry = messages_[f.message_type];
      const int key = entry.find(1), value = entry.find(2);
      if (key < 0 || value < 0) bad("map entry type without key and value for " + f.name);
      const FieldSpec& k = entry.spec.fields[key];
      const FieldSpec& v = entry.spec.fields[value];
      if (k.repeated || v.repeated || k.is_map || v.is_map || !valid_map_key(k.type) ||
          v.type == FieldType::kGroup)
        bad("bad map entry type for " + m.spec.full_name + "." + f.name);
    }
  }
}

int Schema::Message::find(uint32_t number) const {
  if (number < by_number.size()) return by_number[number];
  auto it = std::lower_bound(spec.fields.begin(), spec.fields.end(), number,
                             [](const FieldSpec& f, uint32_t n) { return f.number < n; });
  return it != spec.fields.end() && it->number == number ? static_cast<int>(it - spec.fields.begin())
                                                         : -1;
}

bool Schema::Message::in_extension_range(uint32_t number) const {
  for (const auto& [start, end] : spec.extension_ranges)
    if (number >= start && number < end) return true;
  return false;
}

const std::string* Schema::enum_name(int i, int32_t number) const {
  const auto& values = enums_[i].values;
  auto it = std::lower_bound(values.begin(), values.end(), number,
                             [](const auto& v, int32_t n) { return v.first < n; });
  return it != values.end() && it->first == number ? &it->second : nullptr;
}

Result print_to(const Schema& schema, std::string_view wire, bool as_utf8,
                bool floats_as_doubles, Sink& sink, size_t chunk_bytes) {
  Result result;
  result.text.reserve(chunk_bytes + chunk_bytes / 4);
  try {
    Printer printer(schema, as_utf8, floats_as_doubles, &result.text, &sink, chunk_bytes);
    printer.message(0, wire, 0);
    printer.drain();
  } catch (Failure& f) {
    result.status = f.status;
    result.error = std::move(f.message);
  }
  result.text.clear();
  result.text.shrink_to_fit();
  return result;
}

Result print(const Schema& schema, std::string_view wire, bool as_utf8, bool floats_as_doubles) {
  Result result;
  result.text.reserve(wire.size() * 2);
  try {
    Printer(schema, as_utf8, floats_as_doubles, &result.text).message(0, wire, 0);
  } catch (Failure& f) {
    result.status = f.status;
    result.error = std::move(f.message);
    result.text.clear();
  }
  return result;
}

}  // namespace text_format
}  // namespace fastmts
