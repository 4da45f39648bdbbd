#include "tests/model/test_files.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace rtgen::testing {

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  std::string dir = ::testing::TempDir();
  if (dir.empty() || dir.back() != '/') dir += '/';
  return dir + "rtgen_model_" + std::to_string(getpid()) + "_" + std::to_string(counter++) +
         "_" + name;
}

std::string WriteTempFile(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace rtgen::testing
