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

// The kernel disk cache verifies and heals (CuPy's model): an entry is used only when it is an
// intact, owner-only regular file of the same key; truncated, padded, corrupted, foreign,
// symbolic-link and loosely-permitted entries are compiled again and replaced; folders are
// created 0700 and files 0600; one padding module serves every configuration of the same pixel
// types. Needs NVRTC (no GPU); skipped without it.

#include "itkNonLocalMeansKernelCache.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkNonLocalMeansKernelCompiler.h"
#include "itkNonLocalMeansOverrides.h"
#include "itkCudaDriver.h"
#include "itkGTest.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace
{
using itk::nlm::CompiledKernel;
using itk::nlm::KernelConfig;

/** The smallest kernel: 2D, patch 3, distance 0, one 8x8 tile of 32 threads. */
KernelConfig
SmallConfiguration()
{
  KernelConfig c;
  c.Dimension = 2;
  c.PatchSize = 3;
  c.PatchDistance = 0;
  c.Tile[0] = 8;
  c.Tile[1] = 8;
  c.Tile[2] = 1;
  c.Tile[3] = 1;
  c.ThreadCount = 32;
  return c;
}

/** A fresh cache folder (not yet created) in force for the test's lifetime. */
class KernelCacheTest : public ::testing::Test
{
protected:
  void
  SetUp() override
  {
    std::string why;
    m_Nvrtc = itk::cuda::GetNvrtc(why);
    if (m_Nvrtc == nullptr)
    {
      GTEST_SKIP() << "no NVRTC: " << why;
    }
    char pattern[] = "/tmp/nlm-kernel-cache-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    m_Root = pattern;
    m_Saved = itk::nlm::GetOverrides();
    itk::nlm::Overrides o = m_Saved;
    o.KernelCacheDirectory = m_Root + "/a/kernels";
    itk::nlm::SetOverrides(o);
  }
  void
  TearDown() override
  {
    if (!m_Root.empty())
    {
      itk::nlm::SetOverrides(m_Saved);
      const int status = std::system(("rm -rf '" + m_Root + "'").c_str());
      (void)status;
    }
  }
  CompiledKernel
  Compile() const
  {
    return itk::nlm::CompileKernel(*m_Nvrtc, SmallConfiguration(), 90);
  }

  const itk::cuda::NvrtcAPI * m_Nvrtc{ nullptr };
  std::string                 m_Root;
  itk::nlm::Overrides         m_Saved;
};
} // namespace

TEST_F(KernelCacheTest, ACompiledModuleIsStoredOwnerOnlyAndReadBack)
{
  const CompiledKernel first = Compile();
  ASSERT_FALSE(first.FromDiskCache);
  ASSERT_FALSE(first.CachePath.empty());
  struct stat file, folder;
  ASSERT_EQ(stat(first.CachePath.c_str(), &file), 0);
  ASSERT_EQ(stat((m_Root + "/a/kernels").c_str(), &folder), 0);
  EXPECT_EQ(file.st_mode & 0777, 0600u);
  EXPECT_EQ(folder.st_mode & 0777, 0700u);
  const CompiledKernel second = Compile();
  EXPECT_TRUE(second.FromDiskCache);
  EXPECT_EQ(second.Image, first.Image);
  EXPECT_TRUE(itk::nlm::LooksLikeModuleImage(second.Image, second.IsPTX));
}

TEST_F(KernelCacheTest, DamagedEntriesAreCompiledAgainAndReplaced)
{
  const CompiledKernel reference = Compile();
  const std::string    path = reference.CachePath;
  const std::string    intact = itk::nlm_test::ReadFile(path);
  ASSERT_GT(intact.size(), 1000u);
  const std::vector<std::pair<std::string, std::function<void()>>> damages = {
    { "truncated", [&] { itk::nlm_test::WriteFile(path, intact.substr(0, intact.size() - 500)); } },
    { "cut in the header", [&] { itk::nlm_test::WriteFile(path, intact.substr(0, 60)); } },
    { "empty", [&] { itk::nlm_test::WriteFile(path, ""); } },
    { "padded", [&] { itk::nlm_test::WriteFile(path, intact + "garbage"); } },
    { "a flipped image byte",
      [&] {
        std::string                                                d = intact;
        d[d.size() - 300] ^= 0x5a;
        itk::nlm_test::WriteFile(path, d);
      } },
    { "garbage", [&] { itk::nlm_test::WriteFile(path, std::string(intact.size(), 'x')); } },
    { "the previous format",
      [&] { itk::nlm_test::WriteFile(path, "ITKCudaNonLocalMeans kernel cache 1\n" + intact.substr(36)); } },
    { "readable by others", [&] { ASSERT_EQ(chmod(path.c_str(), 0644), 0); } },
    { "a symbolic link to an intact copy",
      [&] {
        const std::string                                          elsewhere = m_Root + "/elsewhere.cubin";
        itk::nlm_test::WriteFile(elsewhere, intact);
        chmod(elsewhere.c_str(), 0600);
        std::remove(path.c_str());
        ASSERT_EQ(symlink(elsewhere.c_str(), path.c_str()), 0);
      } },
  };
  for (const auto & damage : damages)
  {
    damage.second();
    const CompiledKernel again = Compile();
    EXPECT_FALSE(again.FromDiskCache) << damage.first;
    EXPECT_FALSE(again.CacheProblem.empty()) << damage.first;
    EXPECT_EQ(again.Image, reference.Image) << damage.first;
    struct stat info;
    ASSERT_EQ(lstat(path.c_str(), &info), 0) << damage.first;
    EXPECT_TRUE(S_ISREG(info.st_mode)) << damage.first << ": replaced by a regular file";
    EXPECT_EQ(info.st_mode & 0777, 0600u) << damage.first;
    EXPECT_TRUE(Compile().FromDiskCache) << damage.first << ": the replacement is read back";
  }
}

