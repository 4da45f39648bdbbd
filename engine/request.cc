#include "engine/request.h"

namespace rtgen {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kDeadline:
      return "deadline";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace rtgen
