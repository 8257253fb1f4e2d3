// `tessera datasets upload|ls|show|rm|share`: data sets on a tessera server. Uploads go in
// checked chunks with a progress bar and resume where they stopped when run again.
#include <cstdio>

#include "cli/commands.h"
#include "cli/remote_flags.h"
#include "cli/signals.h"
#include "common/clock.h"
#include "common/progress.h"
#include "common/strings.h"
#include "remote/upload.h"

namespace tessera::cli {
namespace {

using remote::Json;

struct DatasetsFlags {
  RemoteFlags remote;
  std::string name, format, input, images, labels, label_column, list, other;
  bool header = false, revoke = false;
  double chunk_mb = 0, limit_mb_s = 0;
  int records = 5;
};

Status CheckFiles(const DatasetsFlags& f, std::map<std::string, std::string>* files) {
  if (f.format == "idx") {
    if (f.images.empty() || f.labels.empty())
      return Status::InvalidArgument("--format idx takes --images FILE and --labels FILE");
    (*files)["images"] = f.images;
    (*files)["labels"] = f.labels;
  } else if (f.input.empty()) {
    return Status::InvalidArgument(
        "--format " + f.format + " takes --input FILE" +
        (f.format == "list" ? " (a tar or zip of the list file and the files it names)" : ""));
  } else {
    (*files)[f.format == "list" ? "archive" : "input"] = f.input;
  }
  return Status::OK();
}

int RunUpload(const DatasetsFlags& f) {
  std::atomic<bool> interrupted{false};
  SignalWatcher signals([&](int) { interrupted = true; });
  remote::DatasetUpload up;
  up.name = f.name;
  up.format = f.format;
  if (Status s = CheckFiles(f, &up.files); !s.ok()) return FailRemote("datasets upload", s);
  up.label_column = f.label_column;
  up.header = f.header;
  up.list = f.list;
  up.chunk_bytes = static_cast<int64_t>(f.chunk_mb * (1 << 20));
  up.limit_bytes_per_s = f.limit_mb_s * (1 << 20);
  return WithRemote("datasets upload", f.remote, [&](Remote& r) -> Status {
    up.ns = r.ns;
    ProgressBar bar("upload " + f.name, 0, "bytes");
    bool finished = false;
    int64_t last_total = -1, sent_bytes = 0;
    auto finish = [&](const std::string& then) {
      if (finished) return;
      finished = true;
      bar.Finish("tessera datasets upload: the server has all " +
                 HumanBytes(static_cast<double>(sent_bytes)) + " of " + f.name + then);
    };
    remote::UploadEvents ev;
    ev.note = [](const std::string& what) {
      std::fprintf(stderr, "tessera datasets upload: %s\n", what.c_str());
    };
    ev.progress = [&](int64_t sent, int64_t total) {
      if (total != last_total) {
        bar = ProgressBar("upload " + f.name, total, "bytes");
        last_total = total;
      }
      sent_bytes = sent;
      bar.Update(sent);
    };
    ev.importing = [&](const std::string&) { finish("; it is importing them..."); };
    auto d = remote::UploadDataset(*r.api, up, ev, interrupted);
    if (!d.ok()) {
      if (d.status().code() == StatusCode::kCancelled && !finished)
        return Status::Cancelled("upload interrupted; run the same command again to resume where it stopped");
      return d.status();
    }
    finish("");
    if (f.remote.json) {
      std::printf("%s\n", d->dump(2).c_str());
    } else {
      std::printf("data set %s: %s records, %s (%s)\n", d->value("name", "").c_str(),
                  std::to_string(d->value("records", int64_t{0})).c_str(),
                  HumanBytes(static_cast<double>(d->value("bytes", int64_t{0}))).c_str(),
                  d->value("format", "").c_str());
    }
    return Status::OK();
  });
}

Status List(Remote& r, const DatasetsFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(Json list, r.api->Get("/api/v1/namespaces/" + r.ns + "/datasets"));
  TESSERA_ASSIGN_OR_RETURN(Json uploads, r.api->Get("/api/v1/namespaces/" + r.ns + "/uploads"));
  if (f.remote.json) {
    std::printf("%s\n",
                Json{{"datasets", list["datasets"]}, {"uploads", uploads["uploads"]}}.dump(2).c_str());
    return Status::OK();
  }
  const int64_t now = WallMillis();
  std::vector<std::vector<std::string>> rows = {{"NAME", "FORMAT", "RECORDS", "SIZE", "CREATED", "SHARING"}};
  for (const auto& d : list["datasets"]) {
    const bool shared = d.value("shared", false);
    std::string sharing = shared ? "shared by " + d.value("owner", "") : "";
    if (!shared && d.contains("shared_with") && !d["shared_with"].empty()) {
      std::vector<std::string> to = d["shared_with"].get<std::vector<std::string>>();
      sharing = "with " + Join(to, ", ");
    }
    rows.push_back({shared ? d.value("namespace", "") + "/" + d.value("name", "") : d.value("name", ""),
                    d.value("format", ""), std::to_string(d.value("records", int64_t{0})),
                    HumanBytes(static_cast<double>(d.value("bytes", int64_t{0}))),
                    Ago(d.value("created_ms", int64_t{0}), now), sharing});
  }
  for (const auto& u : uploads["uploads"])
    rows.push_back(
        {u.value("name", ""), u.value("format", ""), "-", "-", Ago(u.value("created_ms", int64_t{0}), now),
         "upload " + u.value("state", "") + (u.contains("error") ? ": " + u.value("error", "") : "")});
  if (rows.size() == 1) {
    std::printf("no data sets in %s yet: `tessera datasets upload --help` says how to add one\n",
                r.ns.c_str());
    return Status::OK();
  }
  std::fputs(Table(rows).c_str(), stdout);
  return Status::OK();
}

// "owner/name" for a data set shared with the namespace, else the name.
std::string DatasetPath(const Remote& r, const std::string& name) {
  size_t slash = name.find('/');
  if (slash == std::string::npos) return "/api/v1/namespaces/" + r.ns + "/datasets/" + name;
  return "/api/v1/namespaces/" + r.ns + "/datasets/" + name.substr(slash + 1) +
         "?owner=" + name.substr(0, slash);
}

Status Show(Remote& r, const DatasetsFlags& f) {
  const std::string path = DatasetPath(r, f.name);
  TESSERA_ASSIGN_OR_RETURN(Json d, r.api->Get(path));
  const size_t q = path.find('?');
  const std::string preview = (q == std::string::npos ? path : path.substr(0, q)) + "/preview" +
                              (q == std::string::npos ? "?" : path.substr(q) + "&") +
                              "n=" + std::to_string(f.records);
  TESSERA_ASSIGN_OR_RETURN(Json p, r.api->Get(preview));
  if (f.remote.json) {
    d["preview"] = p["records"];
    std::printf("%s\n", d.dump(2).c_str());
    return Status::OK();
  }
  std::printf("%s/%s: %s, %s records of %s, %s in %s chunks\n", d.value("namespace", "").c_str(),
              d.value("name", "").c_str(), d.value("format", "").c_str(),
              std::to_string(d.value("records", int64_t{0})).c_str(), d.value("record_type", "").c_str(),
              HumanBytes(static_cast<double>(d.value("bytes", int64_t{0}))).c_str(),
              std::to_string(d.value("chunks", int64_t{0})).c_str());
  for (const auto& rec : p["records"]) {
    std::string line = rec.dump();
    if (line.size() > 160) line = line.substr(0, 157) + "...";
    std::printf("  %s\n", line.c_str());
  }
  return Status::OK();
}

Status Remove(Remote& r, const DatasetsFlags& f) {
  auto gone = r.api->Delete("/api/v1/namespaces/" + r.ns + "/datasets/" + f.name);
  if (gone.ok()) {
    std::printf("data set %s deleted\n", f.name.c_str());
    return Status::OK();
  }
  if (gone.status().code() != StatusCode::kNotFound) return gone.status();
  // No data set: an unfinished upload of that name goes instead.
  TESSERA_ASSIGN_OR_RETURN(Json uploads, r.api->Get("/api/v1/namespaces/" + r.ns + "/uploads"));
  for (const auto& u : uploads["uploads"]) {
    if (u.value("name", "") != f.name) continue;
    TESSERA_RETURN_IF_ERROR(r.api->Delete("/api/v1/uploads/" + u.value("id", "")).status());
    std::printf("unfinished upload of %s removed\n", f.name.c_str());
    return Status::OK();
  }
  return gone.status();
}

// `tessera datasets upload`.
void RegisterDatasetUpload(CLI::App* group, int* exit_code) {
  auto f = std::make_shared<DatasetsFlags>();
  auto* cmd = group->add_subcommand(
      "upload",
      "Upload a data set; the server converts it with the importers of `tessera upload`.\n"
      "Interrupted (Ctrl-C, a dropped link), the same command resumes where the server stopped.\n"
      "  tessera datasets upload fm --format idx --images train-images-idx3-ubyte.gz --labels ...\n"
      "  tessera datasets upload clicks --format libsvm --input clicks.txt");
  AddRemoteFlags(cmd, &f->remote);
  cmd->add_option("name", f->name, "the data set's name")->required();
  cmd->add_option("--format", f->format, "text, csv, libsvm, idx or list")
      ->required()
      ->check(CLI::IsMember({"text", "csv", "libsvm", "idx", "list"}));
  cmd->add_option("--input", f->input,
                  "text, csv, libsvm: the file; list: a tar or zip of the list file and\nthe files it names")
      ->check(CLI::ExistingFile);
  cmd->add_option("--images", f->images, "idx: the images file")->check(CLI::ExistingFile);
  cmd->add_option("--labels", f->labels, "idx: the labels file")->check(CLI::ExistingFile);
  cmd->add_option("--label-column", f->label_column,
                  "csv: the label's column (name with --header, or index)");
  cmd->add_flag("--header", f->header, "csv: the first row names the columns");
  cmd->add_option("--list", f->list, "list: the list file's path in the archive (default list.txt)");
  cmd->add_option("--chunk-mb", f->chunk_mb, "MiB per request (default and most: the server's, 4)")
      ->check(CLI::Range(0.0625, 4.0));
  cmd->add_option("--limit-rate", f->limit_mb_s, "send at most this many MiB/s (to share a slow link)")
      ->check(CLI::PositiveNumber);
  cmd->callback([f, exit_code] { *exit_code = RunUpload(*f); });
}

// `tessera datasets ls` and `show`.
void RegisterDatasetReads(CLI::App* group, int* exit_code) {
  {
    auto f = std::make_shared<DatasetsFlags>();
    auto* cmd = group->add_subcommand(
        "ls", "List your namespace's data sets, those shared with it, and unfinished uploads.");
    AddRemoteFlags(cmd, &f->remote);
    cmd->callback([f, exit_code] {
      *exit_code = WithRemote("datasets ls", f->remote, [&](Remote& r) { return List(r, *f); });
    });
  }
  {
    auto f = std::make_shared<DatasetsFlags>();
    auto* cmd = group->add_subcommand("show", "Describe a data set and print its first records, decoded.");
    AddRemoteFlags(cmd, &f->remote);
    cmd->add_option("name", f->name, "the data set (OWNER/NAME for one shared with you)")->required();
    cmd->add_option("--records", f->records, "how many records")
        ->check(CLI::Range(1, 100))
        ->capture_default_str();
    cmd->callback([f, exit_code] {
      *exit_code = WithRemote("datasets show", f->remote, [&](Remote& r) { return Show(r, *f); });
    });
  }
}

// `tessera datasets rm` and `share`.
void RegisterDatasetChanges(CLI::App* group, int* exit_code) {
  {
    auto f = std::make_shared<DatasetsFlags>();
    auto* cmd = group->add_subcommand(
        "rm", "Delete a data set (refused while a job uses it), or an unfinished upload.");
    AddRemoteFlags(cmd, &f->remote, false);
    cmd->add_option("name", f->name, "the data set")->required();
    cmd->callback([f, exit_code] {
      *exit_code = WithRemote("datasets rm", f->remote, [&](Remote& r) { return Remove(r, *f); });
    });
  }
  {
    auto f = std::make_shared<DatasetsFlags>();
    auto* cmd =
        group->add_subcommand("share", "Let another namespace read a data set (--revoke takes it back).");
    AddRemoteFlags(cmd, &f->remote, false);
    cmd->add_option("name", f->name, "the data set")->required();
    cmd->add_option("namespace", f->other, "the namespace to share it with")->required();
    cmd->add_flag("--revoke", f->revoke, "stop sharing it");
    cmd->callback([f, exit_code] {
      *exit_code = WithRemote("datasets share", f->remote, [&](Remote& r) -> Status {
        const std::string path =
            "/api/v1/namespaces/" + r.ns + "/datasets/" + f->name + "/shares/" + f->other;
        TESSERA_RETURN_IF_ERROR((f->revoke ? r.api->Delete(path) : r.api->Put(path)).status());
        std::printf("data set %s %s %s\n", f->name.c_str(),
                    f->revoke ? "no longer shared with" : "shared with", f->other.c_str());
        return Status::OK();
      });
    });
  }
}

}  // namespace

void RegisterDatasets(CLI::App& app, int* exit_code) {
  auto* group =
      app.add_subcommand("datasets",
                         "Data sets on a tessera server: upload (in checked chunks, resumable), ls, show,\n"
                         "rm, share. Jobs name them with --dataset.");
  group->require_subcommand(1);
  RegisterDatasetUpload(group, exit_code);
  RegisterDatasetReads(group, exit_code);
  RegisterDatasetChanges(group, exit_code);
}

}  // namespace tessera::cli
