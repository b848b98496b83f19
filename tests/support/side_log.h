// The side log of the SIGKILL crash tests (crash_test.cc, blob_crash_test.cc). The child cannot
// tell the parent what it committed once it is killed, so it writes that down, durably, around
// each Commit: a line "about to commit" with what the transaction did, and one after Commit
// returned OK. After the kill the parent reads the committed transactions from the log, plus at
// most one whose outcome the kill left open (announced, not confirmed): the database must show
// the committed ones, with that one all there or not at all.
//
// One line per record, each written with a single write() on an O_APPEND file, so that only the
// last line can be torn (no "\n"): "P <tag> <n> <op>... E" before Commit, "C <tag> E" after it.
// What an op holds is the test's own: its Op type provides Encode(std::string*), appending
// " <op>", and Decode(std::istream&), which reads it back (a failed read fails the stream).
//
// Templates over the test's Op, hence header-only.
#pragma once
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ember::testing {

// What one transaction did, as logged: `tag` is unique per transaction.
template <class Op>
struct TxnEffect {
  int64_t tag = 0;
  std::vector<Op> ops;
};

template <class Op>
struct SideLog {
  std::vector<TxnEffect<Op>> committed;  // in commit order
  std::optional<TxnEffect<Op>> pending;  // announced, commit outcome unknown
  bool torn_tail = false;
};

template <class Op>
std::string EncodePending(const TxnEffect<Op>& e) {
  std::string s = absl::StrCat("P ", e.tag, " ", e.ops.size());
  for (const Op& op : e.ops) op.Encode(&s);
  absl::StrAppend(&s, " E\n");
  return s;
}

inline std::string EncodeCommitted(int64_t tag) { return absl::StrCat("C ", tag, " E\n"); }

// False (with a reason) when the log breaks the protocol.
template <class Op>
bool ParseSideLog(const std::string& text, SideLog<Op>* out, std::string* why) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      out->torn_tail = true;
      break;
    }
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    std::istringstream in(line);
    std::string kind, end;
    TxnEffect<Op> e;
    in >> kind >> e.tag;
    if (kind == "P") {
      size_t n = 0;
      in >> n;
      for (size_t i = 0; i < n && in; ++i) {
        Op op;
        op.Decode(in);
        e.ops.push_back(op);
      }
    }
    in >> end;
    if (!in || end != "E") {
      if (pos < text.size()) {
        *why = "a malformed line before the end of the log: " + line;
        return false;
      }
      out->torn_tail = true;
      break;
    }
    if (kind == "P") {
      if (out->pending) {
        *why = absl::StrCat("two transactions announced without a commit: ", out->pending->tag,
                            " and ", e.tag);
        return false;
      }
      out->pending = std::move(e);
    } else if (kind == "C") {
      if (!out->pending || out->pending->tag != e.tag) {
        *why = absl::StrCat("commit of ", e.tag, " was not announced");
        return false;
      }
      out->committed.push_back(std::move(*out->pending));
      out->pending.reset();
    } else {
      *why = "unknown log line: " + line;
      return false;
    }
  }
  return true;
}

template <class Op>
SideLog<Op> RequireSideLog(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  SideLog<Op> log;
  std::string why;
  const bool ok = ParseSideLog(text, &log, &why);
  INFO("side log problem: " << why);
  REQUIRE(ok);
  return log;
}

// The states the database may show after the kill: `*want`, `before` with the committed
// transactions applied, and `*alt`, that plus the pending one (empty when there is none).
// ApplyEffect(effect, &model) is the test's own, found by argument-dependent lookup.
template <class Model, class Op>
void ExpectedStates(const SideLog<Op>& log, const Model& before, Model* want,
                    std::optional<Model>* alt) {
  *want = before;
  for (const TxnEffect<Op>& e : log.committed) ApplyEffect(e, want);
  alt->reset();
  if (log.pending) {
    *alt = *want;
    ApplyEffect(*log.pending, &**alt);
  }
}

}  // namespace ember::testing
