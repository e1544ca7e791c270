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
#include "itkNonLocalMeansOverrides.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <sstream>

namespace itk
{
namespace nlm
{
namespace
{
// The most devices one Run uses.
constexpr std::size_t MaximumDevices = 16;

/** The variable's value, or "" when it is unset. The one call of getenv in the library. */
std::string
Variable(const char * name)
{
  const char * value = std::getenv(name);
  return value ? value : "";
}

/** Parses all of `text` as a decimal integer in [least, most]; false for junk, signs out of range
 * or trailing characters. */
bool
ParseInteger(const std::string & text, long long least, long long most, long long & value)
{
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-'))
  {
    return false; // no leading spaces or plus signs
  }
  errno = 0;
  char *          end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size() || parsed < least || parsed > most)
  {
    return false;
  }
  value = parsed;
  return true;
}

/** Parses a comma-separated list of integers of at least 1; false when any item is not one. */
bool
ParsePositiveList(const std::string & text, std::vector<int> & values)
{
  std::stringstream items(text);
  std::string       item;
  values.clear();
  if (text.empty() || text.back() == ',')
  {
    return false;
  }
  while (std::getline(items, item, ','))
  {
    long long v = 0;
    if (!ParseInteger(item, 1, 4096, v))
    {
      return false;
    }
    values.push_back(static_cast<int>(v));
  }
  return !values.empty();
}

/** Records the first refused variable in `why` (Overrides::Invalid or Overrides::CPUInvalid). */
void
Refuse(std::string & why, const char * variable, const std::string & value, const char * expected)
{
  if (why.empty())
  {
    why = std::string(variable) + " is \"" + value + "\"; set it to " + expected + " or unset it";
  }
}

void
Refuse(Overrides & o, const char * variable, const std::string & value, const char * expected)
{
  Refuse(o.Invalid, variable, value, expected);
}

std::string
DefaultKernelCacheDirectory()
{
  std::string flag = Variable("CUDANONLOCALMEANS_KERNEL_CACHE");
  std::transform(flag.begin(), flag.end(), flag.begin(), [](unsigned char c) { return std::tolower(c); });
  if (flag == "0" || flag == "off" || flag == "false" || flag == "no")
  {
    return "";
  }
  const std::string dir = Variable("CUDANONLOCALMEANS_KERNEL_CACHE_DIR");
  if (!dir.empty())
  {
    return dir;
  }
  const std::string xdg = Variable("XDG_CACHE_HOME");
  if (!xdg.empty())
  {
    return xdg + "/itk-cudanonlocalmeans/kernels";
  }
#if defined(_WIN32)
  const std::string local = Variable("LOCALAPPDATA");
  return local.empty() ? "" : local + "\\itk-cudanonlocalmeans\\kernels";
#else
  const std::string home = Variable("HOME");
  return home.empty() ? "" : home + "/.cache/itk-cudanonlocalmeans/kernels";
#endif
}

void
ReadDeviceAndLibraries(Overrides & o)
{
  const std::string device = Variable("CUDANONLOCALMEANS_DEVICE");
  std::vector<int>  ordinals;
  bool              valid = true;
  if (!device.empty())
  {
    std::stringstream items(device);
    std::string       item;
    while (std::getline(items, item, ','))
    {
      long long ordinal = 0;
      valid = valid && ParseInteger(item, 0, 1 << 16, ordinal);
      ordinals.push_back(static_cast<int>(ordinal));
    }
    valid = valid && !ordinals.empty() && device.back() != ',' && ordinals.size() <= MaximumDevices;
    if (valid)
    {
      o.Devices = ordinals;
    }
    else
    {
      Refuse(o, "CUDANONLOCALMEANS_DEVICE", device, "a device ordinal (0, 1, ...) or a list of them (0,1)");
    }
  }
  o.NvrtcLibrary = Variable("CUDANONLOCALMEANS_NVRTC_LIBRARY");
  o.NvrtcFallback = Variable("CUDANONLOCALMEANS_NVRTC_FALLBACK");
  for (const char * root : { "CUDA_PATH", "CUDA_HOME" })
  {
    const std::string value = Variable(root);
    if (!value.empty())
    {
      o.CudaRoots.push_back(value);
    }
  }
  o.KernelCacheDirectory = DefaultKernelCacheDirectory();
  std::istringstream words(Variable("CUDANONLOCALMEANS_NVRTC_OPTIONS"));
  std::string        word;
  while (words >> word)
  {
    o.NvrtcOptions.push_back(word);
  }
}

void
ReadTuningSeams(Overrides & o)
{
  const std::string chunk = Variable("CUDANONLOCALMEANS_STAGING_CHUNK");
  long long         bytes = 0;
  if (!chunk.empty() && !ParseInteger(chunk, 64, 1LL << 40, bytes))
  {
    Refuse(o, "CUDANONLOCALMEANS_STAGING_CHUNK", chunk, "a number of bytes of at least 64");
  }
  o.StagingChunkBytes = static_cast<std::size_t>(bytes) / 16 * 16; // whole elements in every chunk

  const std::string tiles = Variable("CUDANONLOCALMEANS_CHUNK_TILES");
  if (!tiles.empty() && !ParseInteger(tiles, 1, 1LL << 40, o.ChunkTiles))
  {
    Refuse(o, "CUDANONLOCALMEANS_CHUNK_TILES", tiles, "a number of tiles of at least 1");
  }

  const std::string streams = Variable("CUDANONLOCALMEANS_KERNEL_STREAMS");
  if (!streams.empty() && !ParseInteger(streams, 1, 2, o.KernelStreams))
  {
    Refuse(o, "CUDANONLOCALMEANS_KERNEL_STREAMS", streams, "1 or 2");
  }

  const std::string columns = Variable("CUDANONLOCALMEANS_COLUMNS");
  if (columns == "0")
  {
    o.ColumnKernelOff = true;
  }
  else if (!columns.empty() &&
           !(ParsePositiveList(columns, o.ColumnShape) && o.ColumnShape.size() == 4 && o.ColumnShape[2] <= 32))
  {
    o.ColumnShape.clear();
    Refuse(o, "CUDANONLOCALMEANS_COLUMNS", columns, "0 or rows,planes,warps,blocks (warps at most 32)");
  }

  const std::string footprint = Variable("CUDANONLOCALMEANS_COLUMN_FOOTPRINT");
  if (footprint == "shared" || footprint == "global")
  {
    o.ColumnFootprint = footprint;
  }
  else if (!footprint.empty() && footprint != "auto")
  {
    Refuse(o, "CUDANONLOCALMEANS_COLUMN_FOOTPRINT", footprint, "shared, global or auto");
  }

  const std::string sharedRows = Variable("CUDANONLOCALMEANS_SHARED_ROWS");
  if (sharedRows == "0")
  {
    o.SharedRowsKernelOff = true;
  }
  else if (!sharedRows.empty() && !(ParsePositiveList(sharedRows, o.SharedRowsShape) && o.SharedRowsShape.size() == 3 &&
                                    o.SharedRowsShape[1] <= 32))
  {
    o.SharedRowsShape.clear();
    Refuse(o, "CUDANONLOCALMEANS_SHARED_ROWS", sharedRows, "0 or planes,warps,blocks (warps at most 32)");
  }

  const std::string buffered = Variable("CUDANONLOCALMEANS_BUFFERED_WEIGHTS");
  if (buffered == "0" || buffered == "1")
  {
    o.BufferedWeightsOff = buffered == "0";
    o.BufferedWeightsForced = buffered == "1";
  }
  else if (ParsePositiveList(buffered, o.BufferedWeightsShape) && o.BufferedWeightsShape.size() == 3 &&
           o.BufferedWeightsShape[0] <= 32 && o.BufferedWeightsShape[1] <= 1024 && o.BufferedWeightsShape[2] <= 1024)
  {
    o.BufferedWeightsForced = true;
  }
  else if (!buffered.empty() && buffered != "auto")
  {
    o.BufferedWeightsShape.clear();
    Refuse(o,
           "CUDANONLOCALMEANS_BUFFERED_WEIGHTS",
           buffered,
           "0, 1, auto or warps,planes,pairs (warps at most 32, planes and pairs at most 1024)");
  }

  const std::string tile = Variable("CUDANONLOCALMEANS_TILE");
  if (!tile.empty() && !(ParsePositiveList(tile, o.TileShape) && o.TileShape.size() >= 5 && o.TileShape.size() <= 7))
  {
    o.TileShape.clear();
    Refuse(o, "CUDANONLOCALMEANS_TILE", tile, "t0,t1,t2,t3,threads[,segments[,blocks]]");
  }
  while (!o.TileShape.empty() && o.TileShape.size() < 7)
  {
    o.TileShape.push_back(1);
  }
  const std::string split = Variable("CUDANONLOCALMEANS_SPLIT_BOXES");
  if (split == "0" || split == "1")
  {
    o.SplitBoxesOff = split == "0";
    o.SplitBoxesForced = split == "1";
  }
  else if (!split.empty() && split != "auto")
  {
    Refuse(o, "CUDANONLOCALMEANS_SPLIT_BOXES", split, "0, 1 or auto");
  }
  const std::string cpuChunk = Variable("CUDANONLOCALMEANS_CPU_CHUNK");
  if (!cpuChunk.empty() && !ParseInteger(cpuChunk, 1, 1LL << 40, o.CPUChunkCells))
  {
    Refuse(o.CPUInvalid, "CUDANONLOCALMEANS_CPU_CHUNK", cpuChunk, "a number of output cells of at least 1");
  }
  o.CPUInstructionSet = Variable("CUDANONLOCALMEANS_CPU_SIMD"); // checked where it is used
  const std::string list = Variable("CUDANONLOCALMEANS_LIST_CONFIGURATIONS");
  o.ListConfigurations = !list.empty() && list != "0";
}

std::mutex &
OverridesMutex()
{
  static std::mutex mutex;
  return mutex;
}

Overrides &
OverridesInForce(bool & read)
{
  static Overrides overrides;
  static bool      wasRead = false;
  read = wasRead;
  wasRead = true;
  return overrides;
}
} // namespace

Overrides
ReadOverrides()
{
  Overrides o;
  ReadDeviceAndLibraries(o);
  ReadTuningSeams(o);
  return o;
}

Overrides
GetOverrides()
{
  const std::lock_guard<std::mutex> lock(OverridesMutex());
  bool                              read = false;
  Overrides &                       o = OverridesInForce(read);
  if (!read)
  {
    o = ReadOverrides();
  }
  return o;
}

void
SetOverrides(const Overrides & overrides)
{
  const std::lock_guard<std::mutex> lock(OverridesMutex());
  bool                              read = false;
  OverridesInForce(read) = overrides;
}

} // namespace nlm
} // namespace itk
