// RecordIO chunk encoding (see chunk.h).
#include "recordio/chunk.h"

#include <zstd.h>

#include <cstring>

#include "common/bytes.h"
#include "common/crc32c.h"

namespace tessera::recordio {
namespace {

void Put32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void Put64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t Get32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Get64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

StatusOr<Compressor> ParseCompressor(std::string_view name) {
  if (name == "none") return Compressor::kNone;
  if (name == "zstd") return Compressor::kZstd;
  return Status::InvalidArgument("unknown compressor '" + std::string(name) + "' (use none or zstd)");
}

const char* CompressorName(Compressor c) { return c == Compressor::kZstd ? "zstd" : "none"; }

void EncodeChunk(const std::vector<std::string>& records, Compressor compressor, std::string* out,
                 ChunkHeader* header) {
  std::string raw;
  size_t total = 0;
  for (const auto& r : records) total += r.size() + 5;
  raw.reserve(total);
  ByteWriter w(&raw);
  for (const auto& r : records) w.PutString(r);
  std::string compressed;
  std::string_view stored = raw;
  if (compressor == Compressor::kZstd) {
    compressed.resize(ZSTD_compressBound(raw.size()));
    size_t n = ZSTD_compress(compressed.data(), compressed.size(), raw.data(), raw.size(), 3);
    if (ZSTD_isError(n)) {
      compressor = Compressor::kNone;  // cannot happen with a bound-sized buffer; store raw
    } else {
      compressed.resize(n);
      stored = compressed;
    }
  }
  ChunkHeader h;
  h.compressor = compressor;
  h.records = static_cast<uint32_t>(records.size());
  h.raw_size = raw.size();
  h.stored_size = stored.size();
  h.crc = Crc32c(stored.data(), stored.size());
  char hdr[kHeaderSize] = {0};
  Put32(hdr, kMagic);
  hdr[4] = 1;
  hdr[5] = static_cast<char>(compressor);
  Put32(hdr + 8, h.records);
  Put64(hdr + 12, h.raw_size);
  Put64(hdr + 20, h.stored_size);
  Put32(hdr + 28, h.crc);
  Put32(hdr + 32, Crc32c(hdr, 32));
  out->append(hdr, kHeaderSize);
  out->append(stored);
  if (header) *header = h;
}

StatusOr<ChunkHeader> DecodeHeader(std::string_view b, const std::string& where) {
  if (b.size() < kHeaderSize) {
    return Status::DataLoss(where + ": truncated chunk header (" + std::to_string(b.size()) + " of " +
                            std::to_string(kHeaderSize) + " bytes)");
  }
  const char* p = b.data();
  if (Get32(p) != kMagic)
    return Status::DataLoss(where + ": bad chunk magic (not a RecordIO chunk, or corrupt)");
  if (Get32(p + 32) != Crc32c(p, 32)) return Status::DataLoss(where + ": chunk header checksum mismatch");
  if (p[4] != 1) return Status::DataLoss(where + ": unsupported chunk version " + std::to_string(p[4]));
  ChunkHeader h;
  uint8_t c = static_cast<uint8_t>(p[5]);
  if (c > 1) return Status::DataLoss(where + ": unknown compressor " + std::to_string(c));
  h.compressor = static_cast<Compressor>(c);
  h.records = Get32(p + 8);
  h.raw_size = Get64(p + 12);
  h.stored_size = Get64(p + 20);
  h.crc = Get32(p + 28);
  if (p[6] || p[7] || Get32(p + 36)) return Status::DataLoss(where + ": reserved header bytes are not zero");
  if (h.stored_size > kMaxStoredSize || h.raw_size > kMaxStoredSize) {
    return Status::DataLoss(where + ": impossible chunk size");
  }
  return h;
}

Status DecodeBody(const ChunkHeader& h, std::string_view stored, const std::string& where,
                  std::string* scratch, std::vector<std::string_view>* records) {
  if (stored.size() != h.stored_size) {
    return Status::DataLoss(where + ": truncated chunk (" + std::to_string(stored.size()) + " of " +
                            std::to_string(h.stored_size) + " bytes)");
  }
  if (Crc32c(stored.data(), stored.size()) != h.crc)
    return Status::DataLoss(where + ": chunk data checksum mismatch");
  std::string_view raw = stored;
  if (h.compressor == Compressor::kZstd) {
    scratch->resize(h.raw_size);
    size_t n = ZSTD_decompress(scratch->data(), scratch->size(), stored.data(), stored.size());
    if (ZSTD_isError(n) || n != h.raw_size)
      return Status::DataLoss(where + ": zstd data does not decompress");
    raw = *scratch;
  } else if (h.raw_size != h.stored_size) {
    return Status::DataLoss(where + ": raw and stored sizes differ in an uncompressed chunk");
  }
  records->clear();
  records->reserve(h.records);
  ByteReader r(raw);
  for (uint32_t i = 0; i < h.records; ++i) {
    std::string_view rec;
    if (!r.GetView(&rec)) {
      return Status::DataLoss(where + ": record " + std::to_string(i) + " runs past the end of the chunk");
    }
    records->push_back(rec);
  }
  if (!r.done()) {
    return Status::DataLoss(where + ": " + std::to_string(r.remaining()) +
                            " stray bytes after the last record");
  }
  return Status::OK();
}

}  // namespace tessera::recordio
