#pragma once
// Internal: SentencePiece-style BPE (Llama 2). Spaces become "▁", text segments get a "▁"
// prefix (add_space_prefix), characters merge pairwise by piece score (or merge rank), and
// characters outside the vocabulary fall back to <0xXX> byte tokens.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/vocab_tokenizer.h"

namespace rtgen {

class SpmTokenizer : public VocabTokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<SpmTokenizer>> Create(const VocabSpec& spec);

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool parse_special) const override;
  std::string TokenBytes(int32_t id) const override;
  bool StripsLeadingSpace() const override { return add_space_prefix_; }

 private:
  SpmTokenizer() = default;
  void EncodeSegment(const std::string& normalized, std::vector<int32_t>* out) const;

  bool add_space_prefix_ = true;
  bool space_prefix_first_only_ = false;
  bool metaspace_ = false;        // VocabSpec::metaspace
  bool metaspace_split_ = false;  // VocabSpec::metaspace_split
  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" → rank; empty = scores
  int32_t byte_id_[256];                                 // <0xXX> token, or -1
  std::optional<int32_t> unk_id_;
  std::vector<std::string> token_bytes_;  // id → raw bytes
};

}  // namespace rtgen
