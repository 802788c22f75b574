// The subcommands of `zplan`, one file each (cmd_<name>.cc). Each setup_* adds its subcommand to
// the app and arranges for it to run when chosen; errors are thrown (InputError) and turned into
// one line and an exit code by main.cc, which is the only place that catches.
#ifndef ZPLAN_CLI_COMMANDS_H_
#define ZPLAN_CLI_COMMANDS_H_

#include <functional>

#include <CLI/CLI.hpp>

namespace zplan::cli {

// A subcommand's action; returns the process exit code.
using Action = std::function<int()>;

// Each adds its subcommand to `app` and returns the slot main() runs if it is chosen.
void setup_calibrate_command(CLI::App& app, Action* action);
void setup_memory_command(CLI::App& app, Action* action);
void setup_models_command(CLI::App& app, Action* action);
void setup_simulate_command(CLI::App& app, Action* action);
// `plan` also registers its options on the main app, so that plain `zplan --model ... --gpus ...
// --hw ...` (no subcommand) plans too.
void setup_plan_command(CLI::App& app, Action* action);
void setup_sweep_command(CLI::App& app, Action* action);
void setup_validate_command(CLI::App& app, Action* action);

}  // namespace zplan::cli

#endif  // ZPLAN_CLI_COMMANDS_H_
