#include "base/input_error.h"

namespace zplan {

InputError::InputError(const std::string& where, const std::string& problem)
    : std::runtime_error(where.empty() ? problem : where + ": " + problem),
      where_(where),
      problem_(problem) {}

std::string json_location(const std::string& file, const std::string& pointer) {
  if (pointer.empty()) return file;
  return file + ": " + pointer;
}

std::string ascii_lower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

}  // namespace zplan
