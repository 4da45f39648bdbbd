#include "engine/tokenizer/chat_template.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode_category.h"
#include "engine/common/utf8.h"

namespace rtgen {
namespace {

constexpr char kImStart[] = "<|im_start|>";
constexpr char kImEnd[] = "<|im_end|>";
constexpr char kLlama2Eos[] = "</s>";

// Python's str.isspace(), which Jinja's trim filter and str.strip() use.
bool IsPySpace(char32_t cp) { return (cp >= 0x1C && cp <= 0x1F) || IsWhitespace(cp); }

std::string Strip(std::string_view s) {
  // Leading: decode forward. Trailing: step back over whole characters.
  size_t begin = 0;
  while (begin < s.size()) {
    size_t next = begin;
    if (!IsPySpace(NextCodepoint(s, &next))) break;
    begin = next;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t pos = start;
    if (!IsPySpace(NextCodepoint(s, &pos))) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

// The text of a Jinja string literal quoted by `quote` from `start` up to `end` (the escapes
// \n \r \t \\ \' \" read; any other backslash kept: Python's rarer ones, \uXXXX among them,
// are not read), or nullopt where the literal closes before `end`.
std::optional<std::string> LiteralText(const std::string& jinja, size_t start, size_t end,
                                       char quote) {
  std::string out;
  for (size_t i = start; i < end; ++i) {
    const char c = jinja[i];
    if (c == quote) return std::nullopt;  // the literal ends: the turn is built from parts
    if (c != '\\' || i + 1 >= end) {
      out += c;
      continue;
    }
    const char e = jinja[++i];
    if (e == 'n') {
      out += '\n';
    } else if (e == 'r') {
      out += '\r';
    } else if (e == 't') {
      out += '\t';
    } else {
      if (e != '\\' && e != '\'' && e != '"') out += '\\';
      out += e;
    }
  }
  return out;
}

// The literal system prompt in "<|im_start|>system\n...<|im_end|>": inside one template string
// literal (its escapes read; the marker right after the opening quote), or in the template's
// plain text; "" when the system turn is built from a variable instead.
std::string DefaultSystemPrompt(const std::string& jinja) {
  const std::string marker = absl::StrCat(kImStart, "system");
  for (size_t at = jinja.find(marker); at != std::string::npos; at = jinja.find(marker, at + 1)) {
    size_t start = at + marker.size();
    if (jinja.compare(start, 1, "\n") == 0) {
      start += 1;
    } else if (jinja.compare(start, 2, "\\n") == 0) {
      start += 2;
    } else {
      continue;
    }
    const size_t end = jinja.find(kImEnd, start);
    if (end == std::string::npos) continue;
    const char before = at > 0 ? jinja[at - 1] : '\0';
    if (before == '\'' || before == '"') {
      if (std::optional<std::string> text = LiteralText(jinja, start, end, before)) return *text;
      continue;
    }
    const std::string text = jinja.substr(start, end - start);
    if (text.find_first_of("'\"{}\\") == std::string::npos) return text;
  }
  return "";
}

absl::Status CheckRoles(std::span<const ChatMessage> messages) {
  if (messages.empty()) return absl::InvalidArgumentError("messages is empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "].role \"", role, "\" is not system, user or assistant"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromJinja(const std::string& jinja_source,
                                                     const std::string& bos_text) {
  ChatTemplate t;
  t.bos_text_ = bos_text;
  if (const size_t im_start = jinja_source.find(kImStart); im_start != std::string::npos) {
    // ChatML-based templates that lay turns out otherwise, or add what plain ChatML does not,
    // are refused rather than rendered as plain ChatML: Phi-4's "<|im_sep|>" after the role (no
    // newlines), reasoning templates' <think> blocks (Qwen3 strips them from earlier turns and
    // adds empty ones; SmolLM3 too), and dated system blocks (SmolLM3's "Knowledge Cutoff Date").
    for (const char* marker : {"<|im_sep|>", "<think>", "Knowledge Cutoff", "Today Date"}) {
      if (jinja_source.find(marker) != std::string::npos) {
        return absl::UnimplementedError(absl::StrCat(
            "chat template is ChatML with \"", marker, "\" (Phi-4's separator, a reasoning "
            "template's <think> blocks or a dated system block), not supported; only plain "
            "ChatML is"));
      }
    }
    t.format_ = Format::kChatML;
    t.default_system_prompt_ = DefaultSystemPrompt(jinja_source);
    // A template that writes bos_token before its first turn (Hermes-2-Pro-Llama-3's) starts
    // the prompt with it; SmolLM2's and Qwen's name none.
    t.chatml_bos_ = jinja_source.substr(0, im_start).find("bos_token") != std::string::npos;
  } else if (jinja_source.find("<|start_header_id|>") != std::string::npos) {
    // Llama 3.1 and later put a system block with dates ("Cutting Knowledge Date: ...", today's
    // date in 3.2) before every conversation, which the Llama 3.0 format leaves out: refused
    // rather than rendered without it.
    if (jinja_source.find("Cutting Knowledge Date") != std::string::npos) {
      return absl::UnimplementedError(
          "chat template is Llama 3.1 or later (a dated system block before every "
          "conversation), not supported; only Llama 3.0's format is");
    }
    t.format_ = Format::kLlama3;
  } else if (jinja_source.find("[INST]") != std::string::npos) {
    // Llama 2's template wraps a system message in <<SYS>>; Mistral's [INST] templates have no
    // such block and lay turns out otherwise ("[/INST]b</s> [INST]" where Llama 2 writes
    // "[/INST] b </s><s>[INST]"): refused rather than rendered as Llama 2's.
    if (jinja_source.find("<<SYS>>") == std::string::npos) {
      return absl::UnimplementedError(
          "chat template is [INST]-style without Llama 2's <<SYS>> block (Mistral's?), not "
          "supported; only Llama 2's [INST] format is");
    }
    t.format_ = Format::kLlama2;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("chat template is not ChatML, Llama 3 or Llama 2: \"",
                     jinja_source.substr(0, 80), jinja_source.size() > 80 ? "...\"" : "\""));
  }
  return t;
}

ChatTemplate ChatTemplate::ChatML(std::string default_system_prompt) {
  ChatTemplate t;
  t.format_ = Format::kChatML;
  t.default_system_prompt_ = std::move(default_system_prompt);
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                 bool add_generation_prompt) const {
  if (auto s = CheckRoles(messages); !s.ok()) return s;
  std::string out;
  switch (format_) {
    case Format::kChatML:
      if (chatml_bos_) out = bos_text_;
      if (messages[0].role != "system" && !default_system_prompt_.empty()) {
        absl::StrAppend(&out, kImStart, "system\n", default_system_prompt_, kImEnd, "\n");
      }
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, kImStart, m.role, "\n", m.content, kImEnd, "\n");
      }
      if (add_generation_prompt) absl::StrAppend(&out, kImStart, "assistant\n");
      return out;
    case Format::kLlama3:
      out = bos_text_;
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                        Strip(m.content), "<|eot_id|>");
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case Format::kLlama2: {
      // An optional leading system message, then strictly user/assistant/user/...
      const bool has_system = messages[0].role == "system";
      for (size_t i = has_system ? 1 : 0, turn = 0; i < messages.size(); ++i, ++turn) {
        const ChatMessage& m = messages[i];
        // A system message past the first is no turn of this format (its Jinja drops it): an
        // error, not an assistant reply.
        if ((m.role == "user") != (turn % 2 == 0) || m.role == "system") {
          return absl::InvalidArgumentError(
              absl::StrCat("messages[", i, "].role \"", m.role,
                           "\": the Llama 2 format needs an optional system message, then user and "
                           "assistant messages alternating, starting with user"));
        }
        if (m.role == "user") {
          std::string content = m.content;
          if (turn == 0 && has_system) {
            content = absl::StrCat("<<SYS>>\n", messages[0].content, "\n<</SYS>>\n\n", content);
          }
          absl::StrAppend(&out, bos_text_, "[INST] ", Strip(content), " [/INST]");
        } else {
          absl::StrAppend(&out, " ", Strip(m.content), " ", kLlama2Eos);
        }
      }
      return out;
    }
  }
  return out;
}

}  // namespace rtgen
