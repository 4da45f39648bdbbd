#pragma once
// Tokenizers: byte-level BPE (GPT-2 style: SmolLM2, Llama 3) and SentencePiece-style BPE
// (Llama 2), loaded from GGUF metadata or a Hugging Face `tokenizer.json`.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rtgen {

class GgufFile;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text → ids. Never adds BOS (callers ask AddBos()). With parse_special, the text of a
  // special/control token (e.g. "<|im_start|>") becomes that token's id; otherwise it is
  // tokenized as plain text. INVALID_ARGUMENT when `text` is not valid UTF-8.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                                      bool parse_special) const = 0;
  // Encode for a caller that refuses text of more than `limit` tokens: where the text has more,
  // the first limit + 1 ids (how many more is not known). The byte-level BPE stops merging
  // within a pre-token of the limit (the text is still checked and split whole); others encode
  // the whole text first.
  virtual absl::StatusOr<std::vector<int32_t>> EncodeAtMost(std::string_view text,
                                                            bool parse_special,
                                                            size_t limit) const;
  // The raw bytes one token stands for (may be an incomplete UTF-8 sequence). Special tokens
  // give their text. Out-of-range ids give "".
  virtual std::string TokenBytes(int32_t id) const = 0;
  // Whole-sequence decode (as Hugging Face decode with skip_special_tokens=false).
  virtual std::string Decode(std::span<const int32_t> ids) const;
  // SentencePiece decoders drop the space that "▁" puts before the first token.
  virtual bool StripsLeadingSpace() const { return false; }

  int32_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  bool add_bos() const { return add_bos_; }
  // Token ids that end generation (EOS and end-of-turn tokens such as <|im_end|>, <|eot_id|>).
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  bool IsSpecial(int32_t id) const;
  // Whether skip_special_tokens leaves the token's text out: control tokens and the unknown
  // token, Hugging Face's special tokens; user-defined ones (a model's "<think>", say) are text.
  bool IsSkippedSpecial(int32_t id) const;
  // Adds stop ids a model's files name beside the tokenizer (generation_config.json's
  // eos_token_id list); INVALID_ARGUMENT naming an id outside the vocabulary.
  absl::Status AddStopIds(std::span<const int32_t> ids);
  std::optional<int32_t> TokenId(std::string_view piece) const;

 protected:
  int32_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
  bool add_bos_ = false;
  std::vector<int32_t> stop_ids_;
  std::vector<std::string> pieces_;   // id → piece as stored in the vocab
  std::vector<bool> special_;         // id → control/user-defined token
  std::vector<bool> skipped_special_;  // id → control or unknown token (IsSkippedSpecial)
};

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& file);
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromJson(const std::string& path);

// Turns a stream of token ids into text that never ends inside a UTF-8 sequence: bytes of an
// incomplete character are held back until the character completes. Invalid byte sequences
// that can never complete are emitted as U+FFFD.
class IncrementalDetokenizer {
 public:
  // `context`: the tokens before those pushed (a request's prompt). `skip_special`: tokens that
  // IsSkippedSpecial give no text (Hugging Face's skip_special_tokens), the bytes around them
  // joined as if they were not there. A SentencePiece decoder drops the space "▁" puts before
  // the text's first token; only a stream that starts the text (no context token with text in
  // this mode) loses it, as Hugging Face decodes prompt and output together (vLLM's incremental
  // decode): "is" + "▁Paris" streams " Paris", and so does "<s>" + "▁Paris" where special
  // tokens are kept.
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer,
                                  std::span<const int32_t> context = {},
                                  bool skip_special = true);
  std::string Push(int32_t id);  // complete text made available by this token (may be "")
  std::string Flush();           // whatever is still held back, made valid
 private:
  std::string Text(int32_t id) const;  // the token's bytes, "" where skipped

  const Tokenizer* tokenizer_;
  std::string pending_;  // bytes of an incomplete UTF-8 character
  bool first_ = true;    // no text before the next token: neither in the context nor pushed
  bool skip_special_ = false;
};

}  // namespace rtgen
