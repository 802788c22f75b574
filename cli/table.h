// A plain-text table for stdout: columns padded to their widest cell, numbers right-aligned.
#ifndef ZPLAN_CLI_TABLE_H_
#define ZPLAN_CLI_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace zplan::cli {

class Table {
 public:
  // `right_aligned[i]` says whether column i is right-aligned (numbers); missing entries: left.
  explicit Table(std::vector<std::string> header, std::vector<bool> right_aligned = {});

  void add_row(std::vector<std::string> cells);  // REQUIRES: cells.size() == header.size()
  void print(std::ostream& out, const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace zplan::cli

#endif  // ZPLAN_CLI_TABLE_H_
