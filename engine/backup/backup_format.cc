// The backup file's format (see backup_format.h and docs/backup-format.md).
#include "engine/backup/backup_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/io/file.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"

namespace ember::backup {
namespace {

using util::Get16;
using util::Get32;
using util::Get64;
using util::Put16;
using util::Put32;
using util::Put64;

void PutString(std::string* out, std::string_view s) {
  util::PutVarint64(out, s.size());
  out->append(s);
}
bool GetString(std::string_view* in, std::string* s) {
  uint64_t n;
  if (!util::GetVarint64(in, &n) || n > in->size()) return false;
  s->assign(in->substr(0, n));
  in->remove_prefix(n);
  return true;
}
bool GetByte(std::string_view* in, uint8_t* b) {
  if (in->empty()) return false;
  *b = static_cast<uint8_t>((*in)[0]);
  in->remove_prefix(1);
  return true;
}
absl::Status Corrupt(const std::string& what) {
  return absl::DataLossError(absl::StrCat("corrupt ", what));
}

}  // namespace

std::string EncodeFileHeader(const FileHeader& h) {
  std::string b(kFileHeaderSize, '\0');
  std::memcpy(b.data(), kFileMagic, 8);
  Put32(b.data() + 8, h.version);
  Put32(b.data() + 12, 0);  // flags
  Put64(b.data() + 16, h.snapshot);
  Put32(b.data() + 24, h.source_page_size);
  Put32(b.data() + 28, util::Crc32c(b.data(), 28));
  return b;
}

absl::StatusOr<FileHeader> DecodeFileHeader(std::string_view b, const std::string& what) {
  if (b.size() < kFileHeaderSize || std::memcmp(b.data(), kFileMagic, 8) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not an EmberDB backup file"));
  }
  if (Get32(b.data() + 28) != util::Crc32c(b.data(), 28)) {
    return absl::DataLossError(absl::StrCat(what, ": the file header's checksum does not match"));
  }
  FileHeader h;
  h.version = Get32(b.data() + 8);
  if (h.version != kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": backup format version ", h.version,
                                                      "; this build reads version ",
                                                      kFormatVersion));
  }
  h.snapshot = Get64(b.data() + 16);
  h.source_page_size = Get32(b.data() + 24);
  return h;
}

absl::StatusOr<EncodedFrame> EncodeFrame(FrameType type, uint16_t flags, std::string_view raw,
                                         int level) {
  if (raw.size() > kMaxFramePayload) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a backup frame of ", raw.size(), " bytes is over the limit of ", kMaxFramePayload));
  }
  EncodedFrame f;
  f.header.type = type;
  f.header.flags = flags;
  f.header.raw_len = static_cast<uint32_t>(raw.size());
  f.header.codec = Codec::kNone;
  if (level > 0 && raw.size() >= 64) {
    f.stored.resize(ZSTD_compressBound(raw.size()));
    const size_t n = ZSTD_compress(f.stored.data(), f.stored.size(), raw.data(), raw.size(), level);
    if (ZSTD_isError(n)) {
      return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
    }
    if (n < raw.size()) {
      f.stored.resize(n);
      f.header.codec = Codec::kZstd;
    }
  }
  if (f.header.codec == Codec::kNone) f.stored.assign(raw);
  f.header.stored_len = static_cast<uint32_t>(f.stored.size());
  f.header.payload_crc = util::Crc32c(f.stored.data(), f.stored.size());
  return f;
}

std::string EncodeFrameHeader(const FrameHeader& h) {
  std::string b(kFrameHeaderSize, '\0');
  Put32(b.data(), kFrameMagic);
  b[4] = static_cast<char>(h.type);
  b[5] = static_cast<char>(h.codec);
  Put16(b.data() + 6, h.flags);
  Put64(b.data() + 8, h.seq);
  Put32(b.data() + 16, h.stored_len);
  Put32(b.data() + 20, h.raw_len);
  Put32(b.data() + 24, h.payload_crc);
  Put32(b.data() + 28, util::Crc32c(b.data(), 28));
  return b;
}

absl::StatusOr<FrameHeader> DecodeFrameHeader(std::string_view b, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(where, ": ", what));
  };
  if (b.size() < kFrameHeaderSize) return bad("the frame header is cut short");
  if (Get32(b.data()) != kFrameMagic) return bad("no frame starts here (bad magic)");
  if (Get32(b.data() + 28) != util::Crc32c(b.data(), 28)) {
    return bad("the frame header's checksum does not match");
  }
  FrameHeader h;
  const uint8_t type = static_cast<uint8_t>(b[4]), codec = static_cast<uint8_t>(b[5]);
  if (type < 1 || type > 4) return bad(absl::StrCat("unknown frame type ", type));
  if (codec > 1) return bad(absl::StrCat("unknown compression ", codec));
  h.type = static_cast<FrameType>(type);
  h.codec = static_cast<Codec>(codec);
  h.flags = Get16(b.data() + 6);
  h.seq = Get64(b.data() + 8);
  h.stored_len = Get32(b.data() + 16);
  h.raw_len = Get32(b.data() + 20);
  h.payload_crc = Get32(b.data() + 24);
  if (h.stored_len > kMaxFramePayload || h.raw_len > kMaxFramePayload ||
      (h.codec == Codec::kNone && h.stored_len != h.raw_len)) {
    return bad("impossible frame lengths");
  }
  return h;
}

