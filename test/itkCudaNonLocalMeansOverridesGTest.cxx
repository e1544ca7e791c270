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

// The environment is read in one place (itk::nlm::ReadOverrides): valid values are taken, junk is
// refused with a message that names the variable and the value to use.

#include "itkNonLocalMeansOverrides.h"
#include "itkGTest.h"

#include <cstdlib>
#include <string>

namespace
{
/** Sets an environment variable for the lifetime of the object. */
class ScopedVariable
{
public:
  ScopedVariable(const char * name, const char * value)
    : m_Name(name)
  {
    const char * previous = std::getenv(name);
    m_HadValue = previous != nullptr;
    m_Previous = previous ? previous : "";
    Set(value);
  }
  ~ScopedVariable() { Set(m_HadValue ? m_Previous.c_str() : nullptr); }
  ScopedVariable(const ScopedVariable &) = delete;
  ScopedVariable &
  operator=(const ScopedVariable &) = delete;

private:
  void
  Set(const char * value)
  {
#if defined(_WIN32)
    _putenv_s(m_Name.c_str(), value ? value : "");
#else
    if (value)
    {
      setenv(m_Name.c_str(), value, 1);
    }
    else
    {
      unsetenv(m_Name.c_str());
    }
#endif
  }

  std::string m_Name;
  std::string m_Previous;
  bool        m_HadValue{ false };
};

/** ReadOverrides' refusal for `variable` set to `value` ("" when accepted). */
std::string
RefusalOf(const char * variable, const char * value)
{
  const ScopedVariable set(variable, value);
  return itk::nlm::ReadOverrides().Invalid;
}
} // namespace

TEST(NonLocalMeansOverrides, ValidValuesAreTaken)
{
  const ScopedVariable device("CUDANONLOCALMEANS_DEVICE", "2");
  const ScopedVariable chunk("CUDANONLOCALMEANS_STAGING_CHUNK", "3001");
  const ScopedVariable tiles("CUDANONLOCALMEANS_CHUNK_TILES", "3");
  const ScopedVariable streams("CUDANONLOCALMEANS_KERNEL_STREAMS", "1");
  const ScopedVariable tile("CUDANONLOCALMEANS_TILE", "16,16,8,1,256");
  const ScopedVariable columns("CUDANONLOCALMEANS_COLUMNS", "0");
  const ScopedVariable footprint("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", "global");
  const ScopedVariable sharedRows("CUDANONLOCALMEANS_SHARED_ROWS", "4,8,2");
  const ScopedVariable options("CUDANONLOCALMEANS_NVRTC_OPTIONS", " -lineinfo  -Xptxas=-v ");
  const ScopedVariable cache("CUDANONLOCALMEANS_KERNEL_CACHE_DIR", "/tmp/nlm-kernels");
  const auto           o = itk::nlm::ReadOverrides();
  EXPECT_EQ(o.Invalid, "");
  EXPECT_EQ(o.Devices, (std::vector<int>{ 2 }));
  EXPECT_EQ(o.StagingChunkBytes, 2992u); // whole 16-byte elements
  EXPECT_EQ(o.ChunkTiles, 3);
  EXPECT_EQ(o.KernelStreams, 1);
  EXPECT_EQ(o.TileShape, (std::vector<int>{ 16, 16, 8, 1, 256, 1, 1 }));
  EXPECT_TRUE(o.ColumnKernelOff);
  EXPECT_EQ(o.ColumnFootprint, "global");
  EXPECT_EQ(o.SharedRowsShape, (std::vector<int>{ 4, 8, 2 }));
  EXPECT_EQ(o.NvrtcOptions, (std::vector<std::string>{ "-lineinfo", "-Xptxas=-v" }));
  EXPECT_EQ(o.KernelCacheDirectory, "/tmp/nlm-kernels");
}

TEST(NonLocalMeansOverrides, SeveralDevicesCanBeNamed)
{
  {
    const ScopedVariable devices("CUDANONLOCALMEANS_DEVICE", "0,1,0");
    EXPECT_EQ(itk::nlm::ReadOverrides().Devices, (std::vector<int>{ 0, 1, 0 }));
  }
  EXPECT_EQ(itk::nlm::ReadOverrides().Devices, (std::vector<int>{ 0 })) << "default: device 0";
  for (const char * junk : { "0,", ",1", "0,,1", "0;1", "0,-1" })
  {
    EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_DEVICE", junk).find("a list of them"), std::string::npos) << junk;
  }
}

TEST(NonLocalMeansOverrides, TheDiskCacheCanBeSwitchedOff)
{
  const ScopedVariable off("CUDANONLOCALMEANS_KERNEL_CACHE", "0");
  EXPECT_EQ(itk::nlm::ReadOverrides().KernelCacheDirectory, "");
}

