// Exporters: data set records back into files (see formats.h).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "common/files.h"
#include "dataset/formats.h"
#include "tessera/example.pb.h"

namespace tessera::dataset {
namespace {

namespace fs = std::filesystem;

// A buffered output file or standard output.
class Output {
 public:
  static StatusOr<std::unique_ptr<Output>> Open(const std::string& path) {
    std::FILE* f = path == "-" ? stdout : std::fopen(path.c_str(), "wb");
    if (!f) return Status::Unavailable("cannot write '" + path + "': " + std::strerror(errno));
    return std::unique_ptr<Output>(new Output(path, f));
  }
  ~Output() {
    if (f_ && f_ != stdout) std::fclose(f_);
  }
  Status Write(std::string_view s) {
    if (std::fwrite(s.data(), 1, s.size(), f_) != s.size()) {
      return Status::Unavailable("write to '" + path_ + "' failed: " + std::strerror(errno));
    }
    return Status::OK();
  }
  Status Close() {
    if (std::fflush(f_) != 0)
      return Status::Unavailable("write to '" + path_ + "' failed: " + std::strerror(errno));
    if (f_ != stdout) {
      int rc = std::fclose(f_);
      f_ = nullptr;
      if (rc != 0) return Status::Unavailable("closing '" + path_ + "' failed");
    }
    return Status::OK();
  }

 private:
  Output(std::string path, std::FILE* f) : path_(std::move(path)), f_(f) {}
  std::string path_;
  std::FILE* f_;
};

Status ParseExample(std::string_view rec, data::Example* ex, int64_t index) {
  if (!ex->ParseFromArray(rec.data(), static_cast<int>(rec.size()))) {
    return Status::DataLoss("record " + std::to_string(index) + " is not a valid Example");
  }
  return Status::OK();
}

std::string Num(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

void PutBigEndian(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

}  // namespace

StatusOr<int64_t> Export(DatasetReader& reader, const ExportOptions& options,
                         const std::function<void(int64_t records)>& progress) {
  const Manifest& m = reader.manifest();
  std::string format = options.format.empty() ? m.format : options.format;
  if (options.out.empty()) return Status::InvalidArgument("no output given (--out PATH, or - for stdout)");
  const bool examples = m.record_type == "example";
  if (format == "text" && examples) {
    return Status::InvalidArgument("data set '" + m.name + "' holds " + m.format +
                                   " examples, not text lines; use --format " + m.format + " or raw");
  }
  if ((format == "list" || format == "idx" || format == "csv" || format == "libsvm") && !examples) {
    return Status::InvalidArgument("data set '" + m.name + "' holds text lines; use --format text or raw");
  }
  if (format != "text" && format != "raw" && format != "list" && format != "idx" && format != "csv" &&
      format != "libsvm") {
    return Status::InvalidArgument("unknown download format '" + format +
                                   "' (use text, list, idx, csv, libsvm or raw)");
  }

  std::unique_ptr<Output> out, labels;
  std::string dir;
  if (format == "list" || format == "idx") {
    dir = options.out;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status::Unavailable("cannot create '" + dir + "': " + ec.message());
  }
  if (format == "list") {
    TESSERA_ASSIGN_OR_RETURN(out, Output::Open(dir + "/list.txt"));
  } else if (format == "idx") {
    TESSERA_ASSIGN_OR_RETURN(out, Output::Open(dir + "/images-idx3-ubyte"));
    TESSERA_ASSIGN_OR_RETURN(labels, Output::Open(dir + "/labels-idx1-ubyte"));
    int64_t rows = m.meta.value("rows", 0), cols = m.meta.value("cols", 0);
    std::string h1 = std::string("\0\0\x08\x03", 4), h2 = std::string("\0\0\x08\x01", 4);
    PutBigEndian(&h1, static_cast<uint32_t>(m.records));
    PutBigEndian(&h1, static_cast<uint32_t>(rows));
    PutBigEndian(&h1, static_cast<uint32_t>(cols));
    PutBigEndian(&h2, static_cast<uint32_t>(m.records));
    TESSERA_RETURN_IF_ERROR(out->Write(h1));
    TESSERA_RETURN_IF_ERROR(labels->Write(h2));
  } else {
    TESSERA_ASSIGN_OR_RETURN(out, Output::Open(options.out));
    if (format == "csv" && m.meta.contains("columns")) {
      std::string header;
      for (const auto& c : m.meta["columns"]) header += (header.empty() ? "" : ",") + c.get<std::string>();
      TESSERA_RETURN_IF_ERROR(out->Write(header + "\n"));
    }
  }

  int64_t index = 0;
  std::vector<std::string_view> recs;
  std::string line;
  for (size_t c = 0; c < m.chunks.size(); ++c) {
    TESSERA_RETURN_IF_ERROR(reader.ReadChunk(c, &recs));
    for (std::string_view rec : recs) {
      line.clear();
      if (format == "text") {
        line.append(rec);
        line.push_back('\n');
      } else if (format == "raw") {
        uint32_t n = static_cast<uint32_t>(rec.size());
        line.append(reinterpret_cast<const char*>(&n), 4);
        line.append(rec);
      } else {
        data::Example ex;
        TESSERA_RETURN_IF_ERROR(ParseExample(rec, &ex, index));
        if (format == "list") {
          fs::path rel(ex.path());
          if (ex.path().empty() || rel.is_absolute() || ex.path().find("..") != std::string::npos) {
            return Status::DataLoss("record " + std::to_string(index) + " has an unsafe path '" + ex.path() +
                                    "'");
          }
          fs::path target = fs::path(dir) / rel;
          std::error_code ec;
          fs::create_directories(target.parent_path(), ec);
          TESSERA_RETURN_IF_ERROR(WriteFileAtomic(target.string(), ex.data()));
          line = ex.path() + "\t" + ex.label() + "\n";
        } else if (format == "idx") {
          line = ex.data();
          char label = static_cast<char>(ex.label_id());
          TESSERA_RETURN_IF_ERROR(labels->Write(std::string_view(&label, 1)));
        } else if (format == "csv") {
          int label_col = m.meta.value("label_column", 0);
          int v = 0;
          for (int col = 0; col < ex.values_size() + 1; ++col) {
            if (col) line.push_back(',');
            line += col == label_col ? ex.label() : Num(ex.values(v++));
          }
          line.push_back('\n');
        } else {  // libsvm
          line = ex.label();
          for (int k = 0; k < ex.feature_ids_size(); ++k) {
            line += " " + std::to_string(ex.feature_ids(k)) + ":" + Num(ex.feature_values(k));
          }
          line.push_back('\n');
        }
      }
      TESSERA_RETURN_IF_ERROR(out->Write(line));
      ++index;
    }
    progress(index);
  }
  if (index != m.records) {
    return Status::DataLoss("data set '" + m.name + "' yielded " + std::to_string(index) +
                            " records; its manifest says " + std::to_string(m.records));
  }
  TESSERA_RETURN_IF_ERROR(out->Close());
  if (labels) TESSERA_RETURN_IF_ERROR(labels->Close());
  return index;
}

}  // namespace tessera::dataset