absl::Status DecodePayload(const FrameHeader& h, std::string_view stored, std::string* raw,
                           const std::string& where) {
  if (stored.size() != h.stored_len ||
      util::Crc32c(stored.data(), stored.size()) != h.payload_crc) {
    return absl::DataLossError(absl::StrCat(where, ": the frame's checksum does not match"));
  }
  if (h.codec == Codec::kNone) {
    raw->assign(stored);
    return absl::OkStatus();
  }
  raw->resize(h.raw_len);
  const size_t n = ZSTD_decompress(raw->data(), raw->size(), stored.data(), stored.size());
  if (ZSTD_isError(n) || n != h.raw_len) {
    return absl::DataLossError(absl::StrCat(where, ": the frame does not decompress (",
                                            ZSTD_isError(n) ? ZSTD_getErrorName(n) : "length",
                                            ")"));
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ FrameFile

FrameFile::~FrameFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<FrameFile>> FrameFile::Create(const std::string& path,
                                                             const FileHeader& h) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io::ErrnoStatus(errno, "cannot create backup file", path);
  return std::unique_ptr<FrameFile>(new FrameFile(path, fd, EncodeFileHeader(h)));
}

absl::Status FrameFile::FlushLocked() {
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io::ErrnoStatus(errno, "cannot write backup file", path_);
    }
    done += static_cast<size_t>(n);
  }
  bytes_ += buf_.size();
  buf_.clear();
  return absl::OkStatus();
}

absl::Status FrameFile::Write(EncodedFrame f) {
  util::MutexLock g(mu_);
  if (!error_.ok()) return error_;
  if (fd_ < 0) return absl::FailedPreconditionError("backup file closed");
  f.header.seq = seq_++;
  buf_ += EncodeFrameHeader(f.header);
  buf_ += f.stored;
  if (buf_.size() >= (4u << 20)) error_ = FlushLocked();
  return error_;
}

absl::StatusOr<uint64_t> FrameFile::Finish() {
  util::MutexLock g(mu_);
  if (error_.ok()) error_ = FlushLocked();
  if (error_.ok() && ::fsync(fd_) != 0) {
    error_ = io::ErrnoStatus(errno, "cannot sync backup file", path_);
  }
  if (::close(fd_) != 0 && error_.ok()) {
    error_ = io::ErrnoStatus(errno, "cannot close backup file", path_);
  }
  fd_ = -1;
  if (!error_.ok()) return error_;
  return bytes_;
}

uint64_t FrameFile::frames() const {
  util::MutexLock g(mu_);
  return seq_;
}

void FrameFile::Discard() {
  util::MutexLock g(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
}

// ------------------------------------------------------------------ FrameReader

FrameReader::~FrameReader() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<FrameReader>> FrameReader::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io::ErrnoStatus(errno, "cannot open backup file", path);
  std::unique_ptr<FrameReader> r(new FrameReader);
  r->path_ = path;
  r->fd_ = fd;
  struct stat st;
  if (::fstat(fd, &st) != 0) return io::ErrnoStatus(errno, "cannot stat backup file", path);
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("backup file ", path, " is a directory"));
  }
  r->size_ = static_cast<uint64_t>(st.st_size);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::string b(kFileHeaderSize, '\0');
  bool eof = false;
  if (absl::Status s = r->ReadExact(b.data(), b.size(), &eof); !s.ok()) return s;
  if (eof) {
    return absl::InvalidArgumentError(
        absl::StrCat("backup file ", path, " is not an EmberDB backup file (too short)"));
  }
  absl::StatusOr<FileHeader> h = DecodeFileHeader(b, absl::StrCat("backup file ", path));
  if (!h.ok()) return h.status();
  r->header_ = *h;
  return r;
}

absl::Status FrameReader::ReadExact(void* buf, size_t n, bool* eof) {
  size_t done = 0;
  *eof = false;
  while (done < n) {
    const ssize_t k = ::read(fd_, static_cast<char*>(buf) + done, n - done);
    if (k < 0) {
      if (errno == EINTR) continue;
      return io::ErrnoStatus(errno, "cannot read backup file", path_);
    }
    if (k == 0) {
      *eof = true;
      if (done == 0) return absl::OkStatus();
      return absl::DataLossError(absl::StrCat("backup file ", path_, " is truncated at offset ",
                                              offset_ + done, " (inside frame ", next_seq_, ")"));
    }
    done += static_cast<size_t>(k);
  }
  offset_ += n;
  return absl::OkStatus();
}

