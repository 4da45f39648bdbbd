#pragma once
// Helpers shared by the engine tests: building sequences and recording stream chunks.

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/sequence.h"
#include "tests/engine/fake_tokenizer.h"

namespace rtgen::testing {

inline std::vector<int32_t> Range(int32_t begin, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

inline Request MakeRequest(const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.id = id;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stopping.max_tokens = max_tokens;
  r.stopping.ignore_eos = true;
  return r;
}

// Everything a request streamed.
struct Recorded {
  std::vector<StreamChunk> chunks;
  int finals = 0;
  std::vector<int32_t> tokens() const {
    std::vector<int32_t> out;
    for (const auto& c : chunks) out.insert(out.end(), c.token_ids.begin(), c.token_ids.end());
    return out;
  }
  std::string text() const {
    std::string out;
    for (const auto& c : chunks) out += c.text;
    return out;
  }
  const StreamChunk& last() const { return chunks.back(); }
};

inline StreamSink RecordTo(Recorded* rec) {
  return [rec](StreamChunk c) {
    if (c.finish != FinishReason::kNone) ++rec->finals;
    rec->chunks.push_back(std::move(c));
  };
}

inline std::unique_ptr<Sequence> MakeSeq(const Tokenizer* tok, Request r, Recorded* rec,
                                         int64_t order = 0) {
  return std::make_unique<Sequence>(std::move(r), rec ? RecordTo(rec) : StreamSink([](StreamChunk) {}),
                                    tok, /*seed=*/7, order);
}

}  // namespace rtgen::testing
