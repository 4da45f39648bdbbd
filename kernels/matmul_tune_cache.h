#pragma once
// A file of tuned cuBLASLt choices (RTGEN_MATMUL_TUNE_CACHE=path, matmul.h): a shape to be tuned
// is looked up here first, and each new choice is written back, so a restart of the server on the
// same GPU and cuBLASLt times nothing, runs the same algorithms as before (the same rounding, so
// the same greedy answers) and pays the wide search (RTGEN_MATMUL_TUNE=wide: 85 s of start-up at
// Llama-3-8B on the H200) once.
//
// One entry per line, tab-separated: the device tag (GPU name, compute capability and cuBLASLt
// version: what makes a choice valid and fast), the tuning mode, m, n, k, fp32 output (0 / 1), the
// algorithm's bytes (cublasLtMatmulAlgo_t, 64 bytes) as 128 hex digits, and a note (its
// configuration and time, for people). Entries of other devices are kept when the file is
// rewritten. The caller checks a loaded algorithm with cublasLtMatmulAlgoCheck before use.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rtgen::kernels {

class MatmulTuneCache {
 public:
  using AlgoBytes = std::array<uint64_t, 8>;  // a cublasLtMatmulAlgo_t
  struct Entry {
    AlgoBytes algo{};
    std::string note;
  };

  // Reads `path` (a missing file is an empty cache); a malformed line is an error naming the file
  // and the line.
  static absl::StatusOr<MatmulTuneCache> Load(const std::string& path);

  const std::string& path() const { return path_; }
  std::optional<Entry> Find(const std::string& device_tag, const std::string& mode, int32_t m,
                            int32_t n, int32_t k, bool y_f32) const;
  // Adds (or replaces) the entry and rewrites the file (a temporary file renamed over it, so a
  // reader never sees half a file). The tag, mode and note must hold no tabs or newlines.
  absl::Status Put(const std::string& device_tag, const std::string& mode, int32_t m, int32_t n,
                   int32_t k, bool y_f32, const Entry& entry);

 private:
  using Key = std::tuple<std::string, std::string, int32_t, int32_t, int32_t, bool>;
  absl::Status Write() const;

  std::string path_;
  std::map<Key, Entry> entries_;
};

}  // namespace rtgen::kernels
