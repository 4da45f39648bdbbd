// rtgen-synth-model: writes a GGUF Llama model with random weights, for tests and benchmarks.
//
//   rtgen-synth-model --shape tiny --dtype q8_0 --out /tmp/tiny.gguf
//       --tokenizer-from models/SmolLM2-135M-Instruct.Q4_1.gguf   (one command line)

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "engine/common/flag_names.h"
#include "absl/flags/parse.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/synthetic_model.h"
#include "tools/synth_model_flags.h"

ABSL_FLAG(std::string, out, "", "Output .gguf path (required)");
ABSL_FLAG(std::string, shape, "tiny", "smollm2-135m | llama3.2-1b | llama3-8b | tiny");
ABSL_FLAG(std::string, dtype, "f32",
          "f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 (matrices; norms stay f32)");
ABSL_FLAG(uint64_t, seed, 1, "Random seed");
ABSL_FLAG(std::string, tokenizer_from, "",
          "Copy tokenizer.* metadata from this GGUF; vocab becomes its size");
// Dimension overrides, as text: empty is not given (tools/synth_model_flags.h checks them).
ABSL_FLAG(std::string, hidden, "", "Override hidden size");
ABSL_FLAG(std::string, layers, "", "Override layer count");
ABSL_FLAG(std::string, heads, "", "Override query head count");
ABSL_FLAG(std::string, kv_heads, "", "Override key/value head count");
ABSL_FLAG(std::string, ffn, "", "Override feed-forward width");
ABSL_FLAG(std::string, vocab, "", "Override vocabulary size (not with --tokenizer-from)");
ABSL_FLAG(std::string, head_dim, "", "Override head dim (default hidden / heads)");
ABSL_FLAG(std::string, tie, "", "--tie=true | --tie=false: tie the LM head to the embedding "
          "(default: the shape's own)");

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "rtgen-synth-model: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  rtgen::DashedFlagNamesToUnderscores(argc, argv);
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {  // a value given without its flag ("q8_0" for "--dtype q8_0")
    return Fail(std::string("unexpected argument '") + positional[1] +
                "' (every value goes with its flag)");
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return Fail("--out is required");
  if (!absl::GetFlag(FLAGS_vocab).empty() && !absl::GetFlag(FLAGS_tokenizer_from).empty()) {
    return Fail("--vocab and --tokenizer-from: the vocabulary is the tokenizer's; give one");
  }
  rtgen::tools::SynthShapeFlags flags;
  flags.shape = absl::GetFlag(FLAGS_shape);
  flags.hidden = absl::GetFlag(FLAGS_hidden);
  flags.layers = absl::GetFlag(FLAGS_layers);
  flags.heads = absl::GetFlag(FLAGS_heads);
  flags.kv_heads = absl::GetFlag(FLAGS_kv_heads);
  flags.ffn = absl::GetFlag(FLAGS_ffn);
  flags.vocab = absl::GetFlag(FLAGS_vocab);
  flags.head_dim = absl::GetFlag(FLAGS_head_dim);
  flags.tie = absl::GetFlag(FLAGS_tie);
  auto shape = rtgen::tools::SynthShapeConfig(flags);
  if (!shape.ok()) return Fail(std::string(shape.status().message()));
  auto dtype = rtgen::ParseGgmlDtype(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return Fail(std::string(dtype.status().message()));

  rtgen::SyntheticModelOptions options;
  options.config = *shape;
  options.dtype = *dtype;
  options.seed = absl::GetFlag(FLAGS_seed);

  std::unique_ptr<rtgen::GgufFile> tokenizer;
  if (const std::string tok = absl::GetFlag(FLAGS_tokenizer_from); !tok.empty()) {
    auto file = rtgen::GgufFile::Open(tok);
    if (!file.ok()) return Fail(file.status().ToString());
    tokenizer = std::move(file).value();
    options.tokenizer_from = tokenizer.get();
  }

  rtgen::GgufWriter writer;
  auto built = rtgen::BuildSyntheticGguf(options, &writer);
  if (!built.ok()) return Fail(built.status().ToString());
  if (auto s = writer.WriteFile(out); !s.ok()) return Fail(s.ToString());
  std::printf("wrote %s (%s, vocabulary %d, %s)\n", out.c_str(), built->name.c_str(),
              built->vocab_size, absl::GetFlag(FLAGS_dtype).c_str());
  return 0;
}
