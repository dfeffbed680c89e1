// The text-format printer (core/file_formats/text_format.h) on a schema
// written by hand, against what Python's text_format.MessageToString prints
// for the same message (read from protobuf 7 with a descriptor of the same
// fields: test.Node below).
#include "core/file_formats/text_format.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/test_bytes.h"

namespace fastmts {
namespace text_format {
namespace {

using fastmts::testing::from_hex;

FieldSpec field(uint32_t number, const char* name, FieldType type) {
  FieldSpec f;
  f.number = number;
  f.name = name;
  f.type = type;
  return f;
}

// syntax = "proto3"; package test; enum Kind { UNKNOWN = 0; CONV = 1; }
// message Node { string name = 1; int64 count = 2; repeated float ratio = 3;
//   Node child = 4; Kind kind = 5; bytes data = 6; map<string, int32> attr = 7;
//   double d = 8; }
Schema node_schema() {
  MessageSpec node{"test.Node", "", {}, {}};
  node.fields.push_back(field(1, "name", FieldType::kString));
  node.fields.push_back(field(2, "count", FieldType::kInt64));
  FieldSpec ratio = field(3, "ratio", FieldType::kFloat);
  ratio.repeated = true;
  node.fields.push_back(ratio);
  FieldSpec child = field(4, "child", FieldType::kMessage);
  child.has_presence = true;
  child.message_type = 0;
  node.fields.push_back(child);
  FieldSpec kind = field(5, "kind", FieldType::kEnum);
  kind.enum_type = 0;
  node.fields.push_back(kind);
  node.fields.push_back(field(6, "data", FieldType::kBytes));
  FieldSpec attr = field(7, "attr", FieldType::kMessage);
  attr.repeated = attr.is_map = true;
  attr.message_type = 1;
  node.fields.push_back(attr);
  node.fields.push_back(field(8, "d", FieldType::kDouble));
  MessageSpec entry{"test.Node.AttrEntry", "", {}, {}};
  entry.fields.push_back(field(1, "key", FieldType::kString));
  entry.fields.push_back(field(2, "value", FieldType::kInt32));
  EnumSpec kinds{false, {{0, "UNKNOWN"}, {1, "CONV"}}};
  return Schema({node, entry}, {kinds});
}

// name "n1", count 300, ratio [0.1, 2.5] packed, child {name: "c"}, kind
// CONV, data "\x01a\"", attr {"k": 7}, d 1e22.
std::string node_wire() {
  std::string wire = from_hex(
      "0a026e3110ac021a08cdcccc3d00002040220" "30a01632801320301612" "23a050a016b100741");
  const double d = 1e22;
  char bytes[sizeof d];
  std::memcpy(bytes, &d, sizeof d);  // little-endian, as the wire is
  return wire + std::string(bytes, sizeof bytes);
}

TEST(TextFormat, PrintsEveryKindOfFieldAsPythonDoes) {
  const Result result = print(node_schema(), node_wire(), true);
  ASSERT_EQ(result.status, Status::kOk) << result.error;
  EXPECT_EQ(result.text,
            "name: \"n1\"\n"
            "count: 300\n"
            "ratio: 0.1\n"
            "ratio: 2.5\n"
            "child {\n"
            "  name: \"c\"\n"
            "}\n"
            "kind: CONV\n"
            "data: \"\\001a\\\"\"\n"
            "attr {\n"
            "  key: \"k\"\n"
            "  value: 7\n"
            "}\n"
            "d: 1e+22\n");
}

// A sink that keeps each piece it is given.
class Pieces : public Sink {
 public:
  void write(std::string_view text) override { pieces.emplace_back(text); }
  std::vector<std::string> pieces;
};

TEST(TextFormat, PrintToHandsTheSameTextOverInPieces) {
  // data: 10,000 bytes 0..255 repeated: escaped, it is longer than a piece.
  std::string data;
  for (int i = 0; i < 10000; ++i) data += static_cast<char>(i % 256);
  std::string wire = node_wire() + from_hex("32") + "\x90\x4e" + data;  // data = 6, 10000 bytes
  const Result whole = print(node_schema(), wire, true);
  ASSERT_EQ(whole.status, Status::kOk) << whole.error;
  Pieces sink;
  const Result streamed = print_to(node_schema(), wire, true, false, sink, 1000);
  ASSERT_EQ(streamed.status, Status::kOk) << streamed.error;
  EXPECT_TRUE(streamed.text.empty());
  std::string joined;
  for (const std::string& piece : sink.pieces) {
    EXPECT_LE(piece.size(), 1000u + 1000u / 4 * 4 + 64);
    joined += piece;
  }
  EXPECT_GT(sink.pieces.size(), 10u);
  EXPECT_EQ(joined, whole.text);
}

TEST(TextFormat, FloatsAsDoublesPrintAsFloatFormatEmpty) {
  // MessageToString(m, float_format=''): str() of the float's double value.
  const Result result = print(node_schema(), from_hex("1a08cdcccc3d00002040"), true, true);
  ASSERT_EQ(result.status, Status::kOk) << result.error;
  EXPECT_EQ(result.text, "ratio: 0.10000000149011612\nratio: 2.5\n");
}

TEST(TextFormat, NonAsciiTextIsKeptOrEscapedAsAsUtf8Says) {
  const std::string wire = from_hex("0a02c3a9");  // name: "é"
  EXPECT_EQ(print(node_schema(), wire, true).text, "name: \"\xc3\xa9\"\n");
  EXPECT_EQ(print(node_schema(), wire, false).text, "name: \"\\303\\251\"\n");
}

TEST(TextFormat, ReadsTheWireAsProtobufParsesIt) {
  // Unpacked repeated values in wire order, the last of a singular scalar,
  // a zero without presence and an unknown field (31) left out, fields
  // printed by number whatever their wire order.
  const std::string wire = from_hex("1001" "1d0000803f" "0a0161" "1002" "f80101" "1d00000040" "1000");
  const Result result = print(node_schema(), wire, true);
  ASSERT_EQ(result.status, Status::kOk) << result.error;
  EXPECT_EQ(result.text, "name: \"a\"\nratio: 1.0\nratio: 2.0\n");
}

TEST(TextFormat, AnEnumNumberWithoutANameOfAnOpenEnumPrintsAsANumber) {
  EXPECT_EQ(print(node_schema(), from_hex("2805"), true).text, "kind: 5\n");
}

TEST(TextFormat, WhatItDoesNotReproduceIsUnsupported) {
  MessageSpec any{"google.protobuf.Any", "google.protobuf.Any", {}, {}};
  MessageSpec holder{"test.Holder", "", {}, {}};
  FieldSpec value = field(1, "value", FieldType::kMessage);
  value.has_presence = true;
  value.message_type = 1;
  holder.fields.push_back(value);
  const Schema schema({holder, any}, {});
  EXPECT_EQ(print(schema, "", true).status, Status::kOk);  // not met in the wire: fine
  const Result result = print(schema, from_hex("0a00"), true);
  EXPECT_EQ(result.status, Status::kUnsupported);
  EXPECT_FALSE(result.error.empty());
}

TEST(TextFormat, BytesPythonWouldRefuseAreMalformed) {
  EXPECT_EQ(print(node_schema(), from_hex("10ac"), true).status, Status::kMalformed);  // varint cut
  EXPECT_EQ(print(node_schema(), from_hex("0a05616263"), true).status, Status::kMalformed);  // length past the end
}

TEST(TextFormat, AnInconsistentSchemaIsRefused) {
  MessageSpec node{"test.Bad", "", {field(1, "child", FieldType::kMessage)}, {}};
  node.fields[0].message_type = 5;  // no such message
  EXPECT_THROW(Schema({node}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace text_format
}  // namespace fastmts
