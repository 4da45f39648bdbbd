// libFuzzer target: a GenerateRequest parsed from arbitrary bytes as the server parses it
// (server/raw_message.h: text fields may hold invalid UTF-8), then ToEngineRequest with the real
// SmolLM2 tokenizer and chat template. Any status is fine; a crash, a sanitizer report, or an
// accepted request that breaks the limits or carries invalid UTF-8 is a finding.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "engine/common/utf8.h"
#include "engine/model/gguf_file.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/raw_message.h"
#include "server/request_validation.h"
#include "tests/fuzz/fuzz_file.h"

namespace {

struct Model {
  std::unique_ptr<rtgen::Tokenizer> tokenizer;
  std::optional<rtgen::ChatTemplate> chat_template;
  rtgen::ValidationLimits limits;
};

void Die(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "request_validation_fuzzer: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

const Model& SmolModel() {
  static const Model* model = [] {
    auto* m = new Model;  // lives for the whole process
    absl::StatusOr<std::unique_ptr<rtgen::GgufFile>> file =
        rtgen::GgufFile::Open(rtgen::fuzz::ModelPath());
    if (!file.ok()) Die("open", file.status());
    absl::StatusOr<std::unique_ptr<rtgen::Tokenizer>> tokenizer =
        rtgen::LoadTokenizerFromGguf(**file);
    if (!tokenizer.ok()) Die("tokenizer", tokenizer.status());
    m->tokenizer = *std::move(tokenizer);
    absl::StatusOr<std::string> jinja = (*file)->GetString("tokenizer.chat_template");
    if (!jinja.ok()) Die("chat template", jinja.status());
    std::string bos;
    if (m->tokenizer->bos_id()) bos = m->tokenizer->TokenBytes(*m->tokenizer->bos_id());
    absl::StatusOr<rtgen::ChatTemplate> chat = rtgen::ChatTemplate::FromJinja(*jinja, bos);
    if (!chat.ok()) Die("chat template", chat.status());
    m->chat_template = *std::move(chat);
    m->limits.tokenizer = m->tokenizer.get();
    m->limits.chat_template = &*m->chat_template;
    m->limits.max_model_len = 2048;
    return m;
  }();
  return *model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Model& model = SmolModel();
  rtgen::v1::GenerateRequest request;
  grpc::Slice slice(data, size);
  if (!rtgen::ParseAllowingInvalidUtf8(grpc::ByteBuffer(&slice, 1), request).ok()) return 0;
  absl::StatusOr<rtgen::Request> engine_request = rtgen::ToEngineRequest(request, model.limits);
  if (!engine_request.ok()) {
    if (engine_request.status().message().empty()) Die("error without a message", {});
    return 0;
  }
  // An accepted request fits the context and uses only ids of the vocabulary.
  const std::vector<int32_t>& prompt = engine_request->prompt_tokens;
  if (prompt.empty() || static_cast<int32_t>(prompt.size()) > model.limits.max_model_len) {
    Die("accepted prompt length out of range", absl::OkStatus());
  }
  for (int32_t id : prompt) {
    if (id < 0 || id >= model.tokenizer->vocab_size()) Die("accepted id out of range", {});
  }
  // Every text an accepted request carries is valid UTF-8.
  bool valid = !rtgen::FindInvalidUtf8(request.prompt()).has_value() &&
               !rtgen::FindInvalidUtf8(request.request_id()).has_value();
  for (const auto& m : request.messages().messages()) {
    valid = valid && !rtgen::FindInvalidUtf8(m.content()).has_value();
  }
  for (const std::string& stop : request.stopping().stop()) {
    valid = valid && !rtgen::FindInvalidUtf8(stop).has_value();
  }
  if (!valid) Die("accepted invalid UTF-8", {});
  return 0;
}
