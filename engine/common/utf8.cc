#include "engine/common/utf8.h"

#include <cstdint>

namespace rtgen {

int Utf8SequenceAt(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return 1;
  int len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return -1;
  }
  for (int i = 1; i < len; ++i) {
    if (pos + i >= s.size()) return 0;
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -1;
  }
  return len;
}

std::optional<size_t> FindInvalidUtf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    const int len = Utf8SequenceAt(s, pos);
    if (len <= 0) return pos;
    pos += len;
  }
  return std::nullopt;
}

char32_t NextCodepoint(std::string_view s, size_t* pos) {
  const auto b0 = static_cast<uint8_t>(s[*pos]);
  int len = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  char32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int i = 1; i < len && *pos + i < s.size(); ++i) {
    cp = (cp << 6) | (static_cast<uint8_t>(s[*pos + i]) & 0x3F);
  }
  *pos += len;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Bytes of the maximal valid prefix of the ill-formed sequence at s[pos] (at least 1).
size_t InvalidSubpartLength(std::string_view s, size_t pos) {
  for (size_t n = 1; n < 4 && pos + n < s.size(); ++n) {
    // The first n+1 bytes still form a valid prefix when parsing them alone says "incomplete".
    if (Utf8SequenceAt(s.substr(0, pos + n + 1), pos) != 0) return n;
  }
  return 1;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string TakeValidUtf8(std::string* pending, bool flush) {
  std::string out;
  const std::string_view s = *pending;
  size_t pos = 0;
  while (pos < s.size()) {
    const int len = Utf8SequenceAt(s, pos);
    if (len > 0) {
      out.append(s.substr(pos, len));
      pos += len;
    } else if (len == 0 && !flush) {
      break;  // incomplete: wait for more bytes
    } else if (len == 0) {
      out.append(kReplacement);
      pos = s.size();
    } else {
      out.append(kReplacement);
      pos += InvalidSubpartLength(s, pos);
    }
  }
  pending->erase(0, pos);
  return out;
}

}  // namespace rtgen
