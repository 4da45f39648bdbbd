#include "engine/tokenizer/spm_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/tokenizer/bpe_merge.h"
#include "engine/common/utf8.h"

namespace rtgen {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 "▁"

// "<0x41>" → 0x41: exactly two upper-case hex digits, as SentencePiece writes byte pieces
// ("<0x+A>" or "<0x-1>" are ordinary pieces, not bytes).
std::optional<unsigned char> ParseBytePiece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int high = digit(piece[3]), low = digit(piece[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<unsigned char>(high * 16 + low);
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t hit = s.find(from, pos);
    out.append(s.substr(pos, hit - pos));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    pos = hit + from.size();
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSpmTokenizer(VocabSpec spec) {
  auto tok = SpmTokenizer::Create(spec);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

absl::StatusOr<std::unique_ptr<SpmTokenizer>> SpmTokenizer::Create(const VocabSpec& spec) {
  std::unique_ptr<SpmTokenizer> tok(new SpmTokenizer());
  if (auto s = tok->Init(spec); !s.ok()) return s;
  if (spec.scores.empty() && spec.merges.empty()) {
    return absl::InvalidArgumentError("SentencePiece vocabulary has neither scores nor merges");
  }
  tok->add_space_prefix_ = spec.add_space_prefix;
  tok->space_prefix_first_only_ = spec.space_prefix_first_only;
  tok->metaspace_ = spec.metaspace;
  tok->metaspace_split_ = spec.metaspace_split;
  tok->scores_ = spec.scores;
  tok->unk_id_ = spec.unk_id;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    tok->merge_rank_.emplace(absl::StrCat(spec.merges[rank].first, " ", spec.merges[rank].second),
                             static_cast<int32_t>(rank));
  }
  std::fill(std::begin(tok->byte_id_), std::end(tok->byte_id_), -1);
  tok->token_bytes_.resize(spec.pieces.size());
  for (size_t id = 0; id < spec.pieces.size(); ++id) {
    const std::string& piece = spec.pieces[id];
    auto byte = ParseBytePiece(piece);
    if (byte && (tok->types_[id] == TokenType::kByte || tok->types_[id] == TokenType::kNormal)) {
      if (tok->byte_id_[*byte] < 0) tok->byte_id_[*byte] = static_cast<int32_t>(id);
      tok->token_bytes_[id] = std::string(1, static_cast<char>(*byte));
    } else if (tok->special_[id]) {
      tok->token_bytes_[id] = piece;
    } else {
      tok->token_bytes_[id] = ReplaceAll(piece, kSpaceMark, " ");
    }
  }
  return tok;
}

absl::StatusOr<std::vector<int32_t>> SpmTokenizer::Encode(std::string_view text,
                                                          bool parse_special) const {
  if (auto s = CheckUtf8(text); !s.ok()) return s;
  std::vector<int32_t> ids;
  bool first = true;
  for (const Segment& seg : SplitSpecial(text, parse_special)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else {
      const std::string replaced = ReplaceAll(seg.text, " ", kSpaceMark);
      const bool prefix = add_space_prefix_ && (first || !space_prefix_first_only_) &&
                          !(metaspace_ && replaced.starts_with(kSpaceMark));
      const std::string normalized = (prefix ? std::string(kSpaceMark) : "") + replaced;
      if (!metaspace_split_) {
        EncodeSegment(normalized, &ids);
      } else {  // pieces cut before every "▁" (Hugging Face: MergedWithNext)
        const std::string_view mark(kSpaceMark);
        size_t start = 0;
        for (size_t at = normalized.find(mark, 1); at != std::string::npos;
             at = normalized.find(mark, at + mark.size())) {
          if (at > start) EncodeSegment(normalized.substr(start, at - start), &ids);
          start = at;
        }
        if (start < normalized.size()) EncodeSegment(normalized.substr(start), &ids);
      }
    }
    first = false;
  }
  return ids;
}

void SpmTokenizer::EncodeSegment(const std::string& normalized, std::vector<int32_t>* out) const {
  // Symbols are interned strings local to this call: a character need not be a token.
  std::vector<std::string> strings;
  std::unordered_map<std::string, int32_t> interned;
  auto intern = [&](std::string s) {
    auto [it, inserted] = interned.emplace(s, static_cast<int32_t>(strings.size()));
    if (inserted) strings.push_back(std::move(s));
    return it->second;
  };
  std::vector<int32_t> symbols;
  size_t pos = 0;
  while (pos < normalized.size()) {
    const size_t start = pos;
    NextCodepoint(normalized, &pos);
    symbols.push_back(intern(normalized.substr(start, pos - start)));
  }
  const std::vector<int32_t> merged = ApplyMerges(symbols, [&](int32_t l, int32_t r) {
    std::optional<MergeResult> result;
    std::string joined = strings[l] + strings[r];
    auto id = Find(joined);
    if (!id) return result;
    if (merge_rank_.empty()) {
      result = MergeResult{-static_cast<double>(scores_[*id]), intern(std::move(joined))};
    } else if (auto it = merge_rank_.find(absl::StrCat(strings[l], " ", strings[r]));
               it != merge_rank_.end()) {
      result = MergeResult{static_cast<double>(it->second), intern(std::move(joined))};
    }
    return result;
  });
  for (int32_t symbol : merged) {
    if (auto id = Find(strings[symbol])) {
      out->push_back(*id);
      continue;
    }
    for (char c : strings[symbol]) {  // byte fallback
      const int32_t byte_id = byte_id_[static_cast<unsigned char>(c)];
      if (byte_id >= 0) {
        out->push_back(byte_id);
      } else if (unk_id_) {
        out->push_back(*unk_id_);
        break;
      }
    }
  }
}

std::string SpmTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return "";
  return token_bytes_[id];
}

}  // namespace rtgen