TEST_F(KernelCacheTest, EntriesOfAnotherUserAreNotUsed)
{
  if (geteuid() != 0)
  {
    GTEST_SKIP() << "needs root to give a file to another user";
  }
  const CompiledKernel reference = Compile();
  ASSERT_EQ(chown(reference.CachePath.c_str(), 65534, 65534), 0);
  const CompiledKernel again = Compile();
  EXPECT_FALSE(again.FromDiskCache);
  EXPECT_NE(again.CacheProblem.find("another user"), std::string::npos) << again.CacheProblem;
  EXPECT_EQ(again.Image, reference.Image);
}

TEST_F(KernelCacheTest, AFolderOthersCanWriteIsNotUsed)
{
  const std::string folder = m_Root + "/a/kernels";
  ASSERT_EQ(std::system(("mkdir -p '" + folder + "' && chmod 0777 '" + folder + "'").c_str()), 0);
  const CompiledKernel first = Compile();
  EXPECT_FALSE(first.FromDiskCache);
  EXPECT_TRUE(first.CachePath.empty()) << "stored in a folder others can write: " << first.CachePath;
  EXPECT_FALSE(Compile().FromDiskCache);
}

TEST_F(KernelCacheTest, PTXForAnArchitectureNVRTCDoesNotKnowIsStoredAndReadBack)
{
  // A device newer than NVRTC: PTX for the newest architecture NVRTC knows, which the driver
  // finishes; the entry is text (no terminator inside) and is read back.
  const CompiledKernel first = itk::nlm::CompileKernel(*m_Nvrtc, SmallConfiguration(), 990);
  ASSERT_TRUE(first.IsPTX) << first.Target;
  EXPECT_TRUE(itk::nlm::LooksLikeModuleImage(first.Image, true));
  const CompiledKernel second = itk::nlm::CompileKernel(*m_Nvrtc, SmallConfiguration(), 990);
  EXPECT_TRUE(second.FromDiskCache) << second.CacheProblem;
  EXPECT_EQ(second.Image, first.Image);
}

TEST_F(KernelCacheTest, OnePaddingModuleServesEveryConfigurationOfTheSamePixelTypes)
{
  // nlm_pad is compiled into a module of its own, keyed by the input type, the arithmetic type and
  // the components only: a configuration of another kernel, patch, distance and tile reads the same
  // entry; another input type compiles another; a configuration's module carries no nlm_pad.
  const auto contains = [](const CompiledKernel & k, const std::string & name) {
    return std::search(k.Image.begin(), k.Image.end(), name.begin(), name.end()) != k.Image.end();
  };
  KernelConfig other = SmallConfiguration();
  other.Dimension = 3;
  other.PatchSize = 7;
  other.PatchDistance = 5;
  other.Tile[0] = 25;
  other.Rows = 2;
  const CompiledKernel first = itk::nlm::CompileKernel(*m_Nvrtc, itk::nlm::PaddingConfig(SmallConfiguration()), 90);
  EXPECT_FALSE(first.FromDiskCache);
  EXPECT_TRUE(contains(first, "nlm_pad"));
  EXPECT_FALSE(contains(first, "nlm_fast"));
  const CompiledKernel shared = itk::nlm::CompileKernel(*m_Nvrtc, itk::nlm::PaddingConfig(other), 90);
  EXPECT_TRUE(shared.FromDiskCache) << shared.CacheProblem;
  EXPECT_EQ(shared.CachePath, first.CachePath);
  other.InputDouble = true;
  const CompiledKernel doubles = itk::nlm::CompileKernel(*m_Nvrtc, itk::nlm::PaddingConfig(other), 90);
  EXPECT_FALSE(doubles.FromDiskCache);
  EXPECT_NE(doubles.CachePath, first.CachePath);
  const CompiledKernel configuration = Compile();
  EXPECT_TRUE(contains(configuration, "nlm_fast"));
  EXPECT_FALSE(contains(configuration, "nlm_pad"));
}
