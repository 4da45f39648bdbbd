// What rtgen-client prints: with --logprobs each token's log-probability and top alternatives on
// stderr, a line a token, with the text alone on stdout; after a failed generate that streamed
// nothing, nothing on stdout (a stray newline was written there). And generate's --timeout is
// the stream's deadline: against a server that never answers, the client gives up in time.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tests/reliability/synthetic_server.h"

extern char** environ;

namespace rtgen::reliability {
namespace {

struct ClientRun {
  int exit_code = -1;
  std::string out, err;
};

// Runs rtgen-client with `args` to its end, both streams read as it runs; a client silent for
// 30 s is killed (exit_code stays -1), so a missing deadline fails the test instead of hanging.
ClientRun RunClient(std::vector<std::string> args) {
  ClientRun run;
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return run;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, err[0]);
  const std::string binary = ClientBinary();
  args.insert(args.begin(), binary);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  if (spawned != 0) return run;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* into[2] = {&run.out, &run.err};
  for (int open = 2; open > 0;) {
    if (poll(fds, 2, 30'000) <= 0) {  // 30 s without output: give up
      kill(child, SIGKILL);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        into[i]->append(buf, n);
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);  // left open where the client was killed
  }
  int status = 0;
  waitpid(child, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(ClientOutputTest, LogprobsGoToStderrALineAToken) {
  RunningServer server = StartServer(SmallServerConfig());
  const ClientRun run = RunClient({"generate", "--target", server.target, "--prompt", "Hi",
                                   "--max-tokens", "3", "--ignore-eos", "--logprobs", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(run.err, '\n')) {
    if (absl::StartsWith(line, "[logprob token=")) lines.emplace_back(line);
  }
  ASSERT_EQ(lines.size(), 3u) << run.err;
  for (const std::string& line : lines) {
    // "[logprob token=ID LP ID:LP ID:LP]": the sampled token and two alternatives.
    const std::vector<std::string> fields = absl::StrSplit(line, ' ');
    EXPECT_EQ(fields.size(), 5u) << line;
    EXPECT_TRUE(absl::EndsWith(line, "]")) << line;
  }
  EXPECT_FALSE(absl::StrContains(run.out, "logprob")) << run.out;  // stdout: the text alone
}

TEST(ClientOutputTest, AFailedGenerateThatStreamedNothingPrintsNothingOnStdout) {
  // Nothing listens on port 1.
  const ClientRun run = RunClient({"generate", "--target", "127.0.0.1:1", "--prompt", "Hi",
                                   "--timeout", "5"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(run.out, "");
  EXPECT_TRUE(absl::StrContains(run.err, "generate failed")) << run.err;
}

// A TCP port that accepts connections (the kernel's backlog completes the handshake) and never
// says a byte: a gRPC channel to it stays connecting, so only a deadline ends an RPC.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // not inherited by the client
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(fd_, 16) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(ClientOutputTest, GenerateGivesUpAtItsTimeoutWhenTheServerNeverAnswers) {
  SilentListener silent;
  ASSERT_GT(silent.port(), 0);
  const auto start = std::chrono::steady_clock::now();
  const ClientRun run =
      RunClient({"generate", "--target", "127.0.0.1:" + std::to_string(silent.port()),
                 "--prompt", "Hi", "--timeout", "1"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "generate failed: DEADLINE_EXCEEDED")) << run.err;
  EXPECT_LT(seconds, 15.0);  // the 1 s deadline, not gRPC's 20 s connect timeout nor the kill
  EXPECT_EQ(run.out, "");
}

}  // namespace
}  // namespace rtgen::reliability
