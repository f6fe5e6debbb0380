// Status propagation macros used across kiln (Abseil 20220623 ships none).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KILN_STATUS_CONCAT_INNER(a, b) a##b
#define KILN_STATUS_CONCAT(a, b) KILN_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define KILN_RETURN_IF_ERROR(expr)                   \
  do {                                               \
    ::absl::Status kiln_status_ = (expr);            \
    if (!kiln_status_.ok()) return kiln_status_;     \
  } while (0)

// `KILN_ASSIGN_OR_RETURN(auto x, StatusOrExpr());` binds the value or returns the error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_STATUS_CONCAT(kiln_statusor_, __LINE__), lhs, expr)

#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
