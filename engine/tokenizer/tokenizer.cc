#include "engine/tokenizer/tokenizer.h"

#include "engine/common/utf8.h"

namespace rtgen {

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += TokenBytes(id);
  if (StripsLeadingSpace() && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view piece) const {
  for (size_t id = 0; id < pieces_.size(); ++id) {
    if (pieces_[id] == piece) return static_cast<int32_t>(id);
  }
  return std::nullopt;
}

std::string IncrementalDetokenizer::Push(int32_t id) {
  std::string bytes = tokenizer_->TokenBytes(id);
  if (first_ && tokenizer_->StripsLeadingSpace() && !bytes.empty() && bytes[0] == ' ') {
    bytes.erase(0, 1);
  }
  if (!bytes.empty()) first_ = false;
  pending_ += bytes;
  return TakeValidUtf8(&pending_, /*flush=*/false);
}

std::string IncrementalDetokenizer::Flush() { return TakeValidUtf8(&pending_, /*flush=*/true); }

}  // namespace rtgen
