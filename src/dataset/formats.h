// Converting users' data into data set records (import) and back (export).
//
// Formats:
//   text    one record per line, the line's bytes as they are (without the '\n')
//   list    a file of "relative/path<TAB>label" lines; each record is an Example holding the
//           file's bytes, its path and label
//   idx     the MNIST family: --images and --labels IDX files (gzip or not); each record is an
//           Example with the pixels, their shape and the numeric label
//   csv     comma-separated rows with one label column (by name with --header, or by index);
//           the other columns must be numbers; each record is an Example (label, values)
//   libsvm  "label index:value ..." rows; each record is an Example (label, ids, values)
// Every input may be gzip-compressed. Bad input is refused with the file and line (or byte)
// where it went wrong.
//
// Export formats: text, list (files plus list.txt), idx (images and labels IDX files), csv,
// libsvm, and raw (each record as a 4-byte little-endian length and the bytes).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "dataset/dataset.h"
#include "tessera/status.h"

namespace tessera::dataset {

struct ImportOptions {
  std::string format;              // text, list, idx, csv, libsvm
  std::string input;               // text, list, csv, libsvm: the file ("-": standard input)
  std::string images, labels;      // idx
  std::string label_column = "0";  // csv: a column name (with header) or 0-based index
  bool header = false;             // csv: the first row names the columns
};

using RecordSink = std::function<Status(std::string_view record)>;
// Called now and then with input bytes consumed, total input bytes (0: unknown), records so far.
using ImportProgress = std::function<void(int64_t bytes, int64_t total, int64_t records)>;

// The record type a format produces: "line" (text) or "example".
StatusOr<std::string> RecordTypeFor(const std::string& format);

// Reads the input and hands each record to `sink`; fills `meta` (shape, columns, ...).
Status Import(const ImportOptions& options, const RecordSink& sink, nlohmann::json* meta,
              const ImportProgress& progress);

struct ExportOptions {
  std::string format;  // text, list, idx, csv, libsvm, raw ("" = the data set's own format)
  std::string out;     // a file ("-": standard output) or, for list and idx, a directory
};

// Writes every record of the data set, in order, checking every chunk; returns records written.
StatusOr<int64_t> Export(DatasetReader& reader, const ExportOptions& options,
                         const std::function<void(int64_t records)>& progress);

}  // namespace tessera::dataset
