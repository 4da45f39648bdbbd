// The server's health follows its engine (server/engine_health.h): steps failing in a row or a
// loop stuck in a step turn both the overall status (liveness) and rtgen.v1.Inference
// (readiness) NOT_SERVING, and they come back once the engine recovers. Before, health was
// SERVING from start to shutdown whatever the engine did: a sticky device error failed every
// request on a pod that stayed Ready and Live.

#include <atomic>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/inference_client.h"
#include "engine/engine.h"
#include "engine/loader/model_loader.h"
#include "server/server.h"
#include "tests/reliability/synthetic_server.h"

namespace rtgen::reliability {
namespace {

// An engine whose health the test sets; it serves nothing.
class ScriptedHealthEngine : public Engine {
 public:
  explicit ScriptedHealthEngine(EngineConfig config) : config_(std::move(config)) {}
  absl::Status Submit(Request, StreamSink) override {
    return absl::UnavailableError("test engine serves nothing");
  }
  void Cancel(const std::string&) override {}
  LoadSnapshot GetLoad() const override { return {}; }
  EngineHealth Health() const override {
    EngineHealth h;
    h.failed_steps_in_a_row = failed.load();
    h.stalled = absl::Milliseconds(stalled_ms.load());
    return h;
  }
  void Shutdown() override {}
  const EngineConfig& config() const override { return config_; }

  std::atomic<int32_t> failed{0};
  std::atomic<int64_t> stalled_ms{0};

 private:
  EngineConfig config_;
};

// Polls both statuses until they are `want` (or 5 s pass); true when they got there.
bool BothBecome(InferenceClient& client, HealthStatus want) {
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (absl::Now() < until) {
    if (client.Health("").value_or(HealthStatus::kUnknown) == want &&
        client.Health("rtgen.v1.Inference").value_or(HealthStatus::kUnknown) == want) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST(EngineHealthTest, FailingOrStuckStepsTurnHealthNotServingUntilTheEngineRecovers) {
  ServerConfig config = SmallServerConfig();
  config.health_watch_interval = absl::Milliseconds(20);
  config.engine_health.max_failed_steps = 3;
  config.engine_health.max_stall = absl::Seconds(1);
  absl::StatusOr<LoadedModel> model = LoadModel(config.model_path);
  ASSERT_TRUE(model.ok()) << model.status();
  ScriptedHealthEngine* engine = nullptr;
  auto server = Server::StartWithEngine(
      config, *std::move(model), "test",
      [&](const Tokenizer*, EngineObserver*) -> absl::StatusOr<std::unique_ptr<Engine>> {
        auto e = std::make_unique<ScriptedHealthEngine>(config.engine);
        engine = e.get();
        return std::unique_ptr<Engine>(std::move(e));
      });
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = InferenceClient::Connect(absl::StrCat("127.0.0.1:", (*server)->port()));
  EXPECT_TRUE(BothBecome(*client, HealthStatus::kServing));

  engine->failed = 2;  // under the limit
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(BothBecome(*client, HealthStatus::kServing));
  engine->failed = 3;  // a sticky error: every step fails
  EXPECT_TRUE(BothBecome(*client, HealthStatus::kNotServing));
  engine->failed = 0;  // a step succeeded
  EXPECT_TRUE(BothBecome(*client, HealthStatus::kServing));

  engine->stalled_ms = 1500;  // stuck in a step past max_stall
  EXPECT_TRUE(BothBecome(*client, HealthStatus::kNotServing));
  engine->stalled_ms = 0;
  EXPECT_TRUE(BothBecome(*client, HealthStatus::kServing));

  (*server)->Shutdown(absl::ZeroDuration());  // stops the watch (no thread left behind)
}

TEST(EngineHealthTest, APolicyThatCouldNeverServeIsRefused) {
  for (const bool stall : {false, true}) {
    ServerConfig config = SmallServerConfig();
    if (stall) {
      config.engine_health.max_stall = absl::ZeroDuration();
    } else {
      config.engine_health.max_failed_steps = 0;
    }
    absl::StatusOr<LoadedModel> model = LoadModel(config.model_path);
    ASSERT_TRUE(model.ok()) << model.status();
    auto server = Server::StartWithEngine(
        config, *std::move(model), "test",
        [&](const Tokenizer*, EngineObserver*) -> absl::StatusOr<std::unique_ptr<Engine>> {
          return std::unique_ptr<Engine>(std::make_unique<ScriptedHealthEngine>(config.engine));
        });
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(server.status().message().find(stall ? "unhealthy_after_stall_s"
                                                   : "unhealthy_after_failed_steps"),
              std::string::npos)
        << server.status();
  }
}

TEST(EngineHealthTest, ThePolicyCountsFailuresAndStalls) {
  const EngineHealthPolicy policy;  // 3 failed steps, 120 s
  EXPECT_TRUE(EngineServing({}, policy));
  EXPECT_TRUE(EngineServing({2, absl::Seconds(119)}, policy));
  EXPECT_FALSE(EngineServing({3, absl::ZeroDuration()}, policy));
  EXPECT_FALSE(EngineServing({0, absl::Seconds(120)}, policy));
}

}  // namespace
}  // namespace rtgen::reliability
