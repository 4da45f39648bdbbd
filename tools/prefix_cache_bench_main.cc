// rtgen-prefix-cache-bench: time to first token with and without a prefix-cache hit, through the
// engine on the CPU backend and a real model. A game's ~300-token system prompt is followed by
// short player messages: the first request per system prompt is cold (the whole prompt is
// computed), later ones share the cached system-prompt blocks and compute only their suffix.

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "engine/common/status_macros.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/loader/model_loader.h"
#include "tools/median.h"

ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf", "GGUF model or HF dir");
ABSL_FLAG(int32_t, rounds, 3, "system prompts (one cold request each)");
ABSL_FLAG(int32_t, warm, 5, "warm requests per system prompt");
ABSL_FLAG(int32_t, max_tokens, 4, "tokens generated per request");
ABSL_FLAG(int32_t, threads, 2, "CPU backend threads");

namespace rtgen {
namespace {

using tools::Median;

constexpr char kSystemPrompt[] =
    "You are Brannoc, the blacksmith of Emberfall, a mountain village in a fantasy role-playing "
    "game. Stay in character at all times. You speak in short, gruff sentences and you never "
    "break the fourth wall. You know the following about the world. Emberfall sits below the "
    "Ashen Peaks, where the old dwarven forges still burn. The village has a tavern called the "
    "Split Anvil, run by a cheerful halfling named Pell, a chapel with a cracked bell, and a "
    "market that opens every third day. Bandits have been raiding the northern road for a month, "
    "and the mayor, a nervous man named Odrin Vale, has offered fifty gold crowns for anyone who "
    "clears their camp. You sell swords, axes, spears, shields, chain shirts and horseshoes. A "
    "plain sword costs twelve silver, a steel axe fifteen, a shield eight, and a chain shirt forty. "
    "You repair damaged gear for a quarter of its price. You do not sell magic items, but you have "
    "heard that a hermit in the Whispering Wood trades in enchanted trinkets. You distrust "
    "wizards because one burned down your first forge. You have a daughter, Mira, who wants to "
    "become an adventurer, and you worry about her. If the player is rude, you raise your prices. "
    "If the player mentions the dwarven forges, you become curious and ask what they have seen. "
    "Never invent quests that are not listed here. Answer the player's next message in one or "
    "two sentences, and keep your answer under forty words.";

constexpr const char* kPlayerMessages[] = {
    "How much for a sword?", "Can you fix my shield?", "Tell me about the bandits.",
    "Where can I find magic items?", "Have you seen the dwarven forges?", "Is Mira around?",
    "What does the mayor pay?", "I need a chain shirt."};

struct Timing {
  double ttft_ms = 0;
  int32_t cached = 0;
  int32_t prompt = 0;
};

absl::StatusOr<Timing> RunOne(Engine& engine, const std::string& id, std::vector<int32_t> prompt,
                              int32_t max_tokens) {
  Request r;
  r.id = id;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stopping.max_tokens = max_tokens;
  r.stopping.ignore_eos = true;
  absl::Notification done;
  Usage usage;
  absl::Status error;
  RETURN_IF_ERROR(engine.Submit(std::move(r), [&](StreamChunk c) {
    if (c.finish == FinishReason::kNone) return;
    usage = c.usage;
    error = c.error;
    done.Notify();
  }));
  done.WaitForNotification();
  RETURN_IF_ERROR(error);
  return Timing{absl::ToDoubleMilliseconds(usage.time_to_first_token), usage.cached_tokens,
                usage.prompt_tokens};
}

// Every count flag at least its minimum, checked before the model loads: a zero would leave the
// cold or warm median empty and the summary's ratio meaningless.
absl::Status CheckFlags() {
  const struct {
    const char* name;
    int32_t value;
    int32_t min;
  } counts[] = {{"--rounds", absl::GetFlag(FLAGS_rounds), 1},
                {"--warm", absl::GetFlag(FLAGS_warm), 1},
                {"--max_tokens", absl::GetFlag(FLAGS_max_tokens), 1},
                {"--threads", absl::GetFlag(FLAGS_threads), 0}};
  for (const auto& c : counts) {
    if (c.value < c.min) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.name, " must be at least ", c.min, " (got ", c.value, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Run() {
  RETURN_IF_ERROR(CheckFlags());
  ASSIGN_OR_RETURN(LoadedModel model, LoadModel(absl::GetFlag(FLAGS_model)));
  const Tokenizer& tok = *model.tokenizer;
  CpuBackendOptions options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend,
                   CpuBackend::Create(model.config, std::move(model.weights), options));
  EngineConfig config;
  config.max_num_seqs = 4;
  config.max_num_batched_tokens = 512;
  config.max_model_len = 1024;
  config.enable_prefix_caching = true;
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(config, std::move(backend), &tok));

  auto encode = [&](const std::string& text) -> absl::StatusOr<std::vector<int32_t>> {
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode(text, false));
    if (tok.add_bos() && tok.bos_id().has_value()) ids.insert(ids.begin(), *tok.bos_id());
    return ids;
  };
  // Warm-up (unrelated prompt) so the first cold request does not pay one-time costs.
  ASSIGN_OR_RETURN(std::vector<int32_t> warmup, encode("Hello there, traveller."));
  RETURN_IF_ERROR(RunOne(*engine, "warmup", warmup, absl::GetFlag(FLAGS_max_tokens)).status());

