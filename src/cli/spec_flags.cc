// AddSpecSettings (see spec_flags.h).
#include "cli/spec_flags.h"

namespace tessera::cli {

void AddSpecSettings(CLI::App* cmd, CLI::Option* spec_opt, std::vector<std::string>* settings) {
  cmd->add_option(
         "--set", *settings,
         "one field of the spec over the file's, as FIELD=VALUE (repeatable): --set train.passes=3,\n"
         "--set store.path=/data, --set 'train.model_args=[hidden=32]' (the value is YAML)")
      ->allow_extra_args(false)
      ->needs(spec_opt);
}

}  // namespace tessera::cli
