// A directory packed as a job's code (see pack.h).
#include "remote/pack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/digest.h"
#include "common/strings.h"

namespace tessera::remote {
namespace {

const std::vector<std::string> kAlwaysIgnored = {
    ".git/",  ".hg/",  ".svn/",        "__pycache__/",   "*.pyc",    ".ipynb_checkpoints/",
    ".venv/", ".tox/", ".mypy_cache/", ".pytest_cache/", ".DS_Store"};

struct Entry {
  std::string rel;
  bool dir = false;
  int64_t size = 0;
  bool executable = false;
};

struct Walk {
  const std::string& root;
  const std::vector<std::string>& patterns;
  const PackLimits& limits;
  std::vector<Entry> entries;
  std::vector<std::string> skipped;
  int64_t raw = 0;
  int files = 0;
};

Status WalkDir(Walk& w, const std::string& rel) {
  const std::string path = rel.empty() ? w.root : w.root + "/" + rel;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(path.c_str()), ::closedir);
  if (!d) return Status::InvalidArgument("cannot read the directory " + path + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d.get())) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    const std::string r = rel.empty() ? n : rel + "/" + n;
    struct stat st;
    if (::lstat((w.root + "/" + r).c_str(), &st) != 0)
      return Status::InvalidArgument("cannot stat " + w.root + "/" + r + ": " + std::strerror(errno));
    const bool dir = S_ISDIR(st.st_mode);
    if (IsIgnored(r, dir, w.patterns)) continue;
    if (S_ISLNK(st.st_mode)) {
      w.skipped.push_back(r + " (a symbolic link)");
      continue;
    }
    if (!dir && !S_ISREG(st.st_mode)) {
      w.skipped.push_back(r + " (not a regular file)");
      continue;
    }
    if (dir) {
      w.entries.push_back({r, true, 0, false});
      TESSERA_RETURN_IF_ERROR(WalkDir(w, r));
      continue;
    }
    if (++w.files > w.limits.max_files)
      return Status::InvalidArgument("more than " + std::to_string(w.limits.max_files) + " files under " +
                                     w.root + "; leave some out with .tesseraignore");
    w.raw += st.st_size;
    w.entries.push_back({r, false, static_cast<int64_t>(st.st_size), (st.st_mode & S_IXUSR) != 0});
  }
  return Status::OK();
}

std::string Largest(const std::vector<Entry>& entries) {
  std::vector<const Entry*> files;
  for (const auto& e : entries)
    if (!e.dir) files.push_back(&e);
  std::sort(files.begin(), files.end(), [](const Entry* a, const Entry* b) { return a->size > b->size; });
  std::vector<std::string> top;
  for (size_t i = 0; i < files.size() && i < 3; ++i)
    top.push_back(files[i]->rel + " (" + HumanBytes(static_cast<double>(files[i]->size)) + ")");
  return Join(top, ", ");
}

struct Sink {
  std::string* out;
  int64_t max;
};

la_ssize_t WriteToString(struct archive* a, void* data, const void* buf, size_t n) {
  auto* s = static_cast<Sink*>(data);
  if (static_cast<int64_t>(s->out->size() + n) > s->max) {
    archive_set_error(a, EFBIG, "over the size limit");
    return -1;
  }
  s->out->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

}  // namespace

std::vector<std::string> ParseIgnorePatterns(const std::string& text) {
  std::vector<std::string> out;
  for (auto line : Split(text, '\n')) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    out.push_back(line.substr(start));
  }
  return out;
}

bool IsIgnored(const std::string& rel, bool is_dir, const std::vector<std::string>& patterns) {
  const std::string base = rel.substr(rel.rfind('/') == std::string::npos ? 0 : rel.rfind('/') + 1);
  for (std::string p : patterns) {
    if (p.empty()) continue;
    bool dirs_only = p.back() == '/';
    if (dirs_only) p.pop_back();
    if (p.empty() || (dirs_only && !is_dir)) continue;
    const bool whole = p.find('/') != std::string::npos;  // "/build": at the top only
    if (p[0] == '/') p.erase(0, 1);
    if (::fnmatch(p.c_str(), (whole ? rel : base).c_str(), whole ? FNM_PATHNAME : 0) == 0) return true;
  }
  return false;
}

namespace {

// What the package leaves out: the usual (kAlwaysIgnored) and the directory's .tesseraignore.
std::vector<std::string> IgnorePatterns(const std::string& dir) {
  std::vector<std::string> patterns = kAlwaysIgnored;
  std::string ignore_file = dir + "/.tesseraignore";
  int fd = ::open(ignore_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < (1 << 20)) text.append(buf, n);
    ::close(fd);
    for (auto& p : ParseIgnorePatterns(text)) patterns.push_back(p);
  }
  return patterns;
}

