// Importers: users' data into records (see formats.h).
#include <cmath>
#include <filesystem>

#include "common/files.h"
#include "common/strings.h"
#include "dataset/formats.h"
#include "dataset/input.h"
#include "tessera/example.pb.h"

namespace tessera::dataset {
namespace {

namespace fs = std::filesystem;

std::string At(const std::string& file, int64_t line) { return file + " line " + std::to_string(line); }

// A data value: a number that is finite as a float. NaN, infinities and numbers past float's
// range are refused like any other malformed value (they would poison a model).
StatusOr<float> FiniteValue(std::string_view text, const std::string& where) {
  auto v = ParseDouble(text, "");
  if (!v.ok()) return Status::InvalidArgument(where + ": '" + std::string(text) + "' is not a number");
  const float f = static_cast<float>(*v);
  if (!std::isfinite(f)) {
    return Status::InvalidArgument(where + ": '" + std::string(text) + "' is not a finite number" +
                                   (std::isfinite(*v) ? " (past the range of float32)" : ""));
  }
  return f;
}

Status ImportText(const ImportOptions& o, const RecordSink& sink, const ImportProgress& progress) {
  TESSERA_ASSIGN_OR_RETURN(auto in, InputFile::Open(o.input));
  std::string line;
  int64_t n = 0;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, in->ReadLine(&line));
    if (!more) break;
    TESSERA_RETURN_IF_ERROR(sink(line));
    if (++n % 4096 == 0) progress(in->position(), in->size(), n);
  }
  return Status::OK();
}


Status ImportList(const ImportOptions& o, const RecordSink& sink, const ImportProgress& progress) {
  TESSERA_ASSIGN_OR_RETURN(auto in, InputFile::Open(o.input));
  fs::path base = o.input == "-" ? fs::current_path() : fs::path(o.input).parent_path();
  std::string line, record;
  int64_t n = 0, lineno = 0;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, in->ReadLine(&line));
    if (!more) break;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (Trim(line).empty()) continue;
    size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      return Status::InvalidArgument(At(o.input, lineno) + ": expected 'path<TAB>label'");
    }
    std::string path = line.substr(0, tab);
    fs::path rel(path);
    if (rel.is_absolute() || path.find("..") != std::string::npos || path.empty()) {
      return Status::InvalidArgument(At(o.input, lineno) + ": '" + path +
                                     "' must be a path relative to the list, without '..'");
    }
    auto bytes = ReadFile((base / rel).string());
    if (!bytes.ok()) return bytes.status().WithContext(At(o.input, lineno));
    data::Example ex;
    ex.set_path(path);
    ex.set_label(line.substr(tab + 1));
    ex.set_data(std::move(*bytes));
    ex.SerializeToString(&record);
    TESSERA_RETURN_IF_ERROR(sink(record));
    if (++n % 64 == 0) progress(in->position(), in->size(), n);
  }
  return Status::OK();
}

// IDX header: 0, 0, type, dims, then dims big-endian u32.
StatusOr<std::vector<uint32_t>> ReadIdxHeader(InputFile& in, int want_dims) {
  unsigned char magic[4];
  TESSERA_RETURN_IF_ERROR(in.ReadExact(magic, 4, "the IDX header"));
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08) {
    return Status::InvalidArgument("'" + in.path() + "' is not an IDX file of unsigned bytes (magic " +
                                   std::to_string(magic[2]) + "/" + std::to_string(magic[3]) + ")");
  }
  if (magic[3] != want_dims) {
    return Status::InvalidArgument("'" + in.path() + "' has " + std::to_string(magic[3]) +
                                   " dimensions, expected " + std::to_string(want_dims));
  }
  std::vector<uint32_t> dims(want_dims);
  for (auto& d : dims) {
    unsigned char b[4];
    TESSERA_RETURN_IF_ERROR(in.ReadExact(b, 4, "the IDX header"));
    d = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }
  return dims;
}

Status ImportIdx(const ImportOptions& o, const RecordSink& sink, nlohmann::json* meta,
                 const ImportProgress& progress) {
  if (o.images.empty() || o.labels.empty()) {
    return Status::InvalidArgument("the idx format needs --images FILE and --labels FILE");
  }
  TESSERA_ASSIGN_OR_RETURN(auto images, InputFile::Open(o.images));
  TESSERA_ASSIGN_OR_RETURN(auto labels, InputFile::Open(o.labels));
  TESSERA_ASSIGN_OR_RETURN(auto idims, ReadIdxHeader(*images, 3));
  TESSERA_ASSIGN_OR_RETURN(auto ldims, ReadIdxHeader(*labels, 1));
  if (idims[0] != ldims[0]) {
    return Status::InvalidArgument("'" + o.images + "' has " + std::to_string(idims[0]) + " images but '" +
                                   o.labels + "' has " + std::to_string(ldims[0]) + " labels");
  }
  (*meta)["count"] = idims[0];
  (*meta)["rows"] = idims[1];
  (*meta)["cols"] = idims[2];
  const size_t pixels = static_cast<size_t>(idims[1]) * idims[2];
  std::string pix(pixels, '\0'), record;
  for (uint32_t i = 0; i < idims[0]; ++i) {
    unsigned char label;
    TESSERA_RETURN_IF_ERROR(images->ReadExact(pix.data(), pixels, "image " + std::to_string(i)));
    TESSERA_RETURN_IF_ERROR(labels->ReadExact(&label, 1, "label " + std::to_string(i)));
    data::Example ex;
    ex.set_label_id(label);
    ex.set_data(pix);
    ex.add_shape(static_cast<int32_t>(idims[1]));
    ex.add_shape(static_cast<int32_t>(idims[2]));
    ex.SerializeToString(&record);
    TESSERA_RETURN_IF_ERROR(sink(record));
    if (i % 1024 == 0) progress(images->position(), images->size(), i);
  }
  return Status::OK();
}