std::string FrameReader::Where() const {
  return absl::StrCat("backup file ", path_, ": frame ", next_seq_ == 0 ? 0 : next_seq_ - 1,
                      " at offset ", frame_offset_);
}

absl::StatusOr<bool> FrameReader::Next(FrameHeader* h, std::string* stored) {
  frame_offset_ = offset_;
  char hb[kFrameHeaderSize];
  bool eof = false;
  if (absl::Status s = ReadExact(hb, sizeof hb, &eof); !s.ok()) return s;
  if (eof) return false;
  ++next_seq_;
  absl::StatusOr<FrameHeader> d = DecodeFrameHeader(std::string_view(hb, sizeof hb), Where());
  if (!d.ok()) return d.status();
  if (d->seq != next_seq_ - 1) {
    return absl::DataLossError(absl::StrCat(Where(), ": frame number ", d->seq, " where frame ",
                                            next_seq_ - 1,
                                            " belongs (frames missing or out of order)"));
  }
  if (d->stored_len > size_ - offset_) {
    return absl::DataLossError(absl::StrCat(Where(), ": the file is truncated (the frame needs ",
                                            d->stored_len, " bytes, ", size_ - offset_,
                                            " are left)"));
  }
  stored->resize(d->stored_len);
  if (absl::Status s = ReadExact(stored->data(), stored->size(), &eof); !s.ok()) return s;
  if (eof && d->stored_len > 0) {
    return absl::DataLossError(absl::StrCat(Where(), ": the file is truncated"));
  }
  if (util::Crc32c(stored->data(), stored->size()) != d->payload_crc) {
    return absl::DataLossError(absl::StrCat(Where(), ": the frame's checksum does not match"));
  }
  *h = *d;
  return true;
}

// ------------------------------------------------------------------ catalog

std::string EncodeCatalog(const Catalog& c) {
  std::string out;
  util::PutVarint64(&out, c.tables.size());
  for (const TableSchema& t : c.tables) {
    PutString(&out, t.name);
    util::PutVarint64(&out, t.columns.size());
    for (const Column& col : t.columns) {
      PutString(&out, col.name);
      out.push_back(static_cast<char>(col.type));
      out.push_back(col.nullable ? 1 : 0);
      out.push_back(static_cast<char>(col.zstd_level));
    }
  }
  util::PutVarint64(&out, c.indexes.size());
  for (const CatalogIndex& ix : c.indexes) {
    PutString(&out, ix.schema.name);
    PutString(&out, ix.schema.table);
    util::PutVarint64(&out, ix.schema.columns.size());
    for (const std::string& col : ix.schema.columns) PutString(&out, col);
    out.push_back(ix.schema.unique ? 1 : 0);
    out.push_back(ix.active ? 1 : 0);
  }
  return out;
}

absl::StatusOr<Catalog> DecodeCatalog(std::string_view in) {
  Catalog c;
  uint64_t n;
  if (!util::GetVarint64(&in, &n) || n > in.size()) return Corrupt("catalog (table count)");
  c.tables.resize(n);
  for (TableSchema& t : c.tables) {
    uint64_t ncols;
    if (!GetString(&in, &t.name) || !util::GetVarint64(&in, &ncols) || ncols > in.size()) {
      return Corrupt("catalog (table)");
    }
    t.columns.resize(ncols);
    for (Column& col : t.columns) {
      uint8_t type, nullable, level;
      if (!GetString(&in, &col.name) || !GetByte(&in, &type) || !GetByte(&in, &nullable) ||
          !GetByte(&in, &level) || type < 1 || type > 5 || level > 22) {
        return Corrupt(absl::StrCat("catalog (a column of table ", t.name, ")"));
      }
      col.type = static_cast<ColumnType>(type);
      col.nullable = nullable != 0;
      col.zstd_level = level;
    }
  }
  if (!util::GetVarint64(&in, &n) || n > in.size()) return Corrupt("catalog (index count)");
  c.indexes.resize(n);
  for (CatalogIndex& ix : c.indexes) {
    uint64_t ncols;
    if (!GetString(&in, &ix.schema.name) || !GetString(&in, &ix.schema.table) ||
        !util::GetVarint64(&in, &ncols) || ncols > in.size()) {
      return Corrupt("catalog (index)");
    }
    ix.schema.columns.resize(ncols);
    for (std::string& col : ix.schema.columns) {
      if (!GetString(&in, &col)) return Corrupt("catalog (index column)");
    }
    uint8_t unique, active;
    if (!GetByte(&in, &unique) || !GetByte(&in, &active)) return Corrupt("catalog (index)");
    ix.schema.unique = unique != 0;
    ix.active = active != 0;
  }
  if (!in.empty()) return Corrupt("catalog (bytes after its end)");
  return c;
}

