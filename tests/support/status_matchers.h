// Catch2 assertions on absl::Status and absl::StatusOr, for every test: REQUIRE_OK(expr) and
// CHECK_OK(expr) fail the test (or only the check) when `expr`, a Status or a StatusOr, is not
// OK, naming the expression and the status; VALUE_OR_FAIL(expr) is the value of a StatusOr, or
// fails the test.
//
// They use Catch2 and so belong on the test's main thread only; worker threads collect their
// problems (ErrorLog, db_util.h) and the main thread checks them.
#pragma once
#include <catch2/catch.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ember::testing {

inline absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

template <typename T>
T ValueOrFail(absl::StatusOr<T> s, const char* expr) {
  if (!s.ok()) FAIL(expr << ": " << s.status().ToString());
  return std::move(*s);
}

}  // namespace ember::testing

#define REQUIRE_OK(expr)                                            \
  do {                                                              \
    const absl::Status _ember_s = ::ember::testing::StatusOf(expr); \
    if (!_ember_s.ok()) FAIL(#expr << ": " << _ember_s.ToString()); \
  } while (0)

#define CHECK_OK(expr)                                                    \
  do {                                                                    \
    const absl::Status _ember_s = ::ember::testing::StatusOf(expr);       \
    if (!_ember_s.ok()) FAIL_CHECK(#expr << ": " << _ember_s.ToString()); \
  } while (0)

#define VALUE_OR_FAIL(expr) ::ember::testing::ValueOrFail((expr), #expr)