  const int32_t max_tokens = absl::GetFlag(FLAGS_max_tokens);
  std::vector<double> cold_ms, warm_ms;
  int32_t system_tokens = 0;
  int32_t warm_cached = 0;
  int32_t n = 0;
  for (int32_t round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    // A different first line per round, so each round's first request is truly cold.
    const std::string system = absl::StrCat("[Server ", round * 7919 + 17, "] ", kSystemPrompt);
    ASSIGN_OR_RETURN(std::vector<int32_t> sys_ids, encode(system));
    system_tokens = static_cast<int32_t>(sys_ids.size());
    for (int32_t i = 0; i <= absl::GetFlag(FLAGS_warm); ++i) {
      const char* msg = kPlayerMessages[static_cast<size_t>(n++) % std::size(kPlayerMessages)];
      ASSIGN_OR_RETURN(std::vector<int32_t> user,
                       tok.Encode(absl::StrCat("\nPlayer: ", msg, "\nBrannoc:"), false));
      std::vector<int32_t> prompt = sys_ids;
      prompt.insert(prompt.end(), user.begin(), user.end());
      ASSIGN_OR_RETURN(Timing t,
                       RunOne(*engine, absl::StrCat("r", round, "-", i), prompt, max_tokens));
      std::printf("round %d request %d: prompt %d tokens, cached %d, TTFT %.1f ms\n", round, i,
                  t.prompt, t.cached, t.ttft_ms);
      if (i == 0) {
        cold_ms.push_back(t.ttft_ms);
      } else {
        warm_ms.push_back(t.ttft_ms);
        warm_cached = t.cached;
      }
    }
  }
  engine->Shutdown();
  const double cold = Median(cold_ms);
  const double warm = Median(warm_ms);
  std::printf("\nsystem prompt: %d tokens; warm requests reuse %d cached tokens\n", system_tokens,
              warm_cached);
  std::printf("TTFT cold (median of %zu): %.1f ms\n", cold_ms.size(), cold);
  std::printf("TTFT warm (median of %zu): %.1f ms\n", warm_ms.size(), warm);
  std::printf("cold / warm: %.1fx %s\n", cold / warm,
              warm < cold ? "(prefix cache lowers TTFT)" : "(NO GAIN)");
  return absl::OkStatus();
}

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = rtgen::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "rtgen-prefix-cache-bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