TEST(NonLocalMeansOverrides, JunkIsRefusedNamingTheVariable)
{
  for (const char * device : { "abc", "-1", "1.5", "3x" })
  {
    const std::string why = RefusalOf("CUDANONLOCALMEANS_DEVICE", device);
    EXPECT_NE(why.find("CUDANONLOCALMEANS_DEVICE is \"" + std::string(device) + "\""), std::string::npos) << why;
    EXPECT_NE(why.find("device ordinal"), std::string::npos) << why;
  }
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_STAGING_CHUNK", "12").find("at least 64"), std::string::npos);
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_CHUNK_TILES", "0").find("CUDANONLOCALMEANS_CHUNK_TILES"), std::string::npos);
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_KERNEL_STREAMS", "3").find("1 or 2"), std::string::npos);
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_COLUMNS", "2,2").find("rows,planes,warps,blocks"), std::string::npos);
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_COLUMNS", "1,1,64,1").find("warps at most 32"), std::string::npos);
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", "L1").find("shared, global or auto"), std::string::npos);
  EXPECT_EQ(RefusalOf("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", "auto"), "");
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_SHARED_ROWS", "8,16").find("planes,warps,blocks"), std::string::npos);
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_SHARED_ROWS", "8,33,1").find("warps at most 32"), std::string::npos);
  {
    const ScopedVariable off("CUDANONLOCALMEANS_SHARED_ROWS", "0");
    EXPECT_TRUE(itk::nlm::ReadOverrides().SharedRowsKernelOff);
  }
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_TILE", "8,8").find("CUDANONLOCALMEANS_TILE"), std::string::npos);
  EXPECT_EQ(RefusalOf("CUDANONLOCALMEANS_DEVICE", "0"), "");
  EXPECT_FALSE(itk::nlm::ReadOverrides().SplitBoxesForced || itk::nlm::ReadOverrides().SplitBoxesOff);
  for (const char * split : { "0", "1" })
  {
    const ScopedVariable variable("CUDANONLOCALMEANS_SPLIT_BOXES", split);
    const auto           s = itk::nlm::ReadOverrides();
    EXPECT_EQ(s.SplitBoxesOff, std::string(split) == "0");
    EXPECT_EQ(s.SplitBoxesForced, std::string(split) == "1");
  }
  EXPECT_EQ(RefusalOf("CUDANONLOCALMEANS_SPLIT_BOXES", "auto"), "");
  EXPECT_NE(RefusalOf("CUDANONLOCALMEANS_SPLIT_BOXES", "yes").find("0, 1 or auto"), std::string::npos);
}

TEST(NonLocalMeansOverrides, TheBufferedWeightsKernelCanBeSwitchedAndShaped)
{
  {
    const ScopedVariable shape("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "16,32,24");
    const auto           o = itk::nlm::ReadOverrides();
    EXPECT_EQ(o.Invalid, "");
    EXPECT_TRUE(o.BufferedWeightsForced) << "a shape forces the kernel";
    EXPECT_FALSE(o.BufferedWeightsOff);
    EXPECT_EQ(o.BufferedWeightsShape, (std::vector<int>{ 16, 32, 24 }));
  }
  {
    const ScopedVariable shape("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "32,128,12");
    const auto           o = itk::nlm::ReadOverrides();
    EXPECT_EQ(o.Invalid, "") << "32 warps: a block of 1024 threads";
    EXPECT_EQ(o.BufferedWeightsShape, (std::vector<int>{ 32, 128, 12 }));
  }
  for (const char * value : { "0", "1", "auto", "" })
  {
    const ScopedVariable set("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", value);
    const auto           o = itk::nlm::ReadOverrides();
    EXPECT_EQ(o.Invalid, "") << value;
    EXPECT_TRUE(o.BufferedWeightsShape.empty()) << value;
    EXPECT_EQ(o.BufferedWeightsOff, std::string(value) == "0") << value;
    EXPECT_EQ(o.BufferedWeightsForced, std::string(value) == "1") << value;
  }
  for (const char * junk : { "yes", "8,64", "8,64,12,1", "33,64,12", "8,1025,12", "8,64,1025", "8,0,12", "8,-1,12" })
  {
    const ScopedVariable set("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", junk);
    const auto           o = itk::nlm::ReadOverrides();
    EXPECT_NE(o.Invalid.find("CUDANONLOCALMEANS_BUFFERED_WEIGHTS is \"" + std::string(junk) + "\""), std::string::npos)
      << o.Invalid;
    EXPECT_NE(o.Invalid.find("warps,planes,pairs"), std::string::npos) << o.Invalid;
    EXPECT_TRUE(o.BufferedWeightsShape.empty()) << junk;
  }
}

TEST(NonLocalMeansOverrides, WhatTestsSetIsWhatTheLibraryUses)
{
  const itk::nlm::Overrides saved = itk::nlm::GetOverrides();
  itk::nlm::Overrides       changed = saved;
  changed.ChunkTiles = 7;
  itk::nlm::SetOverrides(changed);
  EXPECT_EQ(itk::nlm::GetOverrides().ChunkTiles, 7);
  itk::nlm::SetOverrides(saved);
  EXPECT_EQ(itk::nlm::GetOverrides().ChunkTiles, saved.ChunkTiles);
}
