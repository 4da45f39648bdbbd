#include "tests/fuzz/fuzz_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace rtgen::fuzz {

const std::string& WriteScratchFile(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [suffix] {
    const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/rtgen_fuzz_" + std::to_string(getpid()) + suffix;
  }();
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  size_t written = 0;
  while (written < size) {
    ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    written += static_cast<size_t>(n);
  }
  close(fd);
  return path;
}

std::string ModelPath() {
  if (const char* env = std::getenv("RTGEN_FUZZ_MODEL")) return env;
  return RTGEN_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace rtgen::fuzz
