#include "client/bench/progress_bar.h"

#include <algorithm>
#include <cstdio>

namespace rtgen::bench {

namespace {
constexpr int kBarWidth = 30;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
}  // namespace

ProgressBar::ProgressBar(std::string label, int total, double duration_s, bool enabled)
    : label_(std::move(label)),
      total_(total),
      duration_s_(duration_s),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - kRedrawInterval) {}

void ProgressBar::Add(bool failed) {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  if (failed) ++failed_;
  Draw(/*force=*/false);
}

void ProgressBar::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  Draw(/*force=*/true);
  if (enabled_) std::fputc('\n', stderr);
}

void ProgressBar::Draw(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  double fraction = 0;
  if (total_ > 0) {
    fraction = static_cast<double>(done_) / total_;
  } else if (duration_s_ > 0) {
    fraction = elapsed / duration_s_;
  }
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(filled, '#');
  bar.append(kBarWidth - filled, '.');
  if (total_ > 0) {
    std::fprintf(stderr, "\r%s [%s] %d/%d requests, %d errors, %.1f s", label_.c_str(),
                 bar.c_str(), done_, total_, failed_, elapsed);
  } else {
    std::fprintf(stderr, "\r%s [%s] %d requests, %d errors, %.1f/%.0f s", label_.c_str(),
                 bar.c_str(), done_, failed_, elapsed, duration_s_);
  }
  std::fflush(stderr);
}

}  // namespace rtgen::bench
