// Protobuf text format from a message's binary wire bytes, byte for byte as
// Python's google.protobuf.text_format.MessageToString(msg, as_utf8=...)
// prints it (its other arguments at their defaults) -- without the protobuf
// library: the message types come as a schema table (built in Python from
// the descriptors, see python/fastmts/text_format_schema.py).
//
// The wire is read as protobuf's Python parser would read it, so the text is
// that of the parsed message: fields by ascending number, repeated values in
// wire order (packed or not), the last value of a singular scalar, merged
// occurrences of a singular message, the last member of a oneof, unknown
// fields dropped (and map entries holding any), fields without presence only
// when not zero.
//
// What the printer does not reproduce (google.protobuf.Any, which Python
// expands through its descriptor pool; groups; extensions; MessageSet;
// strings that are not UTF-8; nesting deeper than upb parses) ends the call
// with kUnsupported when met in the wire, so the caller can print in Python
// instead. Bytes Python's parser would refuse end it with kMalformed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fastmts {
namespace text_format {

// Numbered as FieldDescriptorProto.Type (descriptor.proto), which is what
// Python's FieldDescriptor.type gives.
enum class FieldType : uint8_t {
  kDouble = 1,
  kFloat = 2,
  kInt64 = 3,
  kUInt64 = 4,
  kInt32 = 5,
  kFixed64 = 6,
  kFixed32 = 7,
  kBool = 8,
  kString = 9,
  kGroup = 10,  // unsupported
  kMessage = 11,
  kBytes = 12,
  kUInt32 = 13,
  kEnum = 14,
  kSFixed32 = 15,
  kSFixed64 = 16,
  kSInt32 = 17,
  kSInt64 = 18,
};

struct EnumSpec {
  // A closed (proto2) enum keeps unknown numbers as unknown fields, which
  // are not printed; an open one prints them as numbers.
  bool closed = false;
  std::vector<std::pair<int32_t, std::string>> values;  // number -> name
};

struct FieldSpec {
  uint32_t number = 0;
  std::string name;
  FieldType type = FieldType::kInt32;
  bool repeated = false;
  bool has_presence = false;  // false: printed only when not zero / empty
  bool is_map = false;        // repeated entries of message_type (key = 1, value = 2)
  int message_type = -1;      // kMessage: index in the schema's messages
  int enum_type = -1;         // kEnum: index in the schema's enums
  int oneof = -1;             // index of its oneof in the message, or -1
};

struct MessageSpec {
  std::string full_name;
  std::string unsupported;  // non-empty: why a message of this type cannot be printed
  std::vector<FieldSpec> fields;
  std::vector<std::pair<uint32_t, uint32_t>> extension_ranges;  // [start, end)
};

class Schema {
 public:
  // messages[0] is the type that print() prints. Throws
  // std::invalid_argument when the table is inconsistent.
  Schema(std::vector<MessageSpec> messages, std::vector<EnumSpec> enums);

  struct Message {
    MessageSpec spec;          // fields sorted by number
    std::vector<int> by_number;  // dense: field number -> index in spec.fields, -1 none
    int oneof_count = 0;
    int find(uint32_t number) const;
    bool in_extension_range(uint32_t number) const;
  };
  const Message& message(int i) const { return messages_[i]; }
  const EnumSpec& enum_spec(int i) const { return enums_[i]; }
  // The enum value's name, or null when the number has none.
  const std::string* enum_name(int i, int32_t number) const;

 private:
  std::vector<Message> messages_;
  std::vector<EnumSpec> enums_;  // values sorted by number
};

enum class Status { kOk, kUnsupported, kMalformed };

struct Result {
  Status status = Status::kOk;
  std::string text;   // kOk: the text format
  std::string error;  // otherwise: what was unsupported or malformed
};

// Prints the message of type messages[0] whose wire bytes are `wire`, as
// MessageToString(msg, as_utf8=as_utf8): string fields keep their non-ASCII
// characters (the text is UTF-8) when as_utf8, and escape their bytes in
// octal otherwise; bytes fields always escape them. Never reads outside
// `wire`; safe to call from several threads at once. With
// `floats_as_doubles`, float fields print as MessageToString(msg,
// float_format='') prints them (TF 1.15 to 2.20's write_graph asks so):
// str() of the float's value as a double.
Result print(const Schema& schema, std::string_view wire, bool as_utf8,
             bool floats_as_doubles = false);

// Where print_to() hands the text, piece by piece, in order. write() may
// throw (a full disk): print_to() lets it through.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(std::string_view text) = 0;
};

// print(), the text handed to `sink` in pieces of about `chunk_bytes`
// (a long bytes field too is cut), so that no more than that is held at
// once. `text` of the result stays empty; on a status other than kOk the
// pieces written make no whole text and are to be thrown away.
Result print_to(const Schema& schema, std::string_view wire, bool as_utf8,
                bool floats_as_doubles, Sink& sink, size_t chunk_bytes = size_t{4} << 20);

}  // namespace text_format
}  // namespace fastmts
