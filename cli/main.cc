// zplan's entry point: parses the command line with CLI11, runs the chosen subcommand, and is the
// only place that catches errors. Every failure leaves as one line on stderr and an exit code
// (cli/common_options.h); nothing a user wrote is touched on the way out.
#include <cstdio>
#include <iostream>
#include <new>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "kernels/config.h"
#include "base/input_error.h"

namespace {

// CLI11 messages can span lines ("...\nRun with --help for more information."): keep the first.
std::string first_line(const std::string& text) {
  size_t nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

// What a value of option `name` must look like, from its CLI11 type ("a whole number").
std::string expected_value(CLI::App& app, const std::string& name) {
  // The command's own option first: the bare `zplan` (plan) has a --micro-batch list too.
  const CLI::Option* opt = nullptr;
  for (CLI::App* sub : app.get_subcommands()) {
    if (opt == nullptr) opt = sub->get_option_no_throw(name);
  }
  if (opt == nullptr) opt = app.get_option_no_throw(name);
  const std::string type = opt != nullptr ? opt->get_type_name() : "";
  if (type == "INT" || type == "UINT") return "a whole number";
  if (type == "FLOAT") return "a number";
  if (type == "BOOLEAN") return "true or false";
  return "a valid value";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zplan::cli;
  CLI::App app{"zplan: plan DeepSpeed ZeRO training before you run it.", "zplan"};
  app.set_version_flag("--version", std::string("zplan ") + ZPLAN_VERSION);
  app.require_subcommand(0, 1);
  app.footer(
      "Run `zplan <command> --help` for a command's options. Exit codes: 0 ok, 1 bad "
      "input, 2 bad usage, 3 nothing fits (plan; memory and simulate report a config that does "
      "not fit and exit 0), 4 check failed (validate), 70 internal error.");

  Action action;
  setup_calibrate_command(app, &action);
  setup_memory_command(app, &action);
  setup_models_command(app, &action);
  setup_simulate_command(app, &action);
  setup_plan_command(app, &action);
  setup_sweep_command(app, &action);
  setup_validate_command(app, &action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ConversionError& e) {
    // A value of the wrong type (--micro-batch 2.5, --overlap-comm maybe) is bad input, like
    // any other bad value: CLI11 says "Could not convert: --micro-batch = 2.5".
    std::string text = first_line(e.what());
    const std::string prefix = "Could not convert: ";
    const size_t eq = text.find(" = ");
    if (text.rfind(prefix, 0) == 0 && eq != std::string::npos) {
      const std::string name = text.substr(prefix.size(), eq - prefix.size());
      text = name + ": '" + text.substr(eq + 3) + "' is not " + expected_value(app, name);
    }
    std::cerr << "zplan: " << text << " (see zplan --help)\n";
    return kExitBadInput;
  } catch (const CLI::ValidationError& e) {
    std::cerr << "zplan: " << first_line(e.what()) << " (see zplan --help)\n";
    return kExitBadInput;
  } catch (const CLI::ParseError& e) {
    std::cerr << "zplan: " << first_line(e.what()) << " (see zplan --help)\n";
    return kExitUsage;
  } catch (const zplan::InputError& e) {
    std::cerr << "zplan: " << e.what() << "\n";
    return kExitBadInput;
  }
  if (!action) {
    std::cerr << "zplan: no command given (see zplan --help)\n";
    return kExitUsage;
  }
  try {
    int rc = action();
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "zplan: could not write to standard output\n";
      return kExitBadInput;
    }
    return rc;
  } catch (const zplan::InputError& e) {
    std::cerr << "zplan: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "zplan: out of memory\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    std::cerr << "zplan: internal error: " << first_line(e.what()) << "\n";
    return kExitInternal;
  }
}
