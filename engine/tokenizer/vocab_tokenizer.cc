#include "engine/tokenizer/vocab_tokenizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/utf8.h"

namespace rtgen {
namespace {

constexpr std::string_view kStopPieces[] = {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>",
                                            "<|endoftext|>", "<|eom_id|>"};

absl::Status CheckId(const std::optional<int32_t>& id, size_t n, const char* field) {
  if (id && (*id < 0 || static_cast<size_t>(*id) >= n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", *id, " is outside the vocabulary of ", n, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VocabTokenizer::Init(const VocabSpec& spec) {
  const size_t n = spec.pieces.size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer vocabulary is empty");
  if (!spec.types.empty() && spec.types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_type has ", spec.types.size(), " entries, tokens has ", n));
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("scores has ", spec.scores.size(), " entries, tokens has ", n));
  }
  if (spec.add_bos && !spec.bos_id.has_value()) {
    // Prompts would go out without their BOS (GGUF's llama tokenizer adds one by default).
    return absl::InvalidArgumentError(
        "add_bos_token is true but the tokenizer names no BOS token (tokenizer_config.json's "
        "bos_token, GGUF's tokenizer.ggml.bos_token_id)");
  }
  if (auto s = CheckId(spec.bos_id, n, "bos_token_id"); !s.ok()) return s;
  if (auto s = CheckId(spec.eos_id, n, "eos_token_id"); !s.ok()) return s;
  if (auto s = CheckId(spec.unk_id, n, "unknown_token_id"); !s.ok()) return s;

  vocab_size_ = static_cast<int32_t>(n);
  pieces_ = spec.pieces;
  types_ = spec.types.empty() ? std::vector<TokenType>(n, TokenType::kNormal) : spec.types;
  bos_id_ = spec.bos_id;
  eos_id_ = spec.eos_id;
  add_bos_ = spec.add_bos;
  special_.assign(n, false);
  skipped_special_.assign(n, false);
  piece_to_id_.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    piece_to_id_.emplace(pieces_[id], static_cast<int32_t>(id));  // first id wins on duplicates
    const bool control = types_[id] == TokenType::kControl;
    skipped_special_[id] = control || types_[id] == TokenType::kUnknown;
    if (control || types_[id] == TokenType::kUserDefined) {
      special_[id] = true;
      if (!pieces_[id].empty()) AddSpecialPiece(pieces_[id], static_cast<int32_t>(id), control);
    } else if (types_[id] == TokenType::kUnknown && !pieces_[id].empty()) {
      // "<unk>" in text is the unknown token where special tokens are parsed, as llama.cpp reads
      // a GGUF's UNKNOWN-type token and a tokenizer.json's added <unk> is read here.
      AddSpecialPiece(pieces_[id], static_cast<int32_t>(id), /*control=*/true);
    }
  }
  // A merge naming a piece that is no token (merges written in another byte alphabet, a
  // vocabulary cut short) is refused, as Hugging Face refuses it: skipped, every such merge would
  // leave text encoded a byte a token without a word.
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    for (const std::string& piece : {left, right, left + right}) {
      if (piece_to_id_.count(piece) == 0) {
        return absl::InvalidArgumentError(absl::StrCat("merges[", rank, "] \"", left, " ", right,
                                                       "\": \"", piece, "\" is not a token"));
      }
    }
  }
  stop_ids_.clear();
  if (eos_id_) stop_ids_.push_back(*eos_id_);
  for (std::string_view piece : kStopPieces) {
    auto id = Find(piece);
    if (id && std::find(stop_ids_.begin(), stop_ids_.end(), *id) == stop_ids_.end()) {
      stop_ids_.push_back(*id);
    }
  }
  return absl::OkStatus();
}

int32_t VocabTokenizer::ChildOf(int32_t node, unsigned char byte) const {
  const auto& children = special_trie_[node].children;
  const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, -1));
  return it != children.end() && it->first == byte ? it->second : -1;
}

void VocabTokenizer::AddSpecialPiece(const std::string& piece, int32_t id, bool control) {
  int32_t node = 0;
  for (const char c : piece) {
    const unsigned char byte = static_cast<unsigned char>(c);
    int32_t next = ChildOf(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(special_trie_.size());
      special_trie_.emplace_back();  // before taking a reference into the vector
      auto& children = special_trie_[node].children;
      children.insert(std::lower_bound(children.begin(), children.end(), std::make_pair(byte, -1)),
                      {byte, next});
    }
    node = next;
  }
  // Ids arrive in ascending order: the first one a node sees is its lowest.
  TrieNode& end = special_trie_[node];
  if (end.any_id < 0) end.any_id = id;
  if (!control && end.non_control_id < 0) end.non_control_id = id;
}

std::pair<int32_t, size_t> VocabTokenizer::MatchSpecial(std::string_view text,
                                                        bool parse_special) const {
  std::pair<int32_t, size_t> best = {-1, 0};
  int32_t node = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    node = ChildOf(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    const TrieNode& n = special_trie_[node];
    const int32_t id = parse_special ? n.any_id : n.non_control_id;
    if (id >= 0) best = {id, i + 1};
  }
  return best;
}

std::vector<VocabTokenizer::Segment> VocabTokenizer::SplitSpecial(std::string_view text,
                                                                  bool parse_special) const {
  std::vector<Segment> out;
  size_t plain_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const auto [id, length] = MatchSpecial(text.substr(pos), parse_special);
    if (id < 0) {
      ++pos;
      continue;
    }
    if (plain_start < pos) out.push_back({text.substr(plain_start, pos - plain_start), -1});
    out.push_back({text.substr(pos, length), id});
    pos += length;
    plain_start = pos;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
  return out;
}

std::optional<int32_t> VocabTokenizer::Find(std::string_view piece) const {
  auto it = piece_to_id_.find(std::string(piece));
  if (it == piece_to_id_.end()) return std::nullopt;
  return it->second;
}

absl::Status VocabTokenizer::CheckUtf8(std::string_view text) {
  if (auto bad = FindInvalidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte ", *bad));
  }
  return absl::OkStatus();
}

}  // namespace rtgen
