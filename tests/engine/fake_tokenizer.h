#pragma once
// A tiny deterministic tokenizer for engine tests: id 0 is "<eos>" (special, the EOS/stop id),
// ids 1..255 are single raw bytes, ids 256+ are the multi-byte pieces listed in kExtraPieces.

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace rtgen::testing {

inline constexpr std::array<std::string_view, 4> kExtraPieces = {"ST", "OP", "<|im_end|>", "hello"};
inline constexpr int32_t kFakeEos = 0;
inline constexpr int32_t kFakeImEnd = 258;  // a second stop id (end of turn)

class FakeTokenizer : public Tokenizer {
 public:
  FakeTokenizer() {
    vocab_size_ = 256 + static_cast<int32_t>(kExtraPieces.size());
    eos_id_ = kFakeEos;
    stop_ids_ = {kFakeEos, kFakeImEnd};
    pieces_.resize(static_cast<size_t>(vocab_size_));
    special_.assign(static_cast<size_t>(vocab_size_), false);
    pieces_[0] = "<eos>";
    special_[0] = true;
    for (int32_t i = 1; i < 256; ++i) pieces_[static_cast<size_t>(i)] = std::string(1, static_cast<char>(i));
    for (size_t i = 0; i < kExtraPieces.size(); ++i) pieces_[256 + i] = std::string(kExtraPieces[i]);
    special_[kFakeImEnd] = true;
    skipped_special_ = special_;
  }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }

  std::string TokenBytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size_) return "";
    return pieces_[static_cast<size_t>(id)];
  }
};

}  // namespace rtgen::testing
