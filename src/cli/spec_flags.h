// `--set FIELD=VALUE` beside `--spec`: one field of the job spec over the file's
// (spec/spec_settings.h), the same words on every command that takes a spec (local, launch,
// deploy k8s, submit). Used only by src/cli.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tessera::cli {

// Adds --set (repeatable) to `cmd`, needing `spec_opt`.
void AddSpecSettings(CLI::App* cmd, CLI::Option* spec_opt, std::vector<std::string>* settings);

}  // namespace tessera::cli
