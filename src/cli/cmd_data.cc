// `tessera upload`, `tessera download`, `tessera dataset ls|info`: data sets in a store.
#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <ctime>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "common/clock.h"
#include "common/flag_names.h"
#include "common/progress.h"
#include "common/strings.h"
#include "dataset/dataset.h"
#include "dataset/formats.h"

namespace tessera::cli {
namespace {

struct UploadFlags {
  std::string store, name;
  dataset::ImportOptions import;
  int parts = 4;
  std::string chunk_size = "1048576";
  std::string compressor = "zstd";
  bool force = false;
  bool append = false;
};

struct DownloadFlags {
  std::string store, name, format, out;
};

std::string Time(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&t));
  return buf;
}

int RunUpload(const UploadFlags& f) {
  std::atomic<bool> interrupted{false};
  SignalWatcher signals([&](int) { interrupted = true; });
  auto comp = recordio::ParseCompressor(f.compressor);
  if (!comp.ok()) return Fail("upload", comp.status());
  auto chunk = ParseInt64(f.chunk_size, "--chunk-size");
  if (!chunk.ok()) return Fail("upload", chunk.status());
  auto type = dataset::RecordTypeFor(f.import.format);
  if (!type.ok()) return Fail("upload", type.status());
  dataset::WriterOptions wo;
  wo.parts = f.parts;
  wo.compressor = *comp;
  wo.chunk_bytes = static_cast<size_t>(*chunk);
  wo.force = f.force;
  wo.append = f.append;
  auto writer = dataset::DatasetWriter::Create(f.store, f.name, f.import.format, *type, wo);
  if (!writer.ok()) return Fail("upload", writer.status());
  ProgressBar bar("upload " + f.name, 0, "bytes");
  auto start = Now();
  nlohmann::json meta = nlohmann::json::object();
  int64_t total_seen = 0;
  Status s = dataset::Import(
      f.import,
      [&](std::string_view rec) -> Status {
        if (interrupted) return Status::Cancelled("interrupted; nothing was stored");
        return (*writer)->Add(rec);
      },
      &meta,
      [&](int64_t bytes, int64_t total, int64_t records) {
        if (total != total_seen) {
          bar = ProgressBar("upload " + f.name, total, "bytes");
          total_seen = total;
        }
        bar.Update(bytes, std::to_string(records) + " records");
      });
  if (s.ok()) s = (*writer)->Commit(meta);
  if (!s.ok()) {
    bar.Finish("upload of " + f.name + " failed; nothing was stored");
    return Fail("upload", s);
  }
  double secs = std::chrono::duration<double>(Now() - start).count();
  auto m = dataset::LoadManifest(f.store + "/" + f.name);
  if (f.append) {
    bar.Finish("appended " + std::to_string((*writer)->records()) + " records to " + f.store + "/" + f.name +
               " (now " + std::to_string(m.ok() ? m->records : 0) + " records in " +
               std::to_string(m.ok() ? m->chunks.size() : 0) + " chunks) in " + fmt::format("{:.1f}", secs) +
               " s");
    return 0;
  }
  bar.Finish("uploaded " + std::to_string((*writer)->records()) + " records into " + f.store + "/" + f.name +
             " (" + std::to_string(m.ok() ? m->chunks.size() : 0) + " chunks in " + std::to_string(f.parts) +
             " parts, " + HumanBytes(static_cast<double>((*writer)->bytes_written())) + ", " + f.compressor +
             ") in " + fmt::format("{:.1f}", secs) + " s");
  return 0;
}

int RunDownload(const DownloadFlags& f) {
  auto reader = dataset::DatasetReader::Open(f.store, f.name);
  if (!reader.ok()) return Fail("download", reader.status());
  ProgressBar bar("download " + f.name, (*reader)->manifest().records, "records");
  dataset::ExportOptions eo;
  eo.format = f.format;
  eo.out = f.out;
  auto n = dataset::Export(**reader, eo, [&](int64_t records) { bar.Update(records); });
  if (!n.ok()) {
    bar.Finish("download of " + f.name + " failed");
    return Fail("download", n.status());
  }
  bar.Finish("downloaded " + std::to_string(*n) + " records of " + f.name + " to " + f.out +
             " (every chunk's checksum verified)");
  return 0;
}

int RunLs(const std::string& store) {
  int unfinished = 0;
  auto list = dataset::ListDatasets(store, &unfinished);
  if (!list.ok()) return Fail("dataset ls", list.status());
  if (list->empty())
    std::printf("no data sets in %s\n", store.c_str());
  else
    std::printf("%-24s %-8s %12s %8s %6s %10s  %s\n", "NAME", "FORMAT", "RECORDS", "CHUNKS", "PARTS", "SIZE",
                "CREATED");
  for (const auto& m : *list) {
    std::printf("%-24s %-8s %12lld %8zu %6d %10s  %s\n", m.name.c_str(), m.format.c_str(),
                static_cast<long long>(m.records), m.chunks.size(), m.parts,
                HumanBytes(static_cast<double>(m.bytes)).c_str(), Time(m.created_ms).c_str());
  }
  if (unfinished > 0) {
    std::printf("(%d unfinished uploads: hidden .tmp-*/.trash-* directories in %s can be removed)\n",
                unfinished, store.c_str());
  }
  return 0;
}

