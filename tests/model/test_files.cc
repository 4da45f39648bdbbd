#include "tests/model/test_files.h"

#include <fstream>

#include "tests/unique_temp_path.h"

namespace rtgen::testing {

std::string WriteTempFile(const std::string& name, const std::string& bytes) {
  const std::string path = UniqueTempPath(name);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace rtgen::testing
