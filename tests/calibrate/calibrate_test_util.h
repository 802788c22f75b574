// Helpers for the calibrate/ tests: a scratch directory and what is in it.
#ifndef ZPLAN_TESTS_CALIBRATE_CALIBRATE_TEST_UTIL_H_
#define ZPLAN_TESTS_CALIBRATE_CALIBRATE_TEST_UTIL_H_

#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include <dirent.h>

namespace zplan::calibrate::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with whatever is left in it.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") +
                       "/zplan-calibrate-test-XXXXXX";
    path_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    for (const std::string& name : entries(path_)) unlink((path_ + "/" + name).c_str());
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }

  // Names in `dir` except "." and "..", hidden ones included.
  static std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return names;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
    return names;
  }

 private:
  std::string path_;
};

}  // namespace zplan::calibrate::testing

#endif  // ZPLAN_TESTS_CALIBRATE_CALIBRATE_TEST_UTIL_H_
