#include "server/logging.h"

#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/details/log_msg.h>
#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace rtgen {
namespace {

// {"ts":"2024-05-01T12:00:00.123456Z","level":"info","thread":123,"msg":"..."} per line.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const absl::Time time = absl::FromChrono(msg.time);
    nlohmann::json line = {
        {"ts", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", time, absl::UTCTimeZone())},
        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size())},
        {"thread", msg.thread_id},
        {"msg", std::string(msg.payload.data(), msg.payload.size())},
    };
    if (msg.logger_name.size() > 0) {
      line["logger"] = std::string(msg.logger_name.data(), msg.logger_name.size());
    }
    // Invalid UTF-8 in a message is replaced rather than thrown on.
    const std::string text =
        line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

absl::Status ConfigureLogging(const std::string& level, const std::string& format) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  // from_str maps anything unknown to "off"; only accept "off" when asked for.
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "log-level: unknown level '", level,
        "' (expected trace, debug, info, warn, error, critical or off)"));
  }
  if (format == "json") {
    spdlog::set_formatter(std::make_unique<JsonFormatter>());
  } else if (format == "text") {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%f%z %^%l%$ [%t] %v");
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("log-format: unknown format '", format, "' (expected text or json)"));
  }
  spdlog::set_level(parsed);
  return absl::OkStatus();
}

}  // namespace rtgen
