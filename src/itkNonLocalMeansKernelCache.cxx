/*=========================================================================
 *
 *  Copyright NumFOCUS
 *
 *  Licensed under the Apache License, Version 2.0 (the "License");
 *  you may not use this file except in compliance with the License.
 *  You may obtain a copy of the License at
 *
 *         https://www.apache.org/licenses/LICENSE-2.0.txt
 *
 *  Unless required by applicable law or agreed to in writing, software
 *  distributed under the License is distributed on an "AS IS" BASIS,
 *  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 *  See the License for the specific language governing permissions and
 *  limitations under the License.
 *
 *=========================================================================*/
#include "itkNonLocalMeansKernelCache.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#if defined(_WIN32)
#  include <direct.h>
#  include <process.h>
#else
#  include <fcntl.h>
#  include <sys/stat.h>
#  include <unistd.h>
#endif

namespace itk
{
namespace nlm
{
namespace
{
const char kMagic[] = "ITKCudaNonLocalMeans kernel cache 2\n";
// Entries larger than this are not read (a module image is a few hundred KiB).
constexpr std::size_t MostEntryBytes = std::size_t{ 64 } << 20;

/** The text before the image: magic, key, kind, image length and hash. */
std::string
EntryHeader(const std::string & key, bool isPTX, const std::vector<char> & image)
{
  std::ostringstream header;
  header << kMagic << key.size() << "\n"
         << key << "\n"
         << (isPTX ? 'P' : 'C') << ' ' << image.size() << ' ' << HashHex(std::string(image.begin(), image.end()))
         << "\n";
  return header.str();
}

#if !defined(_WIN32)
/** Reads a whole entry file without following a symbolic link; `why` says why not. */
bool
ReadOwnEntryFile(const std::string & path, std::string & contents, bool & damaged, std::string & why)
{
  damaged = false;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK); // no wait on a FIFO
  if (fd < 0)
  {
    if (errno == ELOOP)
    {
      why = "it is a symbolic link";
      damaged = true; // not followed; replaced by a file of the user's
    }
    return false;
  }
  struct stat info;
  const bool  statted = fstat(fd, &info) == 0;
  if (!statted || !S_ISREG(info.st_mode) || info.st_uid != geteuid() || (info.st_mode & 077) != 0 ||
      static_cast<std::size_t>(info.st_size) > MostEntryBytes)
  {
    why = !statted || !S_ISREG(info.st_mode) ? "it is not a regular file"
          : info.st_uid != geteuid()         ? "it belongs to another user"
          : (info.st_mode & 077) != 0        ? "others may read or write it"
                                             : "it is too large";
    damaged = statted && S_ISREG(info.st_mode) && info.st_uid == geteuid();
    close(fd);
    return false;
  }
  contents.resize(static_cast<std::size_t>(info.st_size));
  std::size_t done = 0;
  while (done < contents.size())
  {
    const ssize_t n = read(fd, &contents[done], contents.size() - done);
    if (n <= 0)
    {
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  close(fd);
  if (done != contents.size())
  {
    why = "it could not be read";
    return false;
  }
  return true;
}

/** Creates the missing folders of `path`, owner-only; true when the last one is a folder of the
 * user's that others cannot write. */
bool
MakeOwnDirectories(const std::string & path)
{
  std::string partial;
  for (std::size_t i = 0; i <= path.size(); ++i)
  {
    if ((i == path.size() || path[i] == '/') && !partial.empty())
    {
      mkdir(partial.c_str(), 0700); // exists already, or created owner-only
    }
    if (i < path.size())
    {
      partial += path[i];
    }
  }
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == geteuid() &&
         (info.st_mode & 022) == 0;
}

/** Writes `data` to a new owner-only file; false (and no file) on any error. */
bool
WriteNewFile(const std::string & path, const std::string & data)
{
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
  {
    return false;
  }
  std::size_t done = 0;
  while (done < data.size())
  {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n <= 0)
    {
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  const bool ok = close(fd) == 0 && done == data.size();
  if (!ok)
  {
    unlink(path.c_str());
  }
  return ok;
}
#else
bool
ReadOwnEntryFile(const std::string & path, std::string & contents, bool & damaged, std::string & why)
{
  damaged = false;
  std::ifstream in(path, std::ios::binary);
  if (!in)
  {
    return false;
  }
  contents.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  (void)why;
  return contents.size() <= MostEntryBytes;
}

bool
MakeOwnDirectories(const std::string & path)
{
  std::string partial;
  for (std::size_t i = 0; i <= path.size(); ++i)
  {
    if ((i == path.size() || path[i] == '/' || path[i] == '\\') && !partial.empty())
    {
      _mkdir(partial.c_str());
    }
    if (i < path.size())
    {
      partial += path[i];
    }
  }
  struct _stat info;
  return _stat(path.c_str(), &info) == 0;
}

bool
WriteNewFile(const std::string & path, const std::string & data)
{
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out)
  {
    std::remove(path.c_str());
    return false;
  }
  return true;
}
#endif

int
ProcessId()
{
#if defined(_WIN32)
  return _getpid();
#else
  return static_cast<int>(getpid());
#endif
}
} // namespace

std::string
HashHex(const std::string & text)
{
  // Two independent 64-bit FNV-1a style lanes.
  unsigned long long a = 1469598103934665603ull;
  unsigned long long b = 7809847782465536322ull;
  for (unsigned char c : text)
  {
    a = (a ^ c) * 1099511628211ull;
    b = (b ^ (c + 0x9eu)) * 0x100000001b3ull;
    b ^= b >> 29;
  }
  std::ostringstream os;
  os << std::hex << std::setfill('0') << std::setw(16) << a << std::setw(16) << b;
  return os.str();
}

bool
LooksLikeModuleImage(const std::vector<char> & image, bool isPTX)
{
  if (isPTX)
  {
    const std::string text(image.begin(), image.end());
    return text.find('\0') == std::string::npos && text.find(".version") != std::string::npos &&
           text.find(".target") != std::string::npos;
  }
  // A 64-bit little-endian ELF object.
  return image.size() > 64 && image[0] == 0x7f && image[1] == 'E' && image[2] == 'L' && image[3] == 'F' &&
         image[4] == 2 && image[5] == 1;
}

bool
ReadCacheEntry(const std::string & path,
               const std::string & key,
               bool                isPTX,
               std::vector<char> & image,
               std::string &       why)
{
  std::string contents;
  bool        damaged = false;
  if (!ReadOwnEntryFile(path, contents, damaged, why))
  {
    if (damaged)
    {
      RemoveCacheEntry(path);
    }
    return false;
  }
  // The header names the key, the kind, the image's length and its hash; all must match.
  const std::string prefix = kMagic + std::to_string(key.size()) + "\n" + key + "\n" + (isPTX ? 'P' : 'C') + ' ';
  std::size_t       length = 0;
  std::string       hash;
  bool              intact = contents.compare(0, prefix.size(), prefix) == 0;
  std::size_t       imageStart = 0;
  if (intact)
  {
    const std::size_t  end = contents.find('\n', prefix.size());
    std::istringstream fields(contents.substr(prefix.size(), end == std::string::npos ? 0 : end - prefix.size()));
    intact = end != std::string::npos && (fields >> length >> hash) && fields.eof();
    imageStart = end + 1;
  }
  intact = intact && contents.size() - imageStart == length && HashHex(contents.substr(imageStart)) == hash;
  if (intact)
  {
    image.assign(contents.begin() + static_cast<std::ptrdiff_t>(imageStart), contents.end());
    intact = LooksLikeModuleImage(image, isPTX);
  }
  if (!intact)
  {
    why = "it is damaged or of another version (its header, length or hash does not match)";
    image.clear();
    RemoveCacheEntry(path);
  }
  return intact;
}

bool
WriteCacheEntry(const std::string &       directory,
                const std::string &       path,
                const std::string &       key,
                bool                      isPTX,
                const std::vector<char> & image)
{
  if (!MakeOwnDirectories(directory))
  {
    return false; // not a folder of the user's that others cannot write: do not use it
  }
  // A unique temporary file renamed into place: processes starting at once never see a partial file.
  std::random_device rd;
  const std::string  temporary = path + ".tmp." + std::to_string(ProcessId()) + "." + std::to_string(rd());
  std::string        data = EntryHeader(key, isPTX, image);
  data.append(image.begin(), image.end());
  if (!WriteNewFile(temporary, data))
  {
    return false;
  }
#if defined(_WIN32)
  std::remove(path.c_str());
#endif
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
  {
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

void
RemoveCacheEntry(const std::string & path)
{
#if defined(_WIN32)
  std::remove(path.c_str());
#else
  struct stat info;
  if (lstat(path.c_str(), &info) == 0 && (S_ISLNK(info.st_mode) || info.st_uid == geteuid()))
  {
    unlink(path.c_str()); // a link itself, never its target
  }
#endif
}

} // namespace nlm
} // namespace itk
