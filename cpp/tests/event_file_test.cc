// Event-file encoding (core/file_formats/event_file.h) against known values:
// CRC-32C's published check value and RFC 3720's vectors, and records and
// Events as TF 2.21's TFRecordWriter and protobuf wrote them.
#include "core/file_formats/event_file.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/test_bytes.h"

namespace fastmts {
namespace {

using testing::from_hex;

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);    // RFC 3720 B.4
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);  // RFC 3720 B.4
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);  // RFC 3720 B.4
}

// CRC-32C bit by bit (reflected, polynomial 0x82F63B78): the definition,
// against which a table- or block-wise implementation is checked.
uint32_t crc32c_by_bits(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Crc32c, EveryLengthAndAlignmentAsTheDefinition) {
  std::string data;
  for (int i = 0; i < 1031; ++i) data.push_back(static_cast<char>(i * 7 + 3));
  for (size_t start : {0, 1, 3, 7}) {
    for (size_t length : {0, 1, 5, 8, 15, 16, 63, 64, 100, 1024}) {
      const std::string part = data.substr(start, length);
      EXPECT_EQ(crc32c(part), crc32c_by_bits(part)) << start << "+" << length;
    }
  }
}

TEST(Crc32c, MaskedAsTFRecordStoresIt) {
  // ((crc >> 15) | (crc << 17)) + 0xa282ead8, as in TF's crc32c::Mask.
  const uint32_t crc = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  EXPECT_EQ(masked_crc32c("123456789"), 0xC78AB0E5u);
  EXPECT_EQ(masked_crc32c(""), 0xA282EAD8u);
}

TEST(TFRecord, FramingIsTFRecordWritersBytes) {
  EXPECT_EQ(tfrecord(""), from_hex("000000000000000029039807d8ea82a2"));
  EXPECT_EQ(tfrecord("hello"), from_hex("0500000000000000eab2043e68656c6c6fbb1f1c19"));
  EXPECT_EQ(tfrecord("123456789"),
            from_hex("090000000000000037f97139313233343536373839e5b08ac7"));
}

TEST(EventBytes, AsProtobufSerializesAnEvent) {
  // Event(wall_time=1.5, step=7, file_version='brain.Event:2')
  EXPECT_EQ(event_bytes(1.5, 7, EventWhat::kFileVersion, "brain.Event:2"),
            from_hex("09000000000000f83f10071a0d627261696e2e4576656e743a32"));
  // Zero wall time and step are left out; the oneof member is always written.
  EXPECT_EQ(event_bytes(0, 0, EventWhat::kFileVersion, ""), from_hex("1a00"));
}

TEST(EventBytes, SimpleValueSummary) {
  // Summary(value=[Value(tag='global_step/sec', simple_value=2.5)])
  EXPECT_EQ(simple_value_summary("global_step/sec", 2.5f),
            from_hex("0a160a0f676c6f62616c5f737465702f7365631500002040"));
}

}  // namespace
}  // namespace fastmts
