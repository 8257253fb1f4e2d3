// CauseFromLog: the failing line of each kind of log Tessera's processes write.
#include "local/log_cause.h"

#include <gtest/gtest.h>

namespace tessera::local {
namespace {

TEST(CauseFromLogTest, EtcdsJsonPanicGivesItsMessageAndError) {
  const std::string log =
      "==== tessera local: started etcd (start 1)\n"
      R"({"level":"warn","msg":"failed to preallocate an initial WAL file","error":"no space left on device"})"
      "\n"
      R"({"level":"panic","msg":"failed to create WAL","error":"no space left on device","stacktrace":"x"})"
      "\npanic: failed to create WAL\n\ngoroutine 1 [running]:\n\tgo.etcd.io/etcd/main.go:28 +0x17\n";
  // Go's own "panic:" line comes last, but repeats the JSON line's message without its error.
  EXPECT_EQ(CauseFromLog(log), "failed to create WAL: no space left on device");
  EXPECT_EQ(CauseFromLog("panic: runtime error: index out of range\n\ngoroutine 1 [running]:\n"),
            "panic: runtime error: index out of range");
  const std::string json_only =
      R"({"level":"fatal","msg":"listener failed","error":"listen tcp 127.0.0.1:1: bind: permission denied"})";
  EXPECT_EQ(CauseFromLog(json_only), "listener failed: listen tcp 127.0.0.1:1: bind: permission denied");
  EXPECT_EQ(CauseFromLog(R"({"level":"info","msg":"ready"})"), "");
}

TEST(CauseFromLogTest, APythonTracebacksLastLine) {
  const std::string log =
      "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    1 / 0\n"
      "ZeroDivisionError: division by zero\n";
  EXPECT_EQ(CauseFromLog(log), "ZeroDivisionError: division by zero");
  EXPECT_EQ(CauseFromLog("tessera.Error: the job has no data set 'fm'\n"),
            "tessera.Error: the job has no data set 'fm'");
}

TEST(CauseFromLogTest, SpdlogErrorLinesAndNothingElse) {
  EXPECT_EQ(CauseFromLog(
                "[2026-11-27 10:00:00.000] [j/pserver-0] [error] checkpoint failed: No space left on device\n"
                "[2026-11-27 10:00:01.000] [j/pserver-0] [info] still serving\n"),
            "checkpoint failed: No space left on device");
  // A line also meant for the terminal (kNoticeMark) gives its cause without the mark.
  EXPECT_EQ(
      CauseFromLog("[j/pserver-0] [error] [notice] pserver 0: checkpoint of version 4 failed: No space\n"),
      "pserver 0: checkpoint of version 4 failed: No space");
  EXPECT_EQ(CauseFromLog("[x] [critical] out of memory"), "out of memory");
  EXPECT_EQ(CauseFromLog("all is well\nstill well\n"), "");
  EXPECT_EQ(CauseFromLog(""), "");
  const std::string long_line = "ValueError: " + std::string(1000, 'x');
  EXPECT_EQ(CauseFromLog(long_line).size(), 300u);
}

}  // namespace
}  // namespace tessera::local