// One entry of the walk into the archive: its header, and a file's bytes (exactly the size in
// the header). ResourceExhausted when the archive passed its size limit.
Status WriteEntry(struct archive* a, const std::string& dir, const Entry& e, std::vector<char>* buf) {
  std::unique_ptr<archive_entry, void (*)(archive_entry*)> ae(archive_entry_new(), archive_entry_free);
  archive_entry_set_pathname(ae.get(), e.rel.c_str());
  archive_entry_set_filetype(ae.get(), e.dir ? AE_IFDIR : AE_IFREG);
  archive_entry_set_perm(ae.get(), e.dir || e.executable ? 0755 : 0644);
  archive_entry_set_size(ae.get(), e.dir ? 0 : e.size);
  archive_entry_set_mtime(ae.get(), 0, 0);
  if (archive_write_header(a, ae.get()) != ARCHIVE_OK) {
    if (archive_errno(a) == EFBIG) return Status::ResourceExhausted("too big");
    return Status::Internal("cannot pack " + e.rel + ": " + archive_error_string(a));
  }
  if (e.dir) return Status::OK();
  const std::string path = dir + "/" + e.rel;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::InvalidArgument("cannot read " + path + ": " + std::strerror(errno));
  int64_t left = e.size;  // exactly the size in the header, even if the file changes meanwhile
  Status result;
  while (left > 0 && result.ok()) {
    ssize_t n = ::read(fd, buf->data(), static_cast<size_t>(std::min<int64_t>(left, buf->size())));
    if (n <= 0) {
      result = Status::Aborted(path + " changed while it was packed; pack again");
    } else if (archive_write_data(a, buf->data(), static_cast<size_t>(n)) < 0) {
      result = archive_errno(a) == EFBIG
                   ? Status::ResourceExhausted("too big")
                   : Status::Internal("cannot pack " + e.rel + ": " + archive_error_string(a));
    } else {
      left -= n;
    }
  }
  ::close(fd);
  return result;
}

}  // namespace

StatusOr<Package> PackDirectory(const std::string& dir, const PackLimits& limits) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::InvalidArgument(dir + " is not a directory");
  const std::vector<std::string> patterns = IgnorePatterns(dir);
  Walk w{dir, patterns, limits, {}, {}, 0, 0};
  TESSERA_RETURN_IF_ERROR(WalkDir(w, ""));
  if (w.files == 0) return Status::InvalidArgument(dir + " holds no files to pack");
  if (w.raw > limits.max_raw)
    return Status::InvalidArgument("the files under " + dir + " hold " +
                                   HumanBytes(static_cast<double>(w.raw)) + ", over the " +
                                   HumanBytes(static_cast<double>(limits.max_raw)) +
                                   " a code package may hold; the largest: " + Largest(w.entries) +
                                   ". Upload data as a data set (`tessera datasets upload`) and leave it out "
                                   "with .tesseraignore");

  Package pkg;
  Sink sink{&pkg.bytes, limits.max_compressed};
  std::unique_ptr<struct archive, int (*)(struct archive*)> a(archive_write_new(), archive_write_free);
  archive_write_add_filter_gzip(a.get());
  archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr);  // the same bytes every time
  archive_write_set_format_pax_restricted(a.get());
  archive_write_set_bytes_in_last_block(a.get(), 1);  // no padding of the gzip stream to 10 KiB
  if (archive_write_open(a.get(), &sink, nullptr, WriteToString, nullptr) != ARCHIVE_OK)
    return Status::Internal(std::string("cannot start the archive: ") + archive_error_string(a.get()));
  auto too_big = [&]() {
    return Status::InvalidArgument(
        "the package of " + dir + " is over the server's " +
        HumanBytes(static_cast<double>(limits.max_compressed)) +
        " compressed; the largest files: " + Largest(w.entries) +
        ". Upload data as a data set (`tessera datasets upload`) and leave it out with "
        ".tesseraignore");
  };
  std::vector<char> buf(1 << 16);
  for (const auto& e : w.entries) {
    Status wrote = WriteEntry(a.get(), dir, e, &buf);
    if (wrote.code() == StatusCode::kResourceExhausted) return too_big();
    TESSERA_RETURN_IF_ERROR(wrote);
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    if (archive_errno(a.get()) == EFBIG) return too_big();
    return Status::Internal(std::string("cannot finish the package: ") + archive_error_string(a.get()));
  }
  pkg.sha256 = Sha256Hex(pkg.bytes);
  pkg.files = w.files;
  pkg.raw_bytes = w.raw;
  pkg.skipped = std::move(w.skipped);
  return pkg;
}

}  // namespace tessera::remote
