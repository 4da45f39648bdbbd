#include "kernels/matmul_tune_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "kernels/shipped_tune_table.h"

namespace rtgen::kernels {
namespace {

constexpr int kFields = 9;

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

bool Flag(const std::string& s, bool* out) {
  if (s != "0" && s != "1") return false;
  *out = s == "1";
  return true;
}

// An exclusive flock on `path`.lock for the life of the object (released when the fd closes).
class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0 && flock(fd_, LOCK_EX) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) close(fd_);
  }
  bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<MatmulTuneCache> MatmulTuneCache::Load(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("matmul tune cache: empty path");
  MatmulTuneCache cache;
  cache.path_ = path;
  cache.name_ = path;
  RETURN_IF_ERROR(cache.Merge());
  return cache;
}

absl::StatusOr<MatmulTuneCache> MatmulTuneCache::Parse(std::string_view text,
                                                       const std::string& name) {
  MatmulTuneCache table;
  table.name_ = name;
  std::istringstream in{std::string(text)};
  RETURN_IF_ERROR(table.ParseLines(in));
  return table;
}

const MatmulTuneCache& MatmulTuneCache::Shipped() {
  static const MatmulTuneCache* shipped = [] {
    absl::StatusOr<MatmulTuneCache> t = Parse(ShippedTuneTableText(), "the shipped tune table");
    if (!t.ok()) {
      std::fprintf(stderr, "rtgen: %s; not used\n", std::string(t.status().message()).c_str());
      return new MatmulTuneCache();
    }
    return new MatmulTuneCache(*std::move(t));
  }();
  return *shipped;
}

absl::Status MatmulTuneCache::Merge() {
  std::ifstream in(path_);
  if (!in) {
    if (access(path_.c_str(), F_OK) != 0 && errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat("matmul tune cache: cannot read ", path_, ": ", std::strerror(errno)));
  }
  errno = 0;
  RETURN_IF_ERROR(ParseLines(in));
  // getline stops at a failed read as at the end of the file; a failed read (a directory, an I/O
  // error) sets badbit, and is an error: an empty or partial cache would be written back by Put.
  if (in.bad()) {
    return absl::UnavailableError(absl::StrCat("matmul tune cache: cannot read ", path_, ": ",
                                               errno != 0 ? std::strerror(errno) : "read error"));
  }
  return absl::OkStatus();
}

absl::Status MatmulTuneCache::ParseLines(std::istream& in) {
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    Shape s;
    Entry e;
    if (f.size() != kFields || !Plain(f[0]) || !Plain(f[1]) || !absl::SimpleAtoi(f[2], &s.m) ||
        !absl::SimpleAtoi(f[3], &s.n) || !absl::SimpleAtoi(f[4], &s.k) || s.m <= 0 ||
        s.n <= 0 || s.k <= 0 || !Flag(f[5], &s.y_f32) || !Flag(f[6], &s.accumulate) ||
        !ParseHex(f[7], &e.algo)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "matmul tune cache ", name_, " line ", number,
          ": expected device, mode, m, n, k, fp32 (0/1), accumulate (0/1), 128 hex digits and "
          "a note, tab-separated (delete the file to tune afresh)"));
    }
    e.note = f[8];
    entries_.emplace(Key{f[0], f[1], s.m, s.n, s.k, s.y_f32, s.accumulate}, e);  // held wins
  }
  return absl::OkStatus();
}

std::optional<MatmulTuneCache::Entry> MatmulTuneCache::Find(const std::string& device_tag,
                                                            const std::string& mode,
                                                            const Shape& s) const {
  const auto it = entries_.find(Key{device_tag, mode, s.m, s.n, s.k, s.y_f32, s.accumulate});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

absl::Status MatmulTuneCache::Put(const std::string& device_tag, const std::string& mode,
                                  const Shape& s, const Entry& entry) {
  if (!Plain(device_tag) || !Plain(mode) ||
      entry.note.find_first_of("\t\n\r") != std::string::npos || s.m <= 0 || s.n <= 0 ||
      s.k <= 0) {
    return absl::InvalidArgumentError(
        "matmul tune cache: an empty tag or mode, tabs or newlines, or a shape not positive");
  }
  if (path_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("matmul tune cache: ", name_, " is read-only"));
  }
  entries_[Key{device_tag, mode, s.m, s.n, s.k, s.y_f32, s.accumulate}] = entry;
  const FileLock lock(absl::StrCat(path_, ".lock"));
  if (!lock.held()) {
    return absl::UnavailableError(
        absl::StrCat("matmul tune cache: cannot lock ", path_, ".lock: ", std::strerror(errno)));
  }
  RETURN_IF_ERROR(Merge());  // what other processes wrote since
  return Write();
}

std::string MatmulTuneCache::FormatLine(const std::string& device_tag, const std::string& mode,
                                        const Shape& shape, const Entry& entry) {
  return absl::StrCat(device_tag, "\t", mode, "\t", shape.m, "\t", shape.n, "\t", shape.k, "\t",
                      shape.y_f32 ? 1 : 0, "\t", shape.accumulate ? 1 : 0, "\t",
                      Hex(entry.algo), "\t", entry.note.empty() ? "-" : entry.note, "\n");
}

absl::Status MatmulTuneCache::Write() const {
  const std::string tmp = absl::StrCat(path_, ".tmp.", getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("matmul tune cache: cannot write ", tmp, ": ", std::strerror(errno)));
  }
  bool ok = true;
  for (const auto& [key, e] : entries_) {
    const auto& [device, mode, m, n, k, f32, acc] = key;
    const std::string line = FormatLine(device, mode, Shape{m, n, k, f32, acc}, e);
    ok = ok && std::fwrite(line.data(), 1, line.size(), f) == line.size();
  }
  ok = ok && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("matmul tune cache: cannot write ", path_, ": ", why));
  }
  return absl::OkStatus();
}

}  // namespace rtgen::kernels
