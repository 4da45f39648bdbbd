// rtgen-fuzz-make-seeds OUT_DIR: writes the small seed corpora the fuzz targets start from
// (committed under tests/fuzz/corpus/; run again only when the formats change):
//   gguf/         tiny GGUF files from GgufWriter (every tensor type, v2 and v3, metadata types)
//   safetensors/  tiny safetensors files (F32, F16, BF16, metadata, an empty tensor)
//   tokenizer/    a few strings (ASCII, multi-byte, special-token text, invalid UTF-8)
//   request/      serialized GenerateRequests (prompt, token ids, chat, sampling, stop strings)
// Regression inputs that a fuzzer found (e.g. tokenizer/byte_without_token) are added by hand.

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/model/gguf_writer.h"
#include "rtgen/v1/inference.pb.h"

namespace fs = std::filesystem;

namespace {

void Write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.25f - 3.0f;
  return v;
}

void GgufSeeds(const fs::path& dir) {
  rtgen::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 64);
  w.AddUint32("llama.embedding_length", 32);
  w.AddUint32("llama.block_count", 1);
  w.AddUint32("llama.attention.head_count", 2);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.AddBool("tokenizer.ggml.add_bos_token", true);
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
  w.AddStringArray("tokenizer.ggml.merges", {"a b"});
  w.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 3});
  w.AddFloat32Array("tokenizer.ggml.scores", {0.f, 0.f, -1.f, 0.f});
  w.AddUint64("u64", 7);
  w.AddInt64("i64", -7);
  w.AddFloat64("f64", 0.5);
  const std::pair<const char*, rtgen::GgmlType> types[] = {
      {"f32", rtgen::GgmlType::kF32},   {"f16", rtgen::GgmlType::kF16},
      {"bf16", rtgen::GgmlType::kBF16}, {"q8_0", rtgen::GgmlType::kQ8_0},
      {"q4_0", rtgen::GgmlType::kQ4_0}, {"q4_1", rtgen::GgmlType::kQ4_1}};
  for (const auto& [name, type] : types) {
    if (!w.AddTensor(name, {32, 2}, type, Ramp(64)).ok()) std::exit(1);
  }
  Write(dir / "all_types_v3.gguf", *w.Serialize());
  w.set_version(2);
  Write(dir / "all_types_v2.gguf", *w.Serialize());

  rtgen::GgufWriter small;
  small.set_alignment(64);
  small.AddString("general.name", "tiny");
  if (!small.AddTensor("w", {4}, rtgen::GgmlType::kF32, Ramp(4)).ok()) std::exit(1);
  Write(dir / "one_tensor_align64.gguf", *small.Serialize());
}

std::string SafetensorsFile(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

void SafetensorsSeeds(const fs::path& dir) {
  std::string f32(16, '\0');
  float one = 1.0f;
  for (int i = 0; i < 4; ++i) std::memcpy(&f32[4 * i], &one, 4);
  Write(dir / "f32.safetensors",
        SafetensorsFile(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", f32));
  Write(dir / "mixed.safetensors",
        SafetensorsFile(R"({"__metadata__":{"format":"pt"},)"
                        R"("a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[4,8]},)"
                        R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                        R"("i":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}})",
                        std::string("\x00\x3c\x00\xc0\x80\x3f\x00\x40\x07\x00\x00\x00", 12)));
}

void TokenizerSeeds(const fs::path& dir) {
  Write(dir / "ascii", "Hello, world! It's 2024 and we're   testing\ttabs\nnewlines.");
  Write(dir / "multibyte", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 na\xc3\xafve");
  Write(dir / "special", "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>");
  Write(dir / "digits", "1234567890 3.14159 -42 0x1F");
  Write(dir / "invalid_utf8", std::string("ok \xc3\x28 \xed\xa0\x80 \xff", 11));
}

void RequestSeeds(const fs::path& dir) {
  rtgen::v1::GenerateRequest prompt;
  prompt.set_request_id("seed-1");
  prompt.set_prompt("Write a haiku about rain.");
  prompt.mutable_sampling()->set_temperature(0.7f);
  prompt.mutable_sampling()->set_top_p(0.9f);
  prompt.mutable_sampling()->set_top_k(40);
  prompt.mutable_sampling()->set_seed(1);
  prompt.mutable_stopping()->set_max_tokens(16);
  prompt.mutable_stopping()->add_stop("\n\n");
  prompt.mutable_stopping()->add_stop_token_ids(2);
  Write(dir / "prompt", prompt.SerializeAsString());

  rtgen::v1::GenerateRequest ids;
  for (int id : {1, 100, 2000, 49151}) ids.mutable_prompt_token_ids()->add_ids(id);
  ids.set_add_special_tokens(false);
  ids.set_logprobs(5);
  ids.set_priority(3);
  ids.set_latency_budget_ms(200);
  Write(dir / "token_ids", ids.SerializeAsString());

  rtgen::v1::GenerateRequest chat;
  auto* messages = chat.mutable_messages();
  auto* system = messages->add_messages();
  system->set_role("system");
  system->set_content("You are terse.");
  auto* user = messages->add_messages();
  user->set_role("user");
  user->set_content("What is 2+2?");
  chat.mutable_sampling()->set_temperature(0.0f);
  chat.mutable_sampling()->set_repetition_penalty(1.1f);
  chat.mutable_sampling()->set_presence_penalty(0.5f);
  chat.mutable_sampling()->set_frequency_penalty(-0.5f);
  chat.mutable_sampling()->set_min_p(0.05f);
  chat.mutable_stopping()->set_ignore_eos(true);
  Write(dir / "chat", chat.SerializeAsString());

  rtgen::v1::GenerateRequest bad;
  bad.set_prompt("");
  bad.mutable_sampling()->set_temperature(-1.0f);
  bad.mutable_stopping()->set_max_tokens(0);
  Write(dir / "invalid", bad.SerializeAsString());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  fs::path out = argv[1];
  GgufSeeds(out / "gguf");
  SafetensorsSeeds(out / "safetensors");
  TokenizerSeeds(out / "tokenizer");
  RequestSeeds(out / "request");
  return 0;
}
