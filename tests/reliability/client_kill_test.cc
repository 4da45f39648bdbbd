// A client PROCESS (rtgen-client generate) killed with SIGKILL mid-stream: the server sees the
// connection drop, cancels the request and frees its KV blocks, and keeps serving.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "tests/reliability/synthetic_server.h"

extern char** environ;

namespace rtgen::reliability {
namespace {

TEST(ClientKillTest, KilledClientProcessIsCancelledAndItsBlocksFreed) {
  ServerConfig config = SmallServerConfig();
  config.engine.max_model_len = 2048;
  config.engine.num_kv_blocks = 512;
  RunningServer server = StartServer(config);
  const std::string binary = ClientBinary();
  ASSERT_EQ(access(binary.c_str(), X_OK), 0) << binary << " is not executable";

  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<std::string> args = {binary,         "generate",   "--target",  server.target,
                                   "--prompt",     "Once upon a time", "--max-tokens", "2000",
                                   "--ignore-eos", "--temperature", "0.8"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, binary.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);

  // Wait for streamed text on the child's stdout: the stream is live.
  std::string received;
  const absl::Time until = absl::Now() + absl::Seconds(20);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  while (received.size() < 16 && absl::Now() < until) {
    char buf[256];
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n > 0) received.append(buf, n);
    if (n == 0) break;  // the child exited early
    absl::SleepFor(absl::Milliseconds(5));
  }
  absl::StatusOr<v1::Load> during = server.client->GetLoad();
  ASSERT_TRUE(during.ok()) << during.status();
  const double cancelled_before = FinishedCount(*server.server, "cancelled");
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  close(out[0]);
  ASSERT_GE(received.size(), 16u) << "no streamed text from " << binary;
  EXPECT_EQ(during->running(), 1);
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);

  // 2000 tokens take far longer than this wait: going idle means the server cancelled it.
  const absl::Time kill_time = absl::Now();
  v1::Load idle = WaitForIdle(*server.client, absl::Seconds(10));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - kill_time);
  EXPECT_EQ(idle.running(), 0);
  EXPECT_EQ(idle.kv_blocks_free(), idle.kv_blocks_total());
  EXPECT_EQ(FinishedCount(*server.server, "cancelled"), cancelled_before + 1);
  std::printf("[figure] rtgen-client SIGKILLed after %zu bytes of text: cancelled and idle "
              "%.3f s later (kv free %d/%d)\n",
              received.size(), seconds, idle.kv_blocks_free(), idle.kv_blocks_total());
  EXPECT_EQ(server.client->Health().value_or(HealthStatus::kUnknown), HealthStatus::kServing);
}

}  // namespace
}  // namespace rtgen::reliability
