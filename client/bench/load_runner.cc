#include "client/bench/load_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/bench/arrival_schedule.h"
#include "client/bench/progress_bar.h"

namespace rtgen::bench {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Collects records and the span from the first send to the last completion.
class Recorder {
 public:
  void Add(RequestRecord record, Clock::time_point end) {
    std::lock_guard<std::mutex> lock(mu_);
    if (end > last_end_) last_end_ = end;
    records_.push_back(std::move(record));
  }
  LoadResult Take(Clock::time_point start) {
    std::lock_guard<std::mutex> lock(mu_);
    LoadResult result;
    result.duration_s =
        last_end_ < start ? 0 : std::chrono::duration<double>(last_end_ - start).count();
    result.records = std::move(records_);
    return result;
  }

 private:
  std::mutex mu_;
  std::vector<RequestRecord> records_;
  Clock::time_point last_end_{};
};

// Closed loop: `concurrency` workers each send one request after another until `limit`
// requests were claimed (limit > 0) or `duration_s` passed (duration_s > 0).
LoadResult RunClosedLoop(int concurrency, int limit, double duration_s, InferenceClient& client,
                         PromptSource& prompts, double timeout_s, ProgressBar& bar) {
  Recorder recorder;
  std::atomic<int> claimed{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      while (true) {
        if (limit > 0 && claimed.fetch_add(1) >= limit) return;
        if (duration_s > 0 && SecondsSince(start) >= duration_s) return;
        const BenchPrompt prompt = prompts.Next();
        RequestRecord record = RunOneRequest(client, prompt, timeout_s);
        bar.Add(!record.ok());
        recorder.Add(std::move(record), Clock::now());
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  return recorder.Take(start);
}

}  // namespace

LoadResult RunOpenLoop(double rate, int max_in_flight, int limit, double duration_s,
                       uint64_t seed, PromptSource& prompts,
                       const std::function<RequestRecord(const BenchPrompt&)>& send,
                       ProgressBar& bar, int uncapped_limit) {
  Recorder recorder;
  PoissonArrivals arrivals(rate, seed);
  if (max_in_flight <= 0) max_in_flight = uncapped_limit;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  // A request's thread, by request index, joined soon after it finishes: a finished thread
  // keeps its stack mapped until joined, and a long run (~30 000 requests) of threads joined
  // only at the end ran into the kernel's limit on memory maps.
  std::map<int, std::thread> requests;
  std::vector<int> finished;  // indices of requests whose thread is ending; guarded by mu
  auto reap = [&] {
    std::vector<int> done;
    {
      std::lock_guard<std::mutex> lock(mu);
      done.swap(finished);
    }
    for (int k : done) {
      requests[k].join();
      requests.erase(k);
    }
  };
  const Clock::time_point start = Clock::now();
  double next_arrival_s = 0;  // the first request at once: the duration counts from its send
  for (int i = 0; limit <= 0 || i < limit; ++i) {
    reap();
    if (i > 0) next_arrival_s += arrivals.NextGapSeconds();
    if (duration_s > 0 && next_arrival_s >= duration_s) break;
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(next_arrival_s)));
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight < max_in_flight; });
      ++in_flight;
    }
    // The schedule may have fallen behind the clock (a cap, a slow thread start): the duration
    // is wall-clock time all the same.
    if (duration_s > 0 && SecondsSince(start) >= duration_s) {
      std::lock_guard<std::mutex> lock(mu);
      --in_flight;
      break;
    }
    BenchPrompt prompt = prompts.Next();
    requests.emplace(i, std::thread([&, i, prompt = std::move(prompt)] {
      RequestRecord record = send(prompt);
      bar.Add(!record.ok());
      recorder.Add(std::move(record), Clock::now());
      std::lock_guard<std::mutex> lock(mu);
      --in_flight;
      finished.push_back(i);
      cv.notify_all();
    }));
  }
  for (auto& [index, request] : requests) request.join();
  return recorder.Take(start);
}

