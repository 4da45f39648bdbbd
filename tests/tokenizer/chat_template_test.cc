#include "engine/tokenizer/chat_template.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/model/gguf_file.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/test_data.h"

namespace rtgen {
namespace {

std::vector<ChatMessage> Messages(const nlohmann::json& array) {
  std::vector<ChatMessage> out;
  for (const auto& m : array) out.push_back({m["role"], m["content"]});
  return out;
}

TEST(ChatTemplateTest, RendersLikeTransformersForEveryGoldenCase) {
  const auto rows =
      testing::ReadJsonLines(std::string(testing::kGoldenDir) + "/chat_template.jsonl");
  ASSERT_GE(rows.size(), 20u);
  int formats_seen[3] = {};
  for (size_t i = 0; i < rows.size(); ++i) {
    auto t = ChatTemplate::FromJinja(rows[i]["template"], rows[i]["bos"]);
    ASSERT_TRUE(t.ok()) << "row " << i << ": " << t.status();
    const std::string format = rows[i]["format"];
    EXPECT_EQ(t->format(), format == "chatml"   ? ChatTemplate::Format::kChatML
                           : format == "llama3" ? ChatTemplate::Format::kLlama3
                                                : ChatTemplate::Format::kLlama2);
    ++formats_seen[static_cast<int>(t->format())];
    auto rendered = t->Render(Messages(rows[i]["messages"]), rows[i]["add_generation_prompt"]);
    ASSERT_TRUE(rendered.ok()) << "row " << i << ": " << rendered.status();
    EXPECT_EQ(*rendered, rows[i]["rendered"].get<std::string>()) << "row " << i;
  }
  for (int n : formats_seen) EXPECT_GT(n, 0);
}

TEST(ChatTemplateTest, SmolLmTemplateFromGgufHasItsDefaultSystemPrompt) {
  auto file = GgufFile::Open(testing::kSmolLmGguf);
  ASSERT_TRUE(file.ok()) << file.status();
  auto jinja = (*file)->GetString("tokenizer.chat_template");
  ASSERT_TRUE(jinja.ok()) << jinja.status();
  auto t = ChatTemplate::FromJinja(*jinja, "<|im_start|>");
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  auto text = t->Render(msgs, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, DefaultSystemPromptsWithQuotesAndEscapesAreRead) {
  // A literal's escapes and quotes dropped the default system turn (any of ' " { } \ in it).
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  const std::string tail = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + "
                           "m['content'] + '<|im_end|>\\n' }}{% endfor %}";
  for (const auto& [jinja, want] : std::vector<std::pair<std::string, std::string>>{
           {"{{ '<|im_start|>system\\nBe kind.\\nBe brief.<|im_end|>\\n' }}",
            "Be kind.\nBe brief."},
           {"{{ '<|im_start|>system\\nA\\r\\tB<|im_end|>\\n' }}", "A\r\tB"},
           {"{{ \"<|im_start|>system\\nYou're {brief}.<|im_end|>\\n\" }}", "You're {brief}."},
           {"{{ '<|im_start|>system\\nYou\\'re \\\\o/ \\d<|im_end|>\\n' }}", "You're \\o/ \\d"},
           {"{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}", ""}}) {
    auto t = ChatTemplate::FromJinja(jinja + tail, "");
    ASSERT_TRUE(t.ok()) << t.status();
    auto text = t->Render(msgs, false);
    ASSERT_TRUE(text.ok()) << text.status();
    const std::string system =
        want.empty() ? "" : absl::StrCat("<|im_start|>system\n", want, "<|im_end|>\n");
    EXPECT_EQ(*text, system + "<|im_start|>user\nHi<|im_end|>\n") << jinja;
  }
}

TEST(ChatTemplateTest, UnknownRoleNamesTheMessage) {
  const ChatTemplate t = ChatTemplate::ChatML("");
  const std::vector<ChatMessage> msgs = {{"user", "a"}, {"assistant", "b"}, {"robot", "c"}};
  auto text = t.Render(msgs, true);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(text.status().message(), "messages[2].role")) << text.status();
}

TEST(ChatTemplateTest, EmptyMessageListIsRejected) {
  for (const ChatTemplate& t :
       {ChatTemplate::ChatML("sys"), *ChatTemplate::FromJinja("<|start_header_id|>", "")}) {
    auto text = t.Render({}, true);
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(text.status().message(), "messages")) << text.status();
  }
}

TEST(ChatTemplateTest, InstTemplatesWithoutASysBlockAreRefused) {
  // Mistral-7B-Instruct-v0.1's template: [INST] turns, no <<SYS>>, "[/INST]b</s> [INST]" between
  // turns — not Llama 2's layout.
  const std::string mistral =
      "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
      "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
      "{{ message['content'] + eos_token + ' ' }}{% endif %}{% endfor %}";
  const auto t = ChatTemplate::FromJinja(mistral, "<s>");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << t.status();
  EXPECT_TRUE(absl::StrContains(t.status().message(), "<<SYS>>")) << t.status();
}

TEST(ChatTemplateTest, Llama2RejectsNonAlternatingRoles) {
  auto t = ChatTemplate::FromJinja("{{ '<<SYS>>' }}{{ '[INST] ' }}", "<s>");
  ASSERT_TRUE(t.ok());
  const std::vector<ChatMessage> msgs = {{"user", "a"}, {"user", "b"}};
  auto text = t->Render(msgs, true);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::StrContains(text.status().message(), "messages[1].role")) << text.status();
  // A system message where an assistant reply would be: refused, not rendered as the reply.
  const std::vector<ChatMessage> late_system = {{"user", "hi"}, {"system", "x"}, {"user", "bye"}};
  text = t->Render(late_system, true);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::StrContains(text.status().message(), "messages[1].role \"system\""))
      << text.status();
}

