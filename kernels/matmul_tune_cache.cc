#include "kernels/matmul_tune_cache.h"

#include <cstdio>
#include <fstream>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rtgen::kernels {
namespace {

constexpr int kFields = 8;

std::string Hex(const MatmulTuneCache::AlgoBytes& algo) {
  std::string out;
  for (const uint64_t word : algo) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(word));
    out.append(buf, 16);
  }
  return out;
}

bool ParseHex(const std::string& s, MatmulTuneCache::AlgoBytes* algo) {
  if (s.size() != 16 * algo->size()) return false;
  for (size_t i = 0; i < algo->size(); ++i) {
    uint64_t word = 0;
    for (const char c : s.substr(16 * i, 16)) {
      int digit = 0;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else {
        return false;
      }
      word = word << 4 | static_cast<uint64_t>(digit);
    }
    (*algo)[i] = word;
  }
  return true;
}

bool Plain(const std::string& s) {
  return !s.empty() && s.find_first_of("\t\n\r") == std::string::npos;
}

}  // namespace

absl::StatusOr<MatmulTuneCache> MatmulTuneCache::Load(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("matmul tune cache: empty path");
  MatmulTuneCache cache;
  cache.path_ = path;
  std::ifstream in(path);
  if (!in) return cache;  // no file yet: nothing tuned
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    int32_t m = 0, n = 0, k = 0, f32 = 0;
    Entry e;
    if (f.size() != kFields || !Plain(f[0]) || !Plain(f[1]) || !absl::SimpleAtoi(f[2], &m) ||
        !absl::SimpleAtoi(f[3], &n) || !absl::SimpleAtoi(f[4], &k) ||
        !absl::SimpleAtoi(f[5], &f32) || m <= 0 || n <= 0 || k <= 0 || (f32 != 0 && f32 != 1) ||
        !ParseHex(f[6], &e.algo)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "matmul tune cache ", path, " line ", number,
          ": expected device, mode, m, n, k, fp32 (0/1), 128 hex digits and a note, "
          "tab-separated (delete the file to tune afresh)"));
    }
    e.note = f[7];
    cache.entries_[Key{f[0], f[1], m, n, k, f32 == 1}] = e;
  }
  return cache;
}

std::optional<MatmulTuneCache::Entry> MatmulTuneCache::Find(const std::string& device_tag,
                                                            const std::string& mode, int32_t m,
                                                            int32_t n, int32_t k,
                                                            bool y_f32) const {
  const auto it = entries_.find(Key{device_tag, mode, m, n, k, y_f32});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

absl::Status MatmulTuneCache::Put(const std::string& device_tag, const std::string& mode,
                                  int32_t m, int32_t n, int32_t k, bool y_f32,
                                  const Entry& entry) {
  if (!Plain(device_tag) || !Plain(mode) ||
      entry.note.find_first_of("\t\n\r") != std::string::npos || m <= 0 || n <= 0 || k <= 0) {
    return absl::InvalidArgumentError(
        "matmul tune cache: an empty tag or mode, tabs or newlines, or a shape not positive");
  }
  entries_[Key{device_tag, mode, m, n, k, y_f32}] = entry;
  return Write();
}

absl::Status MatmulTuneCache::Write() const {
  const std::string tmp = absl::StrCat(path_, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& [key, e] : entries_) {
      const auto& [device, mode, m, n, k, f32] = key;
      out << device << '\t' << mode << '\t' << m << '\t' << n << '\t' << k << '\t'
          << (f32 ? 1 : 0) << '\t' << Hex(e.algo) << '\t'
          << (e.note.empty() ? std::string_view("-") : std::string_view(e.note)) << '\n';
    }
    out.flush();
    if (!out) {
      return absl::UnavailableError(absl::StrCat("matmul tune cache: cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("matmul tune cache: cannot rename ", tmp, " to ", path_));
  }
  return absl::OkStatus();
}

}  // namespace rtgen::kernels
