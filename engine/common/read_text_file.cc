#include "engine/common/read_text_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace rtgen {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace rtgen
