// The `tessera` command: one binary with a subcommand per role and tool.
// Flags (and their TESSERA_* environment equivalents) are read here, once, into each command's
// options; nothing deeper reads the environment.
#include <grpc/grpc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "common/deadlock_checks.h"
#include "common/strings.h"
#include "common/version.h"

std::string tessera::cli::SelfPath() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "tessera";
}

namespace {

// A misspelt flag: CLI11's message, with the likely meaning of each unknown flag among the chosen
// command's own. Exits 2.
int MisspeltFlag(const CLI::App& app, const CLI::ExtrasError& e, int argc, char** argv) {
  const CLI::App* cmd = &app;
  std::string path;
  for (;;) {
    auto chosen = cmd->get_subcommands();
    if (chosen.empty()) break;
    cmd = chosen.front();
    path += (path.empty() ? "" : " ") + cmd->get_name();
  }
  std::vector<std::string> flags;
  for (const auto* opt : cmd->get_options())
    for (const auto& n : opt->get_lnames()) flags.push_back("--" + n);
  std::string hint;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    arg = arg.substr(0, arg.find('='));
    if (arg.rfind("--", 0) != 0 || std::find(flags.begin(), flags.end(), arg) != flags.end()) continue;
    std::string guess = tessera::ClosestFlag(arg, flags);
    if (!guess.empty()) hint += " (did you mean '" + guess + "' for '" + arg + "'?)";
  }
  std::fprintf(stderr, "tessera %s: %s%s\nRun `tessera %s --help` for its flags.\n", path.c_str(), e.what(),
               hint.c_str(), path.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::TurnOffDeadlockChecks();  // before gRPC takes its first lock (deadlock_checks.h)
  // gRPC stays initialized for the whole process: otherwise it shuts itself down whenever its
  // last object goes (an etcd client closed mid-command) while a poller thread may still run,
  // which prints "backup_poller ... Timer list shutdown" at the end of `tessera local`. The
  // threads it starts must not take SIGINT/SIGTERM (each command's SignalWatcher waits for
  // them), so they start with those signals blocked.
  {
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    grpc_init();
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  CLI::App app{"Tessera " TESSERA_VERSION
               ": a parameter server for distributed training.\n"
               "Parameters live in shards on pservers; trainers push gradients and pull parameters; a\n"
               "master hands out data tasks; etcd coordinates them all. Run `tessera <command> --help`.",
               "tessera"};
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", "tessera " TESSERA_VERSION, "Print Tessera's version and exit");
  app.fallthrough(false);
  int exit_code = 0;
  tessera::cli::RegisterVersion(app, &exit_code);
  tessera::cli::RegisterStatus(app, &exit_code);
  tessera::cli::RegisterJob(app, &exit_code);
  tessera::cli::RegisterPserver(app, &exit_code);
  tessera::cli::RegisterData(app, &exit_code);
  tessera::cli::RegisterMaster(app, &exit_code);
  tessera::cli::RegisterModels(app, &exit_code);
  tessera::cli::RegisterLocal(app, &exit_code);
  tessera::cli::RegisterConsole(app, &exit_code);
  tessera::cli::RegisterCerts(app, &exit_code);
  tessera::cli::RegisterDeploy(app, &exit_code);
  tessera::cli::RegisterLaunch(app, &exit_code);
  tessera::cli::RegisterNode(app, &exit_code);
  tessera::cli::RegisterServer(app, &exit_code);
  tessera::cli::RegisterLogin(app, &exit_code);
  tessera::cli::RegisterSubmit(app, &exit_code);
  tessera::cli::RegisterRemoteJobs(app, &exit_code);
  tessera::cli::RegisterDatasets(app, &exit_code);
  tessera::cli::RegisterAdmin(app, &exit_code);
  // A misspelt command gets its likely meaning, not CLI11's "A subcommand is required".
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  if (argc > 1 && argv[1][0] != '-' && std::find(names.begin(), names.end(), argv[1]) == names.end()) {
    std::string guess = tessera::ClosestName(argv[1], names);
    std::fprintf(stderr, "tessera: unknown command '%s'%s\nCommands: %s (run `tessera --help`)\n", argv[1],
                 guess.empty() ? "" : (" (did you mean '" + guess + "'?)").c_str(),
                 tessera::Join(names, ", ").c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    return MisspeltFlag(app, e, argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other mistake in the command line exits 2, as the
    // unknown command and flag above do (CLI11's own codes, 105 to 114, say nothing to a shell).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
