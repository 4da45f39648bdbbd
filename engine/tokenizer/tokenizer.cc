#include "engine/tokenizer/tokenizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/utf8.h"

namespace rtgen {

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += TokenBytes(id);
  if (StripsLeadingSpace() && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeAtMost(std::string_view text,
                                                             bool parse_special,
                                                             size_t limit) const {
  absl::StatusOr<std::vector<int32_t>> ids = Encode(text, parse_special);
  if (ids.ok() && ids->size() > limit) ids->resize(limit + 1);
  return ids;
}

absl::Status Tokenizer::AddStopIds(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("stop token id ", id,
                                                     " is outside the vocabulary of ",
                                                     vocab_size_, " tokens"));
    }
  }
  for (int32_t id : ids) {
    if (std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end()) {
      stop_ids_.push_back(id);
    }
  }
  return absl::OkStatus();
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

bool Tokenizer::IsSkippedSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < skipped_special_.size() && skipped_special_[id];
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view piece) const {
  for (size_t id = 0; id < pieces_.size(); ++id) {
    if (pieces_[id] == piece) return static_cast<int32_t>(id);
  }
  return std::nullopt;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer,
                                               std::span<const int32_t> context,
                                               bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {
  first_ = std::all_of(context.begin(), context.end(),
                       [this](int32_t id) { return Text(id).empty(); });
}

std::string IncrementalDetokenizer::Text(int32_t id) const {
  return skip_special_ && tokenizer_->IsSkippedSpecial(id) ? "" : tokenizer_->TokenBytes(id);
}

std::string IncrementalDetokenizer::Push(int32_t id) {
  std::string bytes = Text(id);
  // Whether this token starts the text is decided before its space is dropped: a bare "▁" is
  // the text's first token, and the "▁Hello" after it keeps its space (Decode's " Hello").
  const bool starts_text = first_ && !bytes.empty();
  if (!bytes.empty()) first_ = false;
  if (starts_text && tokenizer_->StripsLeadingSpace() && bytes[0] == ' ') bytes.erase(0, 1);
  pending_ += bytes;
  return TakeValidUtf8(&pending_, /*flush=*/false);
}

std::string IncrementalDetokenizer::Flush() { return TakeValidUtf8(&pending_, /*flush=*/true); }

}  // namespace rtgen
