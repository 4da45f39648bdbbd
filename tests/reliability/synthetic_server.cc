#include "tests/reliability/synthetic_server.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/synthetic_model.h"

namespace rtgen::reliability {
namespace {

constexpr char kTokenizerSource[] = RTGEN_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "reliability tests: %s\n", what.c_str());
  std::abort();
}

std::string WriteModel() {
  char dir_template[] = "/tmp/rtgen-reliability-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) Die("cannot create a temp dir");
  absl::StatusOr<std::unique_ptr<GgufFile>> tokenizer = GgufFile::Open(kTokenizerSource);
  if (!tokenizer.ok()) Die(tokenizer.status().ToString());
  SyntheticModelOptions options;
  absl::StatusOr<ModelConfig> shape = SyntheticShape("tiny");  // hidden 64, 2 layers, GQA 4/2
  if (!shape.ok()) Die(shape.status().ToString());
  options.config = *shape;
  options.config.tie_word_embeddings = true;  // one 49152 x 64 matrix instead of two
  options.dtype = GgmlType::kF32;
  options.seed = 7;
  options.tokenizer_from = tokenizer->get();
  GgufWriter writer;
  if (auto built = BuildSyntheticGguf(options, &writer); !built.ok()) {
    Die(built.status().ToString());
  }
  std::string path = absl::StrCat(dir, "/tiny-smollm2-tokenizer.gguf");
  if (absl::Status s = writer.WriteFile(path); !s.ok()) Die(s.ToString());
  return path;
}

}  // namespace

const std::string& SyntheticModelPath() {
  static const std::string* path = new std::string(WriteModel());
  return *path;
}

ServerConfig SmallServerConfig() {
  ServerConfig config;
  config.model_path = SyntheticModelPath();
  config.backend.kind = "cpu";
  config.backend.threads = 2;
  config.host = "127.0.0.1";
  config.port = 0;
  config.metrics_port = -1;
  config.engine.max_model_len = 512;
  config.engine.max_num_seqs = 16;
  config.engine.num_kv_blocks = 512;
  return config;
}

RunningServer StartServer(const ServerConfig& config) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config);
  if (!server.ok()) Die(absl::StrCat("cannot start a server: ", server.status().ToString()));
  RunningServer out;
  out.server = *std::move(server);
  out.target = absl::StrCat("127.0.0.1:", out.server->port());
  out.client = InferenceClient::Connect(out.target);
  return out;
}

std::string ClientBinary() {
  if (const char* env = std::getenv("RTGEN_CLIENT"); env != nullptr) return env;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "rtgen-client";
  std::string dir(self, n);
  return dir.substr(0, dir.rfind('/')) + "/rtgen-client";
}

double FinishedCount(Server& server, const std::string& reason) {
  const std::string key = "rtgen_requests_total{finish_reason=\"" + reason + "\"}";
  for (absl::string_view line : absl::StrSplit(server.metrics().Render(), '\n')) {
    if (absl::StartsWith(line, key)) {
      double value = 0;
      if (absl::SimpleAtod(line.substr(key.size()), &value)) return value;
    }
  }
  return -1;
}

int64_t ResidentBytes() {
  // Free memory goes back to the system first, so the figure follows live memory, not how many
  // per-thread malloc arenas a loaded machine's thread interleavings happened to grow.
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0;
  int64_t resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace rtgen::reliability
