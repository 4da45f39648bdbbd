#pragma once
// Internal: what both BPE tokenizers are built from (a vocabulary as GGUF or tokenizer.json
// describe it) and the parts they share: id lookups and special-token splitting.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace rtgen {

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

struct VocabSpec {
  std::vector<std::string> pieces;  // id → piece as stored (byte-level chars or "▁" pieces)
  std::vector<TokenType> types;     // empty = all kNormal
  std::vector<float> scores;        // SentencePiece merge scores (higher merges first)
  std::vector<std::pair<std::string, std::string>> merges;  // by rank, best first
  std::optional<int32_t> bos_id, eos_id, unk_id;
  bool add_bos = false;
  bool add_space_prefix = true;  // SentencePiece: "▁" before text segments
  bool space_prefix_first_only = false;  // only before the first segment (Metaspace "first")
  // Hugging Face's Metaspace pre-tokenizer (not sentencepiece's Prepend normalizer): the "▁" is
  // put before a segment only where it does not start with one already, and with split the
  // segment is cut before every "▁" (each piece merged on its own).
  bool metaspace = false;
  bool metaspace_split = false;
  PreTokenizerKind pre = PreTokenizerKind::kGpt2;
  bool ignore_merges = false;  // byte-level: a pre-token that is itself a token is kept whole
};

// Byte-level BPE (GPT-2 style). Input bytes whose byte symbol is not in `pieces` are dropped
// (as Hugging Face does when there is no unk token).
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateByteLevelBpeTokenizer(VocabSpec spec);
// SentencePiece-style BPE: merges by `scores`, or by `merges` rank when given.
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSpmTokenizer(VocabSpec spec);

class VocabTokenizer : public Tokenizer {
 protected:
  // Validates the spec's ids and sizes (INVALID_ARGUMENT naming the field) and fills the
  // Tokenizer fields.
  absl::Status Init(const VocabSpec& spec);

  struct Segment {
    std::string_view text;  // plain text when id < 0
    int32_t id = -1;        // a special token matched in the input
  };
  // Control tokens are matched only with parse_special; user-defined tokens always. The
  // longest token starting at the leftmost position wins.
  std::vector<Segment> SplitSpecial(std::string_view text, bool parse_special) const;

  std::optional<int32_t> Find(std::string_view piece) const;
  static absl::Status CheckUtf8(std::string_view text);

  std::unordered_map<std::string, int32_t> piece_to_id_;
  std::vector<TokenType> types_;

 private:
  // The special tokens' pieces as a byte trie (node 0 the root), so a position of the input costs
  // at most the longest piece's bytes whatever the count of special tokens. Llama-3 has 256, all
  // starting "<|": scanning each of them at every '<', a 4 MB prompt of "<|" took 1.86 s to
  // encode against 0.43 s by the trie (this 2-core machine, a vocabulary with 256 such pieces).
  struct TrieNode {
    std::vector<std::pair<unsigned char, int32_t>> children;  // (byte, node), sorted by byte
    int32_t any_id = -1;          // the lowest id whose piece ends here
    int32_t non_control_id = -1;  // the lowest such id that is not a control token
  };
  void AddSpecialPiece(const std::string& piece, int32_t id, bool control);
  int32_t ChildOf(int32_t node, unsigned char byte) const;  // -1 when it has none
  // The id and length of the longest special piece at the start of `text` (control pieces only
  // with parse_special; the lowest id among duplicates); id -1 when none.
  std::pair<int32_t, size_t> MatchSpecial(std::string_view text, bool parse_special) const;
  std::vector<TrieNode> special_trie_ = std::vector<TrieNode>(1);
};

}  // namespace rtgen
