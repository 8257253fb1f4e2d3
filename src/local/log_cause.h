// CauseFromLog: the line of a process's log that says why it failed, for the terminal: `tessera
// local` shows "etcd exited with code 1 ...: failed to create WAL: no space left on device" rather
// than leave the cause in logs/etcd.log. Pure: it reads only the text it is given.
#pragma once

#include <string>
#include <string_view>

namespace tessera::local {

// The last line of `log` (its tail) that reports an error, in any of the forms Tessera's
// processes write: etcd's JSON lines at level error, fatal or panic ("msg: error"), Go's
// "panic: ..." and "Error: ...", a Python exception's last line ("ValueError: ..."), spdlog's
// "[error]" and "[critical]" lines (their text after the level). "" when there is none. At most
// 300 characters.
std::string CauseFromLog(std::string_view log);

}  // namespace tessera::local
