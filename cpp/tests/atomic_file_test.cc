// The file written whole or not at all (core/file_formats/atomic_file.h):
// nothing in the directory until commit(), then the file under its name
// (replacing an older one); abort() and the destructor leave nothing.
#include "tests/test_bytes.h"
#include "core/file_formats/atomic_file.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace fastmts {
namespace {

using testing::read_file;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/fastmts_atomic_file_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const std::string& name : names_in(dir_)) unlink((dir_ + "/" + name).c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_;
};

TEST_F(AtomicFileTest, NothingIsThereUntilCommit) {
  const std::string path = dir_ + "/graph.pbtxt";
  {
    std::ofstream(path) << "old";
  }
  AtomicFile file(path);
  file.write("new ");
  file.write("text");
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(names_in(dir_).size(), 1u);
  file.commit();
  EXPECT_EQ(read_file(path), "new text");
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"graph.pbtxt"});
}

TEST_F(AtomicFileTest, AbortedOrDestroyedLeavesNothing) {
  {
    AtomicFile file(dir_ + "/a");
    file.write("x");
  }
  AtomicFile file(dir_ + "/b");
  file.write("y");
  file.abort();
  EXPECT_TRUE(names_in(dir_).empty());
  EXPECT_THROW(file.write("z"), std::system_error);
}

TEST_F(AtomicFileTest, ADirectoryThatIsNotThereIsAnErrorAtOnce) {
  EXPECT_THROW(AtomicFile(dir_ + "/missing/graph.pbtxt"), std::system_error);
}

}  // namespace
}  // namespace fastmts
