// The database-level test helpers declared in db_util.h.
#include "tests/support/db_util.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <variant>

namespace ember::testing {

bool IsError(const absl::Status& s, absl::StatusCode code, std::string_view part) {
  return s.code() == code && std::string(s.message()).find(part) != std::string::npos;
}

bool NamesPage(absl::string_view msg, uint32_t p) {
  const std::string needle = "page " + std::to_string(p);
  for (size_t at = msg.find(needle); at != absl::string_view::npos; at = msg.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if (end == msg.size() || msg[end] < '0' || msg[end] > '9') return true;
  }
  return false;
}

std::string ValueText(const Value& v) {
  if (IsNull(v)) return "NULL";
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", *d);
    return b;
  }
  if (auto* s = std::get_if<std::string>(&v)) {
    if (s->size() > 40) return "'" + s->substr(0, 20) + "...'(" + std::to_string(s->size()) + ")";
    return "'" + *s + "'";
  }
  return "blob:" + std::to_string(std::get<BlobId>(v).value);
}

std::string RowText(const Row& r) {
  std::string out = "(";
  for (size_t i = 0; i < r.size(); ++i) out += (i ? ", " : "") + ValueText(r[i]);
  return out + ")";
}

bool SameValue(const Value& a, const Value& b) {
  if (a.index() != b.index()) return false;
  if (auto* d = std::get_if<double>(&a)) {
    const double e = std::get<double>(b);
    return std::memcmp(d, &e, sizeof e) == 0;
  }
  return a == b;
}

bool SameRow(const Row& a, const Row& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameValue(a[i], b[i])) return false;
  }
  return true;
}

TempDb::TempDb() : path_(dir_.File("test.edb")) { REQUIRE(dir_.ok()); }

Options CreateOptions(uint32_t page_size, uint32_t cache_pages) {
  Options o;
  o.create_if_missing = true;
  o.page_size = page_size;
  o.cache_pages = cache_pages;
  return o;
}

std::unique_ptr<Database> OpenOrFail(const std::string& path, const Options& o) {
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path, o);
  if (!db.ok()) FAIL("Open " << path << ": " << db.status().ToString());
  return std::move(*db);
}

ValidationReport RequireValid(Database* db, const std::string& when) {
  absl::StatusOr<ValidationReport> r = db->Validate();
  if (!r.ok()) FAIL(when << ": Validate: " << r.status().ToString());
  INFO(when << ": " << (r->errors.empty() ? std::string() : r->errors[0]));
  REQUIRE(r->errors.empty());
  REQUIRE(r->unreachable_pages.empty());
  return std::move(*r);
}

TableDb::TableDb(Options o) : opts(std::move(o)) { Open(true); }

TableDb::~TableDb() {
  if (db) (void)db->Close();
}

void TableDb::Open(bool create) {
  Options o = opts;
  o.create_if_missing = create;
  db = OpenOrFail(tmp.path(), o);
  if (create) {
    t = VALUE_OR_FAIL(db->CreateTable({"t",
                                       {{"id", ColumnType::kInt64, false},
                                        {"k", ColumnType::kInt64},
                                        {"v", ColumnType::kString}}}));
    by_id = VALUE_OR_FAIL(db->CreateIndex({"t_id", "t", {"id"}, true}));
    by_k = VALUE_OR_FAIL(db->CreateIndex({"t_k", "t", {"k"}, false}));
  } else {
    t = VALUE_OR_FAIL(db->GetTable("t"));
    by_id = VALUE_OR_FAIL(db->GetIndex("t_id"));
    by_k = VALUE_OR_FAIL(db->GetIndex("t_k"));
  }
}

void TableDb::Reopen() {
  REQUIRE_OK(db->Close());
  db.reset();
  Open(false);
}

absl::StatusOr<std::vector<std::pair<RecordId, Row>>> Drain(Cursor* c, size_t limit) {
  std::vector<std::pair<RecordId, Row>> out;
  while (c->Valid()) {
    out.emplace_back(c->id(), c->row());
    if (out.size() > limit) return absl::InternalError("cursor returned too many rows");
    if (absl::Status s = c->Next(); !s.ok()) return s;
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<RecordId, Row>>> ScanAll(Transaction* t, const Table& table) {
  absl::StatusOr<std::unique_ptr<Cursor>> c = t->Scan(table);
  if (!c.ok()) return c.status();
  return Drain(c->get());
}

absl::StatusOr<std::vector<std::pair<RecordId, Row>>> IndexRange(Transaction* t, const Index& ix,
                                                                 const Row& lo, const Row& hi,
                                                                 bool descending) {
  absl::StatusOr<std::unique_ptr<Cursor>> c = t->IndexScan(ix, lo, hi, descending);
  if (!c.ok()) return c.status();
  return Drain(c->get());
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFileBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void ErrorLog::Add(std::string e) {
  std::lock_guard<std::mutex> g(mu_);
  if (errors_.size() < 50) errors_.push_back(std::move(e));
  ++count_;
}

std::vector<std::string> ErrorLog::Take() {
  std::lock_guard<std::mutex> g(mu_);
  return errors_;
}

size_t ErrorLog::count() {
  std::lock_guard<std::mutex> g(mu_);
  return count_;
}

void RequireNoErrors(ErrorLog& log) {
  const size_t n = log.count();
  if (n == 0) return;
  std::ostringstream os;
  os << n << " error(s) in worker threads:";
  for (const std::string& e : log.Take()) os << "\n  " << e;
  FAIL(os.str());
}

}  // namespace ember::testing