int RunInfo(const std::string& store, const std::string& name) {
  auto m = dataset::LoadManifest(store + "/" + name);
  if (!m.ok()) return Fail("dataset info", m.status());
  uint64_t raw = 0, smallest = UINT64_MAX, largest = 0;
  for (const auto& c : m->chunks) {
    raw += c.raw_bytes;
    smallest = std::min<uint64_t>(smallest, c.records);
    largest = std::max<uint64_t>(largest, c.records);
  }
  std::printf("data set     %s\n", m->name.c_str());
  std::printf("location     %s/%s\n", store.c_str(), name.c_str());
  std::printf("format       %s (%s records)\n", m->format.c_str(), m->record_type.c_str());
  std::printf("records      %lld\n", static_cast<long long>(m->records));
  std::printf("chunks       %zu (%llu..%llu records each, target %s raw)\n", m->chunks.size(),
              static_cast<unsigned long long>(m->chunks.empty() ? 0 : smallest),
              static_cast<unsigned long long>(largest),
              HumanBytes(static_cast<double>(m->chunk_bytes)).c_str());
  std::printf("parts        %d\n", m->parts);
  std::printf("size         %s stored, %s raw (%s)\n", HumanBytes(static_cast<double>(m->bytes)).c_str(),
              HumanBytes(static_cast<double>(raw)).c_str(), m->compressor.c_str());
  std::printf("created      %s\n", Time(m->created_ms).c_str());
  if (!m->meta.empty()) std::printf("details      %s\n", m->meta.dump().c_str());
  return 0;
}

}  // namespace

void RegisterData(CLI::App& app, int* exit_code) {
  auto u = std::make_shared<UploadFlags>();
  auto* up = app.add_subcommand(
      "upload",
      "Convert data into a data set of RecordIO files in a store. Formats:\n"
      "  text    one record per line (--input FILE)\n"
      "  list    lines of 'relative/path<TAB>label'; each record holds the file's bytes (--input LIST)\n"
      "  idx     MNIST-style IDX files (--images FILE --labels FILE)\n"
      "  csv     numeric columns plus one label column (--input FILE [--header] [--label-column C])\n"
      "  libsvm  'label index:value ...' lines (--input FILE)\n"
      "Inputs may be gzip-compressed; --input - reads standard input. The data set appears only\n"
      "when complete (a crash or Ctrl-C leaves nothing that looks like a data set).");
  up->add_option(flags::kStore, u->store, "store directory (local disk or a shared mount)")
      ->envname(flags::kEnvStore)
      ->required();
  up->add_option(flags::kDataset, u->name, "data set name")->required();
  up->add_option("--format", u->import.format, "text, list, idx, csv or libsvm")->required();
  up->add_option("--input", u->import.input, "input file (- for standard input)");
  up->add_option("--images", u->import.images, "idx: the images file");
  up->add_option("--labels", u->import.labels, "idx: the labels file");
  up->add_option("--label-column", u->import.label_column, "csv: label column name (with --header) or index")
      ->capture_default_str();
  up->add_flag("--header", u->import.header, "csv: the first row names the columns");
  up->add_option("--parts", u->parts, "number of part files to spread chunks over")->capture_default_str();
  up->add_option("--chunk-size", u->chunk_size, "target raw bytes per chunk")->capture_default_str();
  up->add_option("--compressor", u->compressor, "none or zstd")->capture_default_str();
  up->add_flag("--force", u->force, "replace an existing data set of that name");
  up->add_flag("--append", u->append,
               "add the records to an existing data set of the same format (new chunks after its own; "
               "readers and jobs already reading it are undisturbed)");
  up->callback([u, exit_code] { *exit_code = RunUpload(*u); });

  auto d = std::make_shared<DownloadFlags>();
  auto* down = app.add_subcommand(
      "download",
      "Turn a data set back into files, checking every chunk's checksum. Formats: text, list\n"
      "(files plus list.txt in --out DIR), idx (images and labels IDX files in --out DIR), csv,\n"
      "libsvm, raw (each record as a 4-byte little-endian length and its bytes). Default: the\n"
      "format it was uploaded from.");
  down->add_option(flags::kStore, d->store, "store directory")->envname(flags::kEnvStore)->required();
  down->add_option(flags::kDataset, d->name, "data set name")->required();
  down->add_option("--format", d->format, "output format (default: the upload format)");
  down->add_option("--out", d->out, "output file (- for standard output) or directory (list, idx)")
      ->required();
  down->callback([d, exit_code] { *exit_code = RunDownload(*d); });

  auto* ds = app.add_subcommand("dataset", "List data sets in a store or describe one");
  ds->require_subcommand(1);
  auto store = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>();
  auto* ls = ds->add_subcommand("ls", "List the data sets in a store");
  ls->add_option(flags::kStore, *store, "store directory")->envname(flags::kEnvStore)->required();
  ls->callback([store, exit_code] { *exit_code = RunLs(*store); });
  auto* info = ds->add_subcommand("info", "Describe a data set: records, chunks, parts, size, details");
  info->add_option(flags::kStore, *store, "store directory")->envname(flags::kEnvStore)->required();
  info->add_option(flags::kDataset, *name, "data set name")->required();
  info->callback([store, name, exit_code] { *exit_code = RunInfo(*store, *name); });
}

}  // namespace tessera::cli
