// Writing output files so that nobody ever sees half of one.
//
// zplan writes ds_config.json files, traces, reports and calibrated profiles. A reader (or a
// user's next command) must see either no file / the previous file, or the whole new one -- also
// when zplan is killed halfway. The content is written to a hidden temporary file in the same
// directory, flushed to disk, and then moved into place with one rename (or, when replacing is
// not allowed, one link, so an existing file is never clobbered even by a race).
#ifndef ZPLAN_BASE_ATOMIC_FILE_H_
#define ZPLAN_BASE_ATOMIC_FILE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zplan {

// Writes `content` to `path` atomically, after check_output_file(path, overwrite). A symbolic
// link is written through: the file it names is replaced and the link stays. Throws InputError
// naming the path on any I/O failure; the temporary file is removed in every case.
void write_file_atomically(const std::string& path, std::string_view content, bool overwrite);

// Throws InputError naming `path` unless write_file_atomically(path, ..., overwrite) could
// create or replace it: the name is empty or ends in '/'; it exists and `overwrite` is false
// ("exists; pass --force to replace it"); it is, or links to, something other than a regular
// file (a device such as /dev/null, a pipe, a directory), which zplan never replaces; it is a
// link to nothing; its directory is missing or not writable. Commands call it before long work,
// so that a bad output path is reported before the work, not after it.
void check_output_file(const std::string& path, bool overwrite);

// True iff something exists at `path` (file, directory or link).
bool path_exists(const std::string& path);

// Whether two paths name the same file: the same file on disk when both exist (through links,
// hard links included), else the same path once ".", ".." and links are resolved.
bool same_file(const std::string& a, const std::string& b);

// Throws InputError naming `flag` when `out`, an output path, names a file the command reads:
// one of `inputs` ({flag, path}; empty paths and paths that name no file are skipped). An output
// never replaces an input, --force or not.
void check_output_not_input(const std::string& flag, const std::string& out,
                            const std::vector<std::pair<std::string, std::string>>& inputs);

}  // namespace zplan

#endif  // ZPLAN_BASE_ATOMIC_FILE_H_
