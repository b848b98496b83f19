// Smoke program for the package check: create, write, commit, reopen, read.
#include <cstdio>
#include <string>

#include "ember/ember.h"

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "package_check.edb";
  std::remove(path.c_str());
  ember::Options o;
  o.create_if_missing = true;
  {
    auto db = ember::Database::Open(path, o);
    if (!db.ok()) return std::puts(std::string(db.status().message()).c_str()), 1;
    auto t = (*db)->CreateTable({"t", {{"v", ember::ColumnType::kInt64}}});
    auto txn = (*db)->Begin();
    if (!t.ok() || !txn.ok() || !(*txn)->Insert(*t, {int64_t{7}}).ok() || !(*txn)->Commit().ok())
      return 1;
    txn->reset();
    if (!(*db)->Close().ok()) return 1;
  }
  o.create_if_missing = false;
  auto db = ember::Database::Open(path, o);
  if (!db.ok()) return 1;
  auto t = (*db)->GetTable("t");
  auto txn = (*db)->Begin();
  auto cur = (*txn)->Scan(*t);
  const bool ok = cur.ok() && (*cur)->Valid() && std::get<int64_t>((*cur)->row()[0]) == 7;
  std::puts(ok ? "package check: ok" : "package check: FAILED");
  std::remove(path.c_str());
  return ok ? 0 : 1;
}
