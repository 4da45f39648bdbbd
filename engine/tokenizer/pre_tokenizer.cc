#include "engine/tokenizer/pre_tokenizer.h"

#include <cstddef>
#include <cstdint>

#include "engine/tokenizer/unicode_category.h"
#include "engine/common/utf8.h"

namespace rtgen {
namespace {

enum class Class : unsigned char { kLetter, kNumber, kSpace, kOther };

// The text as code points with their byte offsets; offset[n] == text.size().
struct Codepoints {
  std::vector<char32_t> cp;
  std::vector<Class> cls;
  std::vector<size_t> offset;
  size_t size() const { return cp.size(); }
};

Codepoints Decode(std::string_view text) {
  Codepoints c;
  size_t pos = 0;
  while (pos < text.size()) {
    c.offset.push_back(pos);
    const char32_t cp = NextCodepoint(text, &pos);
    c.cp.push_back(cp);
    c.cls.push_back(IsLetter(cp)       ? Class::kLetter
                    : IsNumber(cp)     ? Class::kNumber
                    : IsWhitespace(cp) ? Class::kSpace
                                       : Class::kOther);
  }
  c.offset.push_back(text.size());
  return c;
}

char32_t Lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// Length (in code points) of a contraction 's 't 're 've 'm 'll 'd at i, or 0.
size_t Contraction(const Codepoints& c, size_t i, bool ignore_case) {
  if (c.cp[i] != '\'' || i + 1 >= c.size()) return 0;
  auto at = [&](size_t k) { return ignore_case ? Lower(c.cp[k]) : c.cp[k]; };
  const char32_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= c.size()) return 0;
  const char32_t b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// Code points of class `cls` from i on, at most `most`.
size_t RunOf(const Codepoints& c, size_t i, Class cls, size_t most = SIZE_MAX) {
  size_t j = i;
  while (j < c.size() && j - i < most && c.cls[j] == cls) ++j;
  return j - i;
}

// \s+(?!\S)|\s+ at a whitespace character i.
size_t TrailingSpace(const Codepoints& c, size_t i) {
  const size_t run = RunOf(c, i, Class::kSpace);
  if (i + run == c.size() || run == 1) return run;
  return run - 1;  // leave the last space to prefix the next piece
}

size_t Gpt2Match(const Codepoints& c, size_t i) {
  if (size_t n = Contraction(c, i, /*ignore_case=*/false)) return n;
  const bool space = c.cp[i] == ' ';
  const size_t start = space && i + 1 < c.size() && c.cls[i + 1] != Class::kSpace ? i + 1 : i;
  if (c.cls[start] != Class::kSpace) {
    return start - i +
           RunOf(c, start, c.cls[start]);  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
  }
  return TrailingSpace(c, i);
}

bool IsCrLf(char32_t cp) { return cp == '\r' || cp == '\n'; }

size_t Llama3Match(const Codepoints& c, size_t i) {
  if (size_t n = Contraction(c, i, /*ignore_case=*/true)) return n;
  const Class cls = c.cls[i];
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (cls == Class::kLetter) return RunOf(c, i, Class::kLetter);
  if (cls != Class::kNumber && !IsCrLf(c.cp[i]) && i + 1 < c.size() &&
      c.cls[i + 1] == Class::kLetter) {
    return 1 + RunOf(c, i + 1, Class::kLetter);
  }
  // \p{N}{1,3}
  // (Only three are looked at: scanning the whole run for each piece was quadratic in it.)
  if (cls == Class::kNumber) return RunOf(c, i, Class::kNumber, 3);
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  const size_t start =
      c.cp[i] == ' ' && i + 1 < c.size() && c.cls[i + 1] == Class::kOther ? i + 1 : i;
  if (c.cls[start] == Class::kOther) {
    size_t j = start + RunOf(c, start, Class::kOther);
    while (j < c.size() && IsCrLf(c.cp[j])) ++j;
    return j - i;
  }
  // \s*[\r\n]+ : up to the last \r or \n of the whitespace run.
  const size_t run = RunOf(c, i, Class::kSpace);
  for (size_t j = i + run; j > i; --j) {
    if (IsCrLf(c.cp[j - 1])) return j - i;
  }
  return TrailingSpace(c, i);
}

void Split(const Codepoints& c, std::string_view text, bool llama3,
           std::vector<std::string_view>* out) {
  size_t i = 0;
  while (i < c.size()) {
    const size_t n = llama3 ? Llama3Match(c, i) : Gpt2Match(c, i);
    out->push_back(text.substr(c.offset[i], c.offset[i + n] - c.offset[i]));
    i += n;
  }
}

}  // namespace

std::vector<std::string_view> PreTokenize(PreTokenizerKind kind, std::string_view text) {
  std::vector<std::string_view> out;
  if (text.empty()) return out;
  const Codepoints c = Decode(text);
  if (kind != PreTokenizerKind::kGpt2IndividualDigits) {
    Split(c, text, kind == PreTokenizerKind::kLlama3, &out);
    return out;
  }
  // Digits first: each \p{N} is isolated; the stretches between are split independently.
  size_t start = 0;
  for (size_t i = 0; i <= c.size(); ++i) {
    if (i < c.size() && c.cls[i] != Class::kNumber) continue;
    if (start < i) {
      Codepoints part;
      part.cp.assign(c.cp.begin() + start, c.cp.begin() + i);
      part.cls.assign(c.cls.begin() + start, c.cls.begin() + i);
      part.offset.assign(c.offset.begin() + start, c.offset.begin() + i + 1);
      Split(part, text, /*llama3=*/false, &out);
    }
    if (i < c.size()) out.push_back(text.substr(c.offset[i], c.offset[i + 1] - c.offset[i]));
    start = i + 1;
  }
  return out;
}

}  // namespace rtgen
