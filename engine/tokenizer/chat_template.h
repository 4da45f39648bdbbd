#pragma once
// Renders chat messages into a prompt with the model's chat template. Jinja is not interpreted:
// the template text is recognised as one of the known formats (ChatML as SmolLM2 and Qwen2.5
// use it, Llama 3, Llama 2 [INST]) and rendered natively, matching the Jinja output byte for
// byte; a variant the renderer does not reproduce (Phi-4, Qwen3's <think> turns, Llama 3.1's
// dated system block, Mistral's [INST]) is refused when the model loads.

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rtgen {

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  enum class Format { kChatML, kLlama3, kLlama2 };

  // Recognises `jinja_source`; UNIMPLEMENTED naming the template when it is none of the above.
  // A ChatML template's default system prompt (inserted when the first message is not a system
  // message, as SmolLM2's does) is taken from the template text.
  static absl::StatusOr<ChatTemplate> FromJinja(const std::string& jinja_source,
                                                const std::string& bos_text);
  static ChatTemplate ChatML(std::string default_system_prompt);

  // INVALID_ARGUMENT naming `messages[i].role` for an unknown role, or when `messages` is empty.
  absl::StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                                     bool add_generation_prompt) const;
  Format format() const { return format_; }

 private:
  Format format_ = Format::kChatML;
  std::string default_system_prompt_;  // ChatML only; empty = none
  std::string bos_text_;
  bool chatml_bos_ = false;  // ChatML only: the template writes bos_token before its turns
};

}  // namespace rtgen
