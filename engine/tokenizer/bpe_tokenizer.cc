#include "engine/tokenizer/bpe_tokenizer.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/bpe_merge.h"
#include "engine/tokenizer/byte_unicode.h"

namespace rtgen {
namespace {

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateByteLevelBpeTokenizer(VocabSpec spec) {
  auto tok = ByteLevelBpeTokenizer::Create(spec);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> ByteLevelBpeTokenizer::Create(
    const VocabSpec& spec) {
  std::unique_ptr<ByteLevelBpeTokenizer> tok(new ByteLevelBpeTokenizer());
  if (auto s = tok->Init(spec); !s.ok()) return s;
  tok->pre_ = spec.pre;
  tok->ignore_merges_ = spec.ignore_merges;
  for (int b = 0; b < 256; ++b) {
    auto id = tok->Find(BytesToPiece(std::string(1, static_cast<char>(b))));
    tok->byte_to_id_[b] = id.value_or(-1);
  }
  tok->token_bytes_.resize(spec.pieces.size());
  for (size_t id = 0; id < spec.pieces.size(); ++id) {
    tok->token_bytes_[id] = tok->special_[id] ? spec.pieces[id] : PieceToBytes(spec.pieces[id]);
  }
  tok->merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    auto l = tok->Find(left), r = tok->Find(right), m = tok->Find(left + right);
    if (!l || !r || !m) continue;  // unreachable: Init refused merges of unknown pieces
    tok->merges_.emplace(PairKey(*l, *r), Merge{static_cast<int32_t>(rank), *m});
  }
  return tok;
}

absl::StatusOr<std::vector<int32_t>> ByteLevelBpeTokenizer::Encode(std::string_view text,
                                                                   bool parse_special) const {
  return EncodeAtMost(text, parse_special, std::numeric_limits<size_t>::max() - 1);
}

absl::StatusOr<std::vector<int32_t>> ByteLevelBpeTokenizer::EncodeAtMost(std::string_view text,
                                                                         bool parse_special,
                                                                         size_t limit) const {
  if (auto s = CheckUtf8(text); !s.ok()) return s;
  std::vector<int32_t> ids;
  for (const Segment& seg : SplitSpecial(text, parse_special)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else {
      for (std::string_view word : PreTokenize(pre_, seg.text)) {
        EncodeWord(word, &ids);
        if (ids.size() > limit) break;
      }
    }
    if (ids.size() > limit) {
      ids.resize(limit + 1);
      break;
    }
  }
  return ids;
}

void ByteLevelBpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  const std::string key(cacheable ? word : std::string_view());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  if (ignore_merges_) {
    if (auto id = Find(BytesToPiece(word))) {
      out->push_back(*id);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  for (char c : word) {
    const int32_t id = byte_to_id_[static_cast<unsigned char>(c)];
    if (id >= 0) symbols.push_back(id);  // bytes without a token are dropped, as HF does
  }
  std::vector<int32_t> ids = ApplyMerges(symbols, [this](int32_t l, int32_t r) {
    std::optional<MergeResult> result;
    if (auto it = merges_.find(PairKey(l, r)); it != merges_.end()) {
      result = MergeResult{static_cast<double>(it->second.rank), it->second.merged};
    }
    return result;
  });
  out->insert(out->end(), ids.begin(), ids.end());
  if (!cacheable) return;
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(key, std::move(ids));
}

size_t ByteLevelBpeTokenizer::cached_words() const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return cache_.size();
}

std::string ByteLevelBpeTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return "";
  return token_bytes_[id];
}

}  // namespace rtgen
