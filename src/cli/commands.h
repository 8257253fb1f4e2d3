// Registration of every `tessera` subcommand. Each Register* adds its subcommand to `app`; when
// the subcommand is chosen its callback runs it and stores the process exit code in *exit_code.
// Used only by src/cli/main.cc.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tessera::cli {

void RegisterVersion(CLI::App& app, int* exit_code);
void RegisterStatus(CLI::App& app, int* exit_code);
void RegisterJob(CLI::App& app, int* exit_code);
void RegisterCerts(CLI::App& app, int* exit_code);
void RegisterPserver(CLI::App& app, int* exit_code);
void RegisterData(CLI::App& app, int* exit_code);
void RegisterMaster(CLI::App& app, int* exit_code);
void RegisterModels(CLI::App& app, int* exit_code);
void RegisterLocal(CLI::App& app, int* exit_code);
void RegisterConsole(CLI::App& app, int* exit_code);
void RegisterDeploy(CLI::App& app, int* exit_code);
void RegisterLaunch(CLI::App& app, int* exit_code);
void RegisterNode(CLI::App& app, int* exit_code);
void RegisterServer(CLI::App& app, int* exit_code);
// The client of a tessera server: signup, login, logout; submit; jobs, metrics, logs, stop,
// scale, delete, quota; datasets.
void RegisterLogin(CLI::App& app, int* exit_code);
void RegisterSubmit(CLI::App& app, int* exit_code);
void RegisterRemoteJobs(CLI::App& app, int* exit_code);
void RegisterDatasets(CLI::App& app, int* exit_code);
void RegisterAdmin(CLI::App& app, int* exit_code);

// This program's own path (/proc/self/exe), for the processes it starts.
std::string SelfPath();

}  // namespace tessera::cli