// ------------------------------------------------------------------ rows

void AppendNull(std::string* out) { out->push_back(kNull); }
void AppendInt(std::string* out, int64_t v) {
  out->push_back(kInt);
  util::PutVarint64(out, util::ZigZag(v));
}
void AppendDouble(std::string* out, double v) {
  out->push_back(kDouble);
  char b[8];
  std::memcpy(b, &v, 8);  // the host is little-endian (coding.h checks)
  out->append(b, 8);
}
void AppendString(std::string* out, std::string_view v) {
  out->push_back(kString);
  PutString(out, v);
}
void AppendBlobBytes(std::string* out, std::string_view v) {
  out->push_back(kBlobBytes);
  PutString(out, v);
}
void AppendBlobPieces(std::string* out, uint64_t blob_no) {
  out->push_back(kBlobPieces);
  util::PutVarint64(out, blob_no);
}

absl::Status NextValue(std::string_view* in, ColumnType type, PortableValue* v) {
  uint8_t tag;
  if (!GetByte(in, &tag)) return Corrupt("row (cut short)");
  v->tag = static_cast<ValueTag>(tag);
  bool fits = false;
  switch (tag) {
    case kNull: fits = true; break;
    case kInt: {
      uint64_t z;
      if (!util::GetVarint64(in, &z)) return Corrupt("row (int64)");
      v->i = util::UnZigZag(z);
      fits = type == ColumnType::kInt64;
      break;
    }
    case kDouble:
      if (in->size() < 8) return Corrupt("row (double)");
      std::memcpy(&v->d, in->data(), 8);
      in->remove_prefix(8);
      fits = type == ColumnType::kDouble;
      break;
    case kString:
    case kBlobBytes: {
      uint64_t n;
      if (!util::GetVarint64(in, &n) || n > in->size()) return Corrupt("row (bytes)");
      v->bytes = in->substr(0, n);
      in->remove_prefix(n);
      fits = tag == kString ? (type == ColumnType::kString || type == ColumnType::kBytes)
                            : type == ColumnType::kBlob;
      break;
    }
    case kBlobPieces:
      if (!util::GetVarint64(in, &v->blob_no)) return Corrupt("row (BLOB number)");
      fits = type == ColumnType::kBlob;
      break;
    default: return Corrupt(absl::StrCat("row (unknown value tag ", tag, ")"));
  }
  if (!fits) return Corrupt(absl::StrCat("row (value tag ", tag, " in a column of another type)"));
  return absl::OkStatus();
}

void EncodeBlobPieceHeader(const BlobPiece& p, std::string* out) {
  util::PutVarint64(out, p.blob_no);
  util::PutVarint64(out, p.table);
  util::PutVarint64(out, p.column);
  util::PutVarint64(out, p.total);
  util::PutVarint64(out, p.offset);
}

absl::StatusOr<BlobPiece> DecodeBlobPiece(std::string_view in) {
  BlobPiece p;
  if (!util::GetVarint64(&in, &p.blob_no) || !util::GetVarint64(&in, &p.table) ||
      !util::GetVarint64(&in, &p.column) || !util::GetVarint64(&in, &p.total) ||
      !util::GetVarint64(&in, &p.offset) || p.offset > p.total || in.size() > p.total - p.offset) {
    return Corrupt("BLOB piece");
  }
  p.bytes = in;
  return p;
}

std::string EncodeEnd(const EndTotals& e) {
  std::string out;
  util::PutVarint64(&out, e.frames);
  util::PutVarint64(&out, e.rows.size());
  for (uint64_t r : e.rows) util::PutVarint64(&out, r);
  util::PutVarint64(&out, e.blobs);
  util::PutVarint64(&out, e.blob_bytes);
  return out;
}

absl::StatusOr<EndTotals> DecodeEnd(std::string_view in) {
  EndTotals e;
  uint64_t n;
  if (!util::GetVarint64(&in, &e.frames) || !util::GetVarint64(&in, &n) || n > in.size()) {
    return Corrupt("end frame");
  }
  e.rows.resize(n);
  for (uint64_t& r : e.rows) {
    if (!util::GetVarint64(&in, &r)) return Corrupt("end frame");
  }
  if (!util::GetVarint64(&in, &e.blobs) || !util::GetVarint64(&in, &e.blob_bytes) || !in.empty()) {
    return Corrupt("end frame");
  }
  return e;
}

}  // namespace ember::backup
