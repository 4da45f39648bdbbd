#pragma once
// Early-return helpers for absl::Status / absl::StatusOr.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RTGEN_CONCAT_INNER(a, b) a##b
#define RTGEN_CONCAT(a, b) RTGEN_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status _rtgen_status = (expr);     \
    if (!_rtgen_status.ok()) return _rtgen_status; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(RTGEN_CONCAT(_rtgen_statusor_, __LINE__), lhs, expr)
