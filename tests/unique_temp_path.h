#pragma once
// A temp-file path no other test process can be using at the same time.
//
// ctest runs every TEST as its own process, several at once. Two processes that write the same
// fixed path race: one truncates the file while the other has it mapped, and the reader dies with
// SIGBUS. The pid, a random word and a per-process counter make each path unique; `name` keeps it
// readable.

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen::testing {

inline std::string UniqueTempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  // Pids are reused: a path left behind by an earlier process of the same pid (a directory whose
  // files nobody removed) would be this one's too, stale files and all. A random word a process
  // tells them apart.
  static const std::string process = std::to_string(getpid()) + "_" +
                                     std::to_string(std::random_device{}());
  std::string dir = ::testing::TempDir();
  if (dir.empty() || dir.back() != '/') dir += '/';
  return dir + "rtgen_" + process + "_" + std::to_string(counter++) + "_" + name;
}

// A UniqueTempPath removed, with the files beside it named path + each of `suffixes`, when the
// object goes.
class ScopedTempPath {
 public:
  explicit ScopedTempPath(const std::string& name, std::vector<std::string> suffixes = {})
      : path_(UniqueTempPath(name)), suffixes_(std::move(suffixes)) {}
  ~ScopedTempPath() {
    std::remove(path_.c_str());
    for (const std::string& s : suffixes_) std::remove((path_ + s).c_str());
  }
  ScopedTempPath(const ScopedTempPath&) = delete;
  ScopedTempPath& operator=(const ScopedTempPath&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> suffixes_;
};

}  // namespace rtgen::testing
