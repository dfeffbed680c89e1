#include "core/file_formats/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <system_error>

namespace fastmts {
namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// TF's temporary name: the file's, ".tmp" and a uuid4's 32 hex digits.
std::string temporary_name(const std::string& path) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  static const char kHex[] = "0123456789abcdef";
  std::string name = path + ".tmp";
  for (int i = 0; i < 32; ++i) name += kHex[random() % 16];
  return name;
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
#ifdef O_TMPFILE
  fd_ = ::open(directory_of(path_).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
#endif
  if (fd_ < 0) {
    // No unnamed files here (or an error the named file will tell again).
    temp_name_ = temporary_name(path_);
    fd_ = ::open(temp_name_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      temp_name_.clear();
      throw_errno("cannot create a file in " + directory_of(path_));
    }
  }
}

AtomicFile::~AtomicFile() { abort(); }

void AtomicFile::write(std::string_view data) {
  if (fd_ < 0) throw std::system_error(EBADF, std::generic_category(), "file closed: " + path_);
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot write " + path_);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw std::system_error(EBADF, std::generic_category(), "file closed: " + path_);
  if (temp_name_.empty()) {
    // The unnamed file gets TF's temporary name, then the file's.
    const std::string name = temporary_name(path_);
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) != 0)
      throw_errno("cannot name the file written for " + path_);
    temp_name_ = name;
  }
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw_errno("cannot write " + path_);
  }
  fd_ = -1;
  if (::rename(temp_name_.c_str(), path_.c_str()) != 0) throw_errno("cannot rename to " + path_);
  temp_name_.clear();
}

void AtomicFile::abort() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_name_.empty()) ::unlink(temp_name_.c_str());
  temp_name_.clear();
}

}  // namespace fastmts
