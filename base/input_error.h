// InputError: the one exception type for bad input (a malformed or inconsistent JSON file, an
// unknown model name, an impossible configuration, a bad command-line value).
//
// Its message is a single line that names where the problem is -- a file and a JSON pointer
// ("a100.json: /gpu/memory_gib"), or a flag ("--gpus") -- and what is wrong with it. Only
// cli/main.cc catches it; it prints what() and exits with kExitBadInput. Bugs are assertions,
// and expected outcomes ("does not fit") are values, never InputErrors.
#ifndef ZPLAN_BASE_INPUT_ERROR_H_
#define ZPLAN_BASE_INPUT_ERROR_H_

#include <stdexcept>
#include <string>

namespace zplan {

class InputError : public std::runtime_error {
 public:
  // what() = "<where>: <problem>", or just <problem> when `where` is empty.
  InputError(const std::string& where, const std::string& problem);

  const std::string& where() const { return where_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string where_;
  std::string problem_;
};

// Joins a file name and a JSON pointer the way every loader reports them: "file: /a/b".
// An empty pointer names the whole document.
std::string json_location(const std::string& file, const std::string& pointer);

// `text` with ASCII letters lower-cased: names users may type in any case ("CPU", "Quick").
std::string ascii_lower(std::string text);

}  // namespace zplan

#endif  // ZPLAN_BASE_INPUT_ERROR_H_