RequestRecord RunOneRequest(InferenceClient& client, const BenchPrompt& prompt,
                            double request_timeout_s) {
  v1::GenerateRequest request;
  if (!prompt.token_ids.empty()) {
    request.mutable_prompt_token_ids()->mutable_ids()->Add(prompt.token_ids.begin(),
                                                           prompt.token_ids.end());
  } else {
    request.set_prompt(prompt.text);
  }
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(prompt.max_tokens);
  request.mutable_stopping()->set_ignore_eos(true);

  RequestRecord record;
  record.prompt_tokens = static_cast<int>(prompt.token_ids.size());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(request_timeout_s)));
  const Clock::time_point sent = Clock::now();
  Clock::time_point last_token = sent;
  auto on_response = [&](const v1::GenerateResponse& response) {
    const int n = response.token_ids_size();
    if (n == 0) return;
    const Clock::time_point now = Clock::now();
    if (record.output_tokens == 0) {
      record.ttft_s = std::chrono::duration<double>(now - sent).count();
      // Tokens beyond the first in the same message arrived together: gaps of 0.
      for (int i = 1; i < n; ++i) record.itl_s.push_back(0);
    } else {
      // A message of n tokens spreads its gap evenly over them.
      const double gap = std::chrono::duration<double>(now - last_token).count() / n;
      for (int i = 0; i < n; ++i) record.itl_s.push_back(gap);
    }
    last_token = now;
    record.output_tokens += n;
  };
  absl::StatusOr<GenerateResult> result = client.Generate(request, on_response, &context);
  record.e2e_s = std::chrono::duration<double>(Clock::now() - sent).count();
  if (!result.ok()) {
    record.code = result.status().code();
    return record;
  }
  record.finish_error = result->finish_reason == v1::FINISH_REASON_ERROR;
  if (result->usage.prompt_tokens() > 0) record.prompt_tokens = result->usage.prompt_tokens();
  return record;
}

absl::Status CheckLoadConfig(const LoadConfig& config) {
  // Comparisons written so that NaN fails them: a NaN duration passed "< 0" and then stopped no
  // loop (it ran until killed), a NaN timeout passed "<= 0".
  if (!(config.duration_s >= 0) || std::isinf(config.duration_s)) {
    return absl::InvalidArgumentError("--duration must be a finite number >= 0");
  }
  if (config.num_requests <= 0 && config.duration_s <= 0) {
    return absl::InvalidArgumentError("set --num-requests or --duration (or both)");
  }
  if (config.num_requests < 0) return absl::InvalidArgumentError("--num-requests must be >= 0");
  if (config.warmup < 0) return absl::InvalidArgumentError("--warmup must be >= 0");
  if (!(config.request_timeout_s > 0)) {
    return absl::InvalidArgumentError("--timeout must be > 0");
  }
  if (config.request_rate.has_value()) {
    if (!(*config.request_rate > 0)) {
      return absl::InvalidArgumentError("--request-rate must be > 0 (inf: all at once)");
    }
    if (std::isinf(*config.request_rate) && config.num_requests <= 0) {
      return absl::InvalidArgumentError("--request-rate inf needs --num-requests");
    }
    if (config.concurrency.value_or(0) < 0) {
      return absl::InvalidArgumentError("--concurrency must be >= 0");
    }
  } else if (config.concurrency.value_or(1) < 1) {
    return absl::InvalidArgumentError("--concurrency must be >= 1");
  }
  return absl::OkStatus();
}

int InFlightLimit(const LoadConfig& config) {
  return config.concurrency.value_or(config.request_rate.has_value() ? 0 : 1);
}

absl::StatusOr<LoadResult> RunLoad(const LoadConfig& config, InferenceClient& client,
                                   PromptSource& prompts) {
  if (absl::Status s = CheckLoadConfig(config); !s.ok()) return s;
  const int limit = InFlightLimit(config);

  if (config.warmup > 0) {
    ProgressBar bar("warm-up", config.warmup, 0, config.progress);
    RunClosedLoop(std::max(limit, 1), config.warmup, 0, client, prompts,
                  config.request_timeout_s, bar);
    bar.Finish();
  }
  const std::string label =
      config.request_rate.has_value()
          ? absl::StrCat("rate ", *config.request_rate, "/s")
          : absl::StrCat("concurrency ", limit);
  ProgressBar bar(label, config.num_requests, config.duration_s, config.progress);
  LoadResult result =
      config.request_rate.has_value()
          ? RunOpenLoop(*config.request_rate, limit, config.num_requests, config.duration_s,
                        config.seed, prompts,
                        [&](const BenchPrompt& prompt) {
                          return RunOneRequest(client, prompt, config.request_timeout_s);
                        },
                        bar)
          : RunClosedLoop(limit, config.num_requests, config.duration_s, client, prompts,
                          config.request_timeout_s, bar);
  bar.Finish();
  return result;
}

}  // namespace rtgen::bench
