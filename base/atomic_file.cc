#include "base/atomic_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/input_error.h"

namespace zplan {

namespace {

std::string errno_text(int err) { return std::generic_category().message(err); }

// The directory part of `path` ("." when there is none) and the file name.
void split_path(const std::string& path, std::string* dir, std::string* base) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    *dir = ".";
    *base = path;
  } else {
    *dir = slash == 0 ? "/" : path.substr(0, slash);
    *base = path.substr(slash + 1);
  }
}

// The file check_output_file(path, overwrite) allows writing: `path`, or the file a link at
// `path` names. Sets *dir and *base to its directory and name.
std::string checked_target(const std::string& path, bool overwrite, std::string* dir,
                           std::string* base) {
  if (path.empty()) throw InputError("", "empty output file name");
  std::string target = path;
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    // What cannot be replaced at all is said first: --force would not help there.
    if (S_ISLNK(st.st_mode)) {
      char* resolved = realpath(path.c_str(), nullptr);
      if (resolved == nullptr) {
        throw InputError(path, "is a symbolic link to nothing (" + errno_text(errno) +
                                   "); zplan writes through a link only to an existing file");
      }
      target = resolved;
      std::free(resolved);
      if (stat(target.c_str(), &st) != 0) {
        throw InputError(path, "cannot read what the link names: " + errno_text(errno));
      }
    }
    if (!S_ISREG(st.st_mode)) {
      const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                         : S_ISCHR(st.st_mode)  ? "a character device"
                         : S_ISBLK(st.st_mode)  ? "a block device"
                         : S_ISFIFO(st.st_mode) ? "a pipe"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                                                : "not a regular file";
      throw InputError(path, std::string("is ") + (target != path ? "a link to " : "") + what +
                                 "; zplan replaces only regular files");
    }
    if (!overwrite) throw InputError(path, "exists; pass --force to replace it");
  }
  split_path(target, dir, base);
  if (base->empty()) throw InputError(path, "is a directory name, expected a file name");
  // The same words as a failing mkstemp, but before any work is done. (access() on a regular
  // file in the directory's place reports EACCES as root, where creating in it fails ENOTDIR.)
  struct stat dir_st;
  if (stat(dir->c_str(), &dir_st) == 0 && !S_ISDIR(dir_st.st_mode)) {
    throw InputError(path, "cannot create a file here: " + errno_text(ENOTDIR) + " (" + *dir +
                               " is not a directory)");
  }
  if (access(dir->c_str(), W_OK | X_OK) != 0) {
    throw InputError(path, "cannot create a file here: " + errno_text(errno));
  }
  return target;
}

}  // namespace

bool path_exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code e;
  if (std::filesystem::equivalent(a, b, e) && !e) return true;
  std::error_code ea, eb;
  const std::filesystem::path pa = std::filesystem::weakly_canonical(a, ea);
  const std::filesystem::path pb = std::filesystem::weakly_canonical(b, eb);
  if (ea || eb) return a == b;
  return pa == pb;
}

void check_output_not_input(const std::string& flag, const std::string& out,
                            const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (out.empty()) return;
  for (const auto& [in_flag, in_path] : inputs) {
    struct stat st;
    if (in_path.empty() || stat(in_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (same_file(out, in_path)) {
      throw InputError(flag, out + " is also " + in_flag +
                                 ", a file this command reads; write the output elsewhere");
    }
  }
}

void check_output_file(const std::string& path, bool overwrite) {
  std::string dir, base;
  checked_target(path, overwrite, &dir, &base);
}

void write_file_atomically(const std::string& path, std::string_view content, bool overwrite) {
  std::string dir, base;
  const std::string target = checked_target(path, overwrite, &dir, &base);
  // Hidden, unique, in the same directory (so the final rename cannot cross file systems).
  std::string tmpl = dir + "/." + base + ".tmp-XXXXXX";
  int fd = mkstemp(tmpl.data());
  if (fd < 0) throw InputError(path, "cannot create a file here: " + errno_text(errno));
  const std::string tmp = tmpl;
  auto fail = [&](const std::string& what) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    throw InputError(path, what + ": " + errno_text(err));
  };
  // mkstemp creates mode 0600; give the file the usual mode for user output.
  mode_t mask = umask(0);
  umask(mask);
  if (fchmod(fd, 0666 & ~mask) != 0) fail("cannot set permissions");
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) fail("fsync failed");
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw InputError(path, "close failed: " + errno_text(err));
  }
  if (overwrite) {
    if (rename(tmp.c_str(), target.c_str()) != 0) {
      int err = errno;
      unlink(tmp.c_str());
      throw InputError(path, "cannot move into place: " + errno_text(err));
    }
  } else {
    // link() fails with EEXIST instead of replacing, closing the race with the check above.
    if (link(tmp.c_str(), target.c_str()) != 0) {
      int err = errno;
      unlink(tmp.c_str());
      if (err == EEXIST) throw InputError(path, "exists; pass --force to replace it");
      throw InputError(path, "cannot move into place: " + errno_text(err));
    }
    unlink(tmp.c_str());
  }
}

}  // namespace zplan
