#pragma once
// A file of tuned cuBLASLt choices (RTGEN_MATMUL_TUNE_CACHE=path, matmul.h): a shape to be tuned
// is looked up here first, and each new choice is written back, so a restart of the server on the
// same GPU and cuBLASLt times nothing, runs the tuned shapes' algorithms as before (the same
// rounding, so the same greedy answers) and pays the wide search (RTGEN_MATMUL_TUNE=wide: 84 s
// of start-up at Llama-3-8B on the H200) once.
//
// One entry per line, tab-separated: the device tag (GPU name, compute capability, SM count and
// cuBLASLt version: what makes a choice valid and fast), the tuning mode, m, n, k, fp32 output
// (0 / 1), accumulate (0 / 1: β = 1 in place), the algorithm's bytes (cublasLtMatmulAlgo_t, 64
// bytes) as 128 hex digits, and a note (its configuration and time, for people). Lines starting
// with '#' are comments (read, not written back). The caller checks a loaded algorithm with
// cublasLtMatmulAlgoCheck before use.
//
// Shipped(): the tables of kernels/tuned_matmul/*.tsv, compiled into the binary (read-only): what
// the wide search chose on the GPUs their tags name, so a server on such a GPU and cuBLASLt runs
// those choices without the search's start-up (matmul.h says where they rank).
//
// Writes hold an flock on `path`.lock, merge the entries other processes added since the load,
// and rename a synced temporary file of a name unique to the process over `path`, so processes
// sharing the file (one per GPU) lose nothing and a reader never sees half a file. Not
// thread-safe: MatmulContext uses it under its process-wide tuning mutex.

#include <array>
#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
  struct Shape {
    int32_t m = 0, n = 0, k = 0;
    bool y_f32 = false;
    bool accumulate = false;
  };

  // Reads `path` (a missing file is an empty cache); a malformed line or a file that exists but
  // cannot be read is an error naming the file (and the line).
  static absl::StatusOr<MatmulTuneCache> Load(const std::string& path);
  // Parses `text` (the file's format) into a read-only table named `name` in errors; Put on it
  // is an error.
  static absl::StatusOr<MatmulTuneCache> Parse(std::string_view text, const std::string& name);
  // The shipped tables (empty if they do not parse, which a test rules out; said on stderr).
  static const MatmulTuneCache& Shipped();

  const std::string& path() const { return path_; }
  size_t size() const { return entries_.size(); }
  // Calls f(device_tag, mode, shape, entry) for every entry, in key order.
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& [key, entry] : entries_) {
      const auto& [tag, mode, m, n, k, y_f32, accumulate] = key;
      f(tag, mode, Shape{m, n, k, y_f32, accumulate}, entry);
    }
  }
  std::optional<Entry> Find(const std::string& device_tag, const std::string& mode,
                            const Shape& shape) const;
  // One line of the file's format (newline included) for an entry; the fields as Put requires.
  static std::string FormatLine(const std::string& device_tag, const std::string& mode,
                                const Shape& shape, const Entry& entry);
  // Adds (or replaces) the entry and rewrites the file as the header says. The tag, mode and
  // note must hold no tabs or newlines, the tag and mode not be empty, the shape be positive.
  absl::Status Put(const std::string& device_tag, const std::string& mode, const Shape& shape,
                   const Entry& entry);

 private:
  using Key = std::tuple<std::string, std::string, int32_t, int32_t, int32_t, bool, bool>;
  // Parses the file into entries_ (entries already held win over the file's).
  absl::Status Merge();
  // Parses `in`'s lines into entries_ (held entries win); errors name name_ and the line.
  absl::Status ParseLines(std::istream& in);
  absl::Status Write() const;

  std::string path_;  // empty for a read-only table (Parse)
  std::string name_;  // the file or table, in errors
  std::map<Key, Entry> entries_;
};

}  // namespace rtgen::kernels
