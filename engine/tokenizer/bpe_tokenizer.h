#pragma once
// Internal: byte-level BPE (GPT-2 style) as SmolLM2 and Llama 3 use it. Text is split by the
// pre-tokenizer, each piece's bytes become GPT-2 byte characters, and merges apply by rank.

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/vocab_tokenizer.h"

namespace rtgen {

class ByteLevelBpeTokenizer : public VocabTokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> Create(const VocabSpec& spec);

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool parse_special) const override;
  absl::StatusOr<std::vector<int32_t>> EncodeAtMost(std::string_view text, bool parse_special,
                                                    size_t limit) const override;
  std::string TokenBytes(int32_t id) const override;

  // Pre-tokens whose ids are cached (at most kMaxCacheEntries, each at most kMaxCachedWordBytes
  // long: the cache's memory is bounded whatever the input).
  size_t cached_words() const;

 private:
  ByteLevelBpeTokenizer() = default;
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  PreTokenizerKind pre_ = PreTokenizerKind::kGpt2;
  bool ignore_merges_ = false;
  int32_t byte_to_id_[256] = {};  // -1: the vocabulary has no token for this byte
  std::vector<std::string> token_bytes_;  // id → raw bytes
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) → merge

  static constexpr size_t kMaxCacheEntries = 1 << 16;
  // Longer pre-tokens are encoded every time: a client's megabyte-long run of letters would
  // otherwise keep its bytes and ids (~5 bytes an input byte) until the cache is next cleared.
  static constexpr size_t kMaxCachedWordBytes = 64;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // word bytes → ids
};

}  // namespace rtgen