TEST(ChatTemplateTest, UnrecognisedTemplateIsUnimplemented) {
  auto t = ChatTemplate::FromJinja("{{ messages[0].content }}", "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(t.status().message(), "messages[0].content")) << t.status();
}

// ChatML variants plain ChatML would render wrongly are refused naming what they add (each
// passed as plain ChatML before): a separator after the role instead of a newline (Phi-4), a
// reasoning template's <think> blocks (Qwen3), a dated system block (SmolLM3).
TEST(ChatTemplateTest, ChatMLVariantsItDoesNotRenderAreRefused) {
  const std::string turn =
      "{% for m in messages %}{{'<|im_start|>' + m['role'] + SEP + m['content'] + "
      "'<|im_end|>'}}{% endfor %}";
  for (const auto& [marker, jinja] : std::vector<std::pair<std::string, std::string>>{
           {"<|im_sep|>", "{% set SEP = '<|im_sep|>' %}" + turn},
           {"<think>", turn + "{% if add_generation_prompt %}{{'<|im_start|>assistant\n"
                              "<think>\n\n</think>\n\n'}}{% endif %}"},
           {"Knowledge Cutoff", "{{'<|im_start|>system\nKnowledge Cutoff Date: June 2025'}}" +
                                    turn}}) {
    auto t = ChatTemplate::FromJinja(jinja, "");
    ASSERT_FALSE(t.ok()) << marker;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_TRUE(absl::StrContains(t.status().message(), marker)) << t.status();
  }
}

// A ChatML template that writes bos_token before its turns (Hermes-2-Pro-Llama-3's) starts the
// prompt with the BOS text (it was dropped); SmolLM2's, which names none, does not.
TEST(ChatTemplateTest, ChatMLWritesTheBosItsTemplateWrites) {
  const std::string turns =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\n' }}{% endif %}";
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  auto with_bos = ChatTemplate::FromJinja("{{bos_token}}" + turns, "<|begin_of_text|>");
  ASSERT_TRUE(with_bos.ok()) << with_bos.status();
  auto text = with_bos->Render(msgs, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|begin_of_text|><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto without = ChatTemplate::FromJinja(turns, "<|begin_of_text|>");
  ASSERT_TRUE(without.ok()) << without.status();
  text = without->Render(msgs, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ChatMLWithoutDefaultPromptAddsNoSystemTurn) {
  const std::vector<ChatMessage> msgs = {{"user", "x"}};
  auto text = ChatTemplate::ChatML("").Render(msgs, false);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|im_start|>user\nx<|im_end|>\n");
}

}  // namespace
}  // namespace rtgen
