// ConfinedDir: a directory whose files a less trusted process writes (a sandboxed job's run
// directory) and a trusted one reads (the server, as root). The writer controls every name in it:
// `result.json` may be a link to /etc/shadow, `logs` a link to the server's data directory,
// `history.jsonl` a FIFO that blocks whoever opens it, `model.tsm` a sparse file of a terabyte.
// So every path is resolved beneath the directory by the kernel (openat2 with RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_XDEV; component by component with
// O_NOFOLLOW where the kernel predates it): a link anywhere on the way, "..", an absolute path or
// another mount is refused; only regular files are read (opened without blocking, checked by
// fstat on what was opened), and never more than the caller's limit.
// Thread-safe (no state but the root's path).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"
#include "tessera/status.h"

namespace tessera::sandbox {

class ConfinedDir {
 public:
  explicit ConfinedDir(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  // Opens regular file `rel` (relative, "a/b.log") for reading. NotFound when absent;
  // PermissionDenied, naming it, for a link, a way out or a file that is not regular.
  StatusOr<UniqueFd> Open(std::string_view rel) const;
  // Its size; -1 when it cannot be opened as above.
  int64_t Size(std::string_view rel) const;
  bool Exists(std::string_view rel) const { return Size(rel) >= 0; }
  // The whole file; ResourceExhausted when it is larger than `max_bytes`.
  StatusOr<std::string> Read(std::string_view rel, int64_t max_bytes) const;
  // At most `max_bytes` from `offset` ("" past its end or when it cannot be opened).
  std::string ReadRange(std::string_view rel, int64_t offset, int64_t max_bytes) const;
  // Its last `lines` lines (within its last 64 KiB); "" when it cannot be opened.
  std::string TailLines(std::string_view rel, int lines) const;
  // The names of the regular files in directory `rel` ending in `suffix`, sorted (none when it
  // cannot be opened as a directory beneath the root).
  std::vector<std::string> Files(std::string_view rel, std::string_view suffix) const;

 private:
  // Opens `rel` beneath the root (a directory with `directory`), refusing links and ways out.
  StatusOr<UniqueFd> OpenBeneath(std::string_view rel, bool directory) const;
  std::string root_;
};

}  // namespace tessera::sandbox
