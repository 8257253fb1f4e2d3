// File helpers with the durability Tessera needs: atomic replace (write to a temporary name,
// fsync, rename, fsync the directory), whole-file reads with clear errors, temp directories.
// Thread-safe (they share no state).
#pragma once

#include <sys/stat.h>

#include <string>
#include <string_view>

#include "tessera/status.h"

namespace tessera {

StatusOr<std::string> ReadFile(const std::string& path);

// Writes `data` to `path` so that a crash leaves either the old file or the new one, never a
// mix: writes "<path>.tmp-<random>", fsyncs it, renames it over `path`, fsyncs the directory.
// The file is created with `mode` (0600 for a secret: never readable by others, not even briefly).
Status WriteFileAtomic(const std::string& path, std::string_view data, int mode = 0644);

// fsync() on a file or directory path.
Status FsyncPath(const std::string& path);

// Creates a fresh directory under $TMPDIR (or /tmp) named "<prefix>XXXXXX".
StatusOr<std::string> MakeTempDir(const std::string& prefix);

// Removes a file or a directory tree; a missing path is not an error.
Status RemoveAll(const std::string& path);

// Whether a secret file's mode lets anyone but its owner read it: any bit for others, or group
// bits for a group other than this process's own. (Kubernetes mounts a pod's secrets as
// root:<fsGroup> 0440 for a pod that runs as a user of that group: readable by the pod alone.)
bool OthersMayRead(const struct stat& st);

// The last `lines` lines of a text file (reading at most its last 64 KiB), for showing a log's
// end to a person; "" if it cannot be read.
std::string TailLines(const std::string& path, int lines);

}  // namespace tessera