Status ImportCsv(const ImportOptions& o, const RecordSink& sink, nlohmann::json* meta,
                 const ImportProgress& progress) {
  TESSERA_ASSIGN_OR_RETURN(auto in, InputFile::Open(o.input));
  std::string line, record;
  int64_t lineno = 0, n = 0;
  int label_col = -1;
  size_t columns = 0;
  if (o.header) {
    TESSERA_ASSIGN_OR_RETURN(bool more, in->ReadLine(&line));
    if (!more) return Status::InvalidArgument(o.input + " is empty (a header was expected)");
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto names = Split(line, ',', false);
    columns = names.size();
    for (size_t i = 0; i < names.size(); ++i) {
      if (std::string(Trim(names[i])) == o.label_column) label_col = static_cast<int>(i);
    }
    (*meta)["columns"] = names;
  }
  if (label_col < 0) {
    auto idx = ParseInt64(o.label_column, "--label-column");
    if (!idx.ok()) {
      return Status::InvalidArgument("--label-column '" + o.label_column + "' is not a column name" +
                                     (o.header ? "" : " (pass --header to use names)") + " nor an index");
    }
    label_col = static_cast<int>(*idx);
  }
  (*meta)["label_column"] = label_col;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, in->ReadLine(&line));
    if (!more) break;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (Trim(line).empty()) continue;
    auto cells = Split(line, ',', false);
    if (columns == 0) columns = cells.size();
    if (cells.size() != columns) {
      return Status::InvalidArgument(At(o.input, lineno) + ": " + std::to_string(cells.size()) +
                                     " columns, expected " + std::to_string(columns));
    }
    if (label_col >= static_cast<int>(cells.size())) {
      return Status::InvalidArgument(At(o.input, lineno) + ": no column " + std::to_string(label_col) +
                                     " for the label");
    }
    data::Example ex;
    for (size_t c = 0; c < cells.size(); ++c) {
      std::string_view cell = Trim(cells[c]);
      if (static_cast<int>(c) == label_col) {
        ex.set_label(std::string(cell));
        continue;
      }
      TESSERA_ASSIGN_OR_RETURN(float v, FiniteValue(cell, At(o.input, lineno) + " column " + std::to_string(c)));
      ex.add_values(v);
    }
    ex.SerializeToString(&record);
    TESSERA_RETURN_IF_ERROR(sink(record));
    if (++n % 4096 == 0) progress(in->position(), in->size(), n);
  }
  return Status::OK();
}

Status ImportLibsvm(const ImportOptions& o, const RecordSink& sink, const ImportProgress& progress) {
  TESSERA_ASSIGN_OR_RETURN(auto in, InputFile::Open(o.input));
  std::string line, record;
  int64_t lineno = 0, n = 0;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, in->ReadLine(&line));
    if (!more) break;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t hash = line.find('#');
    std::string_view body = Trim(std::string_view(line).substr(0, hash));
    if (body.empty()) continue;
    auto tokens = Split(body, ' ');
    data::Example ex;
    ex.set_label(tokens[0]);
    TESSERA_RETURN_IF_ERROR(FiniteValue(tokens[0], At(o.input, lineno) + ": label").status());
    for (size_t t = 1; t < tokens.size(); ++t) {
      size_t colon = tokens[t].find(':');
      auto id = colon == std::string::npos ? StatusOr<uint64_t>(Status::InvalidArgument(""))
                                           : ParseUint64(std::string_view(tokens[t]).substr(0, colon), "");
      if (!id.ok() || colon + 1 == tokens[t].size()) {
        return Status::InvalidArgument(At(o.input, lineno) + ": '" + tokens[t] + "' is not index:value");
      }
      TESSERA_ASSIGN_OR_RETURN(float val, FiniteValue(std::string_view(tokens[t]).substr(colon + 1),
                                                      At(o.input, lineno) + ": feature " + std::to_string(*id) +
                                                          " value"));
      ex.add_feature_ids(*id);
      ex.add_feature_values(val);
    }
    ex.SerializeToString(&record);
    TESSERA_RETURN_IF_ERROR(sink(record));
    if (++n % 4096 == 0) progress(in->position(), in->size(), n);
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::string> RecordTypeFor(const std::string& format) {
  if (format == "text") return std::string("line");
  if (format == "list" || format == "idx" || format == "csv" || format == "libsvm")
    return std::string("example");
  return Status::InvalidArgument("unknown format '" + format + "' (use text, list, idx, csv or libsvm)");
}

Status Import(const ImportOptions& o, const RecordSink& sink, nlohmann::json* meta,
              const ImportProgress& progress) {
  TESSERA_RETURN_IF_ERROR(RecordTypeFor(o.format).status());
  if (o.format != "idx" && o.input.empty())
    return Status::InvalidArgument("no input file given (--input FILE, or - for stdin)");
  if (o.format == "text") return ImportText(o, sink, progress);
  if (o.format == "list") return ImportList(o, sink, progress);
  if (o.format == "idx") return ImportIdx(o, sink, meta, progress);
  if (o.format == "csv") return ImportCsv(o, sink, meta, progress);
  return ImportLibsvm(o, sink, progress);
}

}  // namespace tessera::dataset
