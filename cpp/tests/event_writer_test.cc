// The event writer's queue and thread (core/file_formats/event_writer.h):
// records land framed, in the order added, in the file `create_file` made;
// flush writes everything queued before it; a file that cannot be made
// drops the event and the next one tries again; close() ends the queue and
// reopen() starts a new file; a file that cannot be opened is an error.
#include "tests/test_bytes.h"
#include "core/file_formats/event_writer.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/file_formats/event_file.h"

namespace fastmts {
namespace {

using testing::read_file;

// A fresh directory, and the `create_file` of an EventWriter that makes
// numbered files in it, each starting with a first record, as TF's
// EventsWriter starts each with its file-version event.
class EventWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/fastmts_event_writer_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const std::string& name : made_) unlink(name.c_str());
    rmdir(dir_.c_str());
  }

  EventWriter::CreateFile create_file() {
    return [this]() -> std::optional<std::string> {
      if (refuse_.load()) return std::nullopt;
      std::string name = dir_ + "/events." + std::to_string(made_.size());
      std::ofstream(name, std::ios::binary) << tfrecord("first");
      made_.push_back(name);
      return name;
    };
  }

  std::string dir_;
  std::vector<std::string> made_;  // written by the writer thread only
  std::atomic<bool> refuse_{false};
};

TEST_F(EventWriterTest, RecordsLandInOrderAfterTheFirstRecord) {
  EventWriter writer("", 10, 120, 0, create_file());
  EXPECT_EQ(writer.filename(), "");
  for (const char* event : {"a", "bb", "ccc"}) EXPECT_TRUE(writer.add(event, true));
  writer.flush();
  ASSERT_EQ(made_.size(), 1u);
  EXPECT_EQ(writer.filename(), made_[0]);
  EXPECT_EQ(read_file(made_[0]), tfrecord("first") + tfrecord("a") + tfrecord("bb") + tfrecord("ccc"));
  writer.close();
}

TEST_F(EventWriterTest, AReservedPlaceKeepsItsRecordBeforeLaterOnes) {
  EventWriter writer("", 10, 120, 0, create_file());
  auto graph = writer.reserve();
  auto dropped = writer.reserve();
  ASSERT_NE(graph, nullptr);
  writer.add("summary", false);
  std::thread filler([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    writer.fill(graph, "graph");
    writer.drop(dropped);
  });
  writer.flush();  // waits for the reserved places
  filler.join();
  ASSERT_EQ(made_.size(), 1u);
  EXPECT_EQ(read_file(made_[0]), tfrecord("first") + tfrecord("graph") + tfrecord("summary"));
  writer.fill(graph, "again");  // filled already: nothing more
  writer.close();
  EXPECT_EQ(writer.reserve(), nullptr);
}

TEST_F(EventWriterTest, AppendsToAFileMadeBeforeIt) {
  const std::string name = create_file()().value();
  EventWriter writer(name, 10, 120, 0, create_file());
  EXPECT_EQ(writer.filename(), name);
  writer.add("x", false);
  writer.close();
  EXPECT_EQ(made_.size(), 1u);
  EXPECT_EQ(read_file(name), tfrecord("first") + tfrecord("x"));
}

TEST_F(EventWriterTest, ManyEventsFromSeveralThreadsAllLand) {
  EventWriter writer("", 4, 120, 0, create_file());  // a small queue: adders wait for room
  std::vector<std::thread> adders;
  for (int t = 0; t < 4; ++t)
    adders.emplace_back([&writer] {
      for (int i = 0; i < 200; ++i) writer.add("e", true);
    });
  for (std::thread& adder : adders) adder.join();
  writer.flush();
  std::string expected = tfrecord("first");
  for (int i = 0; i < 800; ++i) expected += tfrecord("e");
  EXPECT_EQ(read_file(made_[0]), expected);
  writer.close();
}

TEST_F(EventWriterTest, AnEventWithNoFileIsDroppedAndTheNextTriesAgain) {
  refuse_ = true;
  EventWriter writer("", 10, 120, 0, create_file());
  writer.add("lost", true);
  writer.flush();
  EXPECT_TRUE(made_.empty());
  EXPECT_EQ(writer.filename(), "");
  refuse_ = false;
  writer.add("kept", true);
  writer.flush();
  ASSERT_EQ(made_.size(), 1u);
  EXPECT_EQ(read_file(made_[0]), tfrecord("first") + tfrecord("kept"));
  writer.close();
}

TEST_F(EventWriterTest, CloseDropsLaterEventsAndReopenStartsANewFile) {
  EventWriter writer("", 10, 120, 0, create_file());
  writer.add("one", true);
  writer.close();
  EXPECT_TRUE(writer.closed());
  EXPECT_FALSE(writer.add("dropped", true));
  writer.reopen();
  EXPECT_FALSE(writer.closed());
  writer.add("two", true);
  writer.close();
  ASSERT_EQ(made_.size(), 2u);
  EXPECT_EQ(read_file(made_[0]), tfrecord("first") + tfrecord("one"));
  EXPECT_EQ(read_file(made_[1]), tfrecord("first") + tfrecord("two"));
}

TEST_F(EventWriterTest, AFileThatCannotBeOpenedIsAnError) {
  EXPECT_THROW(EventWriter(dir_ + "/missing/events", 10, 120, 0, create_file()),
               EventWriterError);
}

}  // namespace
}  // namespace fastmts
