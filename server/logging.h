#pragma once
// spdlog set-up for the server: level and format (text, or one JSON object per line).

#include <string>

#include "absl/status/status.h"

namespace rtgen {

// `level`: trace|debug|info|warn|error|critical|off. `format`: text|json. INVALID_ARGUMENT
// naming the flag otherwise.
absl::Status ConfigureLogging(const std::string& level, const std::string& format);

}  // namespace rtgen
