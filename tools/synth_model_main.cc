// rtgen-synth-model: writes a GGUF Llama model with random weights, for tests and benchmarks.
//
//   rtgen-synth-model --shape tiny --dtype q8_0 --out /tmp/tiny.gguf
//       --tokenizer-from models/SmolLM2-135M-Instruct.Q4_1.gguf   (one command line)

#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "engine/common/flag_names.h"
#include "absl/flags/parse.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/synthetic_model.h"

ABSL_FLAG(std::string, out, "", "Output .gguf path (required)");
ABSL_FLAG(std::string, shape, "tiny", "smollm2-135m | llama3.2-1b | llama3-8b | tiny");
ABSL_FLAG(std::string, dtype, "f32",
          "f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 (matrices; norms stay f32)");
ABSL_FLAG(uint64_t, seed, 1, "Random seed");
ABSL_FLAG(std::string, tokenizer_from, "",
          "Copy tokenizer.* metadata from this GGUF; vocab becomes its size");
ABSL_FLAG(int, hidden, 0, "Override hidden size");
ABSL_FLAG(int, layers, 0, "Override layer count");
ABSL_FLAG(int, heads, 0, "Override query head count");
ABSL_FLAG(int, kv_heads, 0, "Override key/value head count");
ABSL_FLAG(int, ffn, 0, "Override feed-forward width");
ABSL_FLAG(int, vocab, 0, "Override vocabulary size (ignored with --tokenizer-from)");
ABSL_FLAG(int, head_dim, 0, "Override head dim (default hidden / heads)");
ABSL_FLAG(bool, tie, true, "Tie the LM head to the embedding (only when overriding the shape)");

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "rtgen-synth-model: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  rtgen::DashedFlagNamesToUnderscores(argc, argv);
  absl::ParseCommandLine(argc, argv);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return Fail("--out is required");
  auto shape = rtgen::SyntheticShape(absl::GetFlag(FLAGS_shape));
  if (!shape.ok()) return Fail(std::string(shape.status().message()));
  auto dtype = rtgen::ParseGgmlDtype(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return Fail(std::string(dtype.status().message()));

  rtgen::SyntheticModelOptions options;
  options.config = *shape;
  options.dtype = *dtype;
  options.seed = absl::GetFlag(FLAGS_seed);
  rtgen::ModelConfig& c = options.config;
  bool overridden = false;
  auto apply = [&overridden](int flag, int* field) {
    if (flag > 0) {
      *field = flag;
      overridden = true;
    }
  };
  apply(absl::GetFlag(FLAGS_hidden), &c.hidden_size);
  apply(absl::GetFlag(FLAGS_layers), &c.num_layers);
  apply(absl::GetFlag(FLAGS_heads), &c.num_heads);
  apply(absl::GetFlag(FLAGS_kv_heads), &c.num_kv_heads);
  apply(absl::GetFlag(FLAGS_ffn), &c.intermediate_size);
  apply(absl::GetFlag(FLAGS_vocab), &c.vocab_size);
  if (overridden) {
    c.head_dim = c.hidden_size / c.num_heads;
    c.tie_word_embeddings = absl::GetFlag(FLAGS_tie);
    c.name = "synthetic-custom";
  }
  if (absl::GetFlag(FLAGS_head_dim) > 0) c.head_dim = absl::GetFlag(FLAGS_head_dim);

  std::unique_ptr<rtgen::GgufFile> tokenizer;
  if (const std::string tok = absl::GetFlag(FLAGS_tokenizer_from); !tok.empty()) {
    auto file = rtgen::GgufFile::Open(tok);
    if (!file.ok()) return Fail(file.status().ToString());
    tokenizer = std::move(file).value();
    options.tokenizer_from = tokenizer.get();
  }

  rtgen::GgufWriter writer;
  if (auto s = rtgen::BuildSyntheticGguf(options, &writer); !s.ok()) return Fail(s.ToString());
  if (auto s = writer.WriteFile(out); !s.ok()) return Fail(s.ToString());
  std::printf("wrote %s (%s, %s)\n", out.c_str(), c.name.c_str(),
              absl::GetFlag(FLAGS_dtype).c_str());
  return 0;
}
