// RecordIO chunks: the unit of storage, integrity checking and task assignment.
//
// On disk a chunk is a 40-byte header followed by `stored_size` bytes:
//   offset 0  u32 magic "TRIO" (0x4f495254)       offset 20 u64 stored_size
//   offset 4  u8  format version (1)             offset 28 u32 CRC32C of the stored bytes
//   offset 5  u8  compressor (0 none, 1 zstd)    offset 32 u32 CRC32C of bytes 0..31
//   offset 6  u16 reserved (0)                   offset 36 u32 reserved (0)
//   offset 8  u32 record count
//   offset 12 u64 raw_size (bytes of the record section before compression)
// All little-endian. The record section is, per record, a varint length then the bytes. A
// chunk can be read and checked alone, so a corrupt one is detected (both CRCs, sizes,
// counts) and named by file, chunk index and offset.
//
// Pure functions over memory; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/status.h"

namespace tessera::recordio {

constexpr uint32_t kMagic = 0x4f495254;  // "TRIO" little-endian
constexpr size_t kHeaderSize = 40;
constexpr uint64_t kMaxStoredSize = uint64_t{1} << 31;  // 2 GiB: anything larger is corruption

enum class Compressor : uint8_t { kNone = 0, kZstd = 1 };
StatusOr<Compressor> ParseCompressor(std::string_view name);  // "none", "zstd"
const char* CompressorName(Compressor c);

struct ChunkHeader {
  Compressor compressor = Compressor::kNone;
  uint32_t records = 0;
  uint64_t raw_size = 0;
  uint64_t stored_size = 0;
  uint32_t crc = 0;  // of the stored bytes
};

// Encodes `records` into one chunk (header + stored bytes), appended to *out.
void EncodeChunk(const std::vector<std::string>& records, Compressor compressor, std::string* out,
                 ChunkHeader* header = nullptr);

// Parses and checks a header. `where` names the chunk in error messages ("part-00001.rio chunk 3
// at offset 1048616").
StatusOr<ChunkHeader> DecodeHeader(std::string_view bytes, const std::string& where);

// Checks the stored bytes against the header and decodes the records into *records (views into
// *scratch, which holds the decompressed section).
Status DecodeBody(const ChunkHeader& h, std::string_view stored, const std::string& where,
                  std::string* scratch, std::vector<std::string_view>* records);

}  // namespace tessera::recordio
