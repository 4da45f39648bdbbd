#include "engine/tokenizer/byte_unicode.h"

#include <array>

#include "engine/common/utf8.h"

namespace rtgen {
namespace {

bool Printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

const std::array<char32_t, 256>& Table() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = Printable(b) ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table;
}

}  // namespace

char32_t ByteToCodepoint(unsigned char byte) { return Table()[byte]; }

std::optional<unsigned char> CodepointToByte(char32_t cp) {
  if (cp < 256 && Printable(static_cast<int>(cp))) return static_cast<unsigned char>(cp);
  if (cp >= 256 && cp < 256 + 68) {
    int index = static_cast<int>(cp - 256);  // index-th non-printable byte
    for (int b = 0; b < 256; ++b) {
      if (!Printable(b) && index-- == 0) return static_cast<unsigned char>(b);
    }
  }
  return std::nullopt;
}

std::string BytesToPiece(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(ByteToCodepoint(static_cast<unsigned char>(c)), &out);
  return out;
}

std::string PieceToBytes(std::string_view piece) {
  std::string out;
  size_t pos = 0;
  while (pos < piece.size()) {
    const size_t start = pos;
    if (Utf8SequenceAt(piece, pos) <= 0) {  // not UTF-8: keep the byte
      out.push_back(piece[pos++]);
      continue;
    }
    const char32_t cp = NextCodepoint(piece, &pos);
    if (auto b = CodepointToByte(cp)) {
      out.push_back(static_cast<char>(*b));
    } else {
      out.append(piece.substr(start, pos - start));
    }
  }
  return out;
}

}  // namespace rtgen
