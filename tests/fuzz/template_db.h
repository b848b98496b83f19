// The small database the page-level fuzz targets damage or take pages from (db_page_fuzz.cc,
// page_fuzz.cc): a table with a compressed BLOB column and two indexes, BLOBs inline, in one
// page and in several, updated rows with back versions (some as deltas) and delete stubs kept
// by a snapshot. Made once per process; the shape says how big.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "tests/fuzz/fuzz_util.h"

namespace ember::fuzz {

struct TemplateShape {
  int rows = 150;
  int blob_every = 10;  // every nth row has a BLOB of n * blob_step bytes
  size_t blob_step = 400;
};

// Creates the database at `path` with `o` and returns the bytes of the closed file.
inline std::string MakeTemplateDb(const std::string& path, Options o, const TemplateShape& shape) {
  o.create_if_missing = true;
  std::unique_ptr<Database> db = Must(Database::Open(path, o), "create");
  Table t = Must(db->CreateTable({"t",
                                  {{"id", ColumnType::kInt64, false},
                                   {"s", ColumnType::kString},
                                   {"blob", ColumnType::kBlob, true, 3}}}),
                 "CreateTable");
  Must(db->CreateIndex({"t_id", "t", {"id"}, true}), "CreateIndex");
  Must(db->CreateIndex({"t_s", "t", {"s"}, false}), "CreateIndex");
  std::vector<RecordId> ids;
  {
    std::unique_ptr<Transaction> tx = Must(db->Begin(), "Begin");
    for (int64_t i = 0; i < shape.rows; ++i) {
      Row row{i, "name " + std::to_string(i * 7919 % 1000) + std::string(i % 7 * 10, 'x'),
              std::monostate{}};
      if (i % shape.blob_every == 0) {
        std::unique_ptr<BlobWriter> w = Must(tx->CreateBlob(t, "blob"), "CreateBlob");
        std::string bytes(static_cast<size_t>(i) * shape.blob_step, '\0');
        // Half compressible, half not: frames stored compressed and frames kept raw.
        for (size_t j = 0; j < bytes.size(); ++j) {
          bytes[j] = static_cast<char>(j < bytes.size() / 2 ? 'a' + i % 26 : j * 7919 >> 5);
        }
        MustOk(w->Write(bytes), "BLOB write");
        row[2] = w->id();
      }
      ids.push_back(Must(tx->Insert(t, row), "Insert"));
    }
    MustOk(tx->Commit(), "Commit");
  }
  {
    std::unique_ptr<Transaction> keep = Must(db->Begin(), "Begin");
    std::unique_ptr<Transaction> tx = Must(db->Begin(), "Begin");
    for (size_t i = 0; i < ids.size(); i += 3) {
      MustOk(
          tx->Update(t, ids[i], Row{int64_t(i), "renamed " + std::to_string(i), std::monostate{}}),
          "Update");
    }
    for (size_t i = 1; i < ids.size(); i += 11) MustOk(tx->Delete(t, ids[i]), "Delete");
    MustOk(tx->Commit(), "Commit");
    MustOk(keep->Commit(), "Commit");
  }
  MustOk(db->Close(), "Close");
  return ReadFile(path);
}

}  // namespace ember::fuzz
