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
#include "itkNonLocalMeansStagedCopies.h"
#include "itkNonLocalMeansInputChecks.h"
#include "itkNonLocalMeansParallelFor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#  include <sys/mman.h>
#endif

namespace itk
{
namespace nlm
{
namespace
{
constexpr std::size_t HugePage = std::size_t{ 2 } << 20;
constexpr std::size_t CopyBlock = std::size_t{ 1 } << 20; // bytes per work item of a host copy
} // namespace

void
AdviseHugePages(void * data, std::size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(data) + HugePage - 1) / HugePage * HugePage;
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / HugePage * HugePage;
  if (end > begin)
  {
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE); // a hint: failure is harmless
  }
#else
  (void)data;
  (void)bytes;
#endif
}

bool
StagingPool::Acquire(void ** buffers, int count, MultiThreaderBase * threader, unsigned int workUnits)
{
  {
    const std::lock_guard<std::mutex> lock(m_Mutex);
    if (m_Free.size() >= static_cast<std::size_t>(count))
    {
      for (int b = 0; b < count; ++b)
      {
        buffers[b] = m_Free.back();
        m_Free.pop_back();
      }
      return true;
    }
  }
  const std::vector<void *> added = NewBuffers(count, threader, workUnits);
  if (static_cast<int>(added.size()) == count)
  {
    std::copy(added.begin(), added.end(), buffers);
    return true;
  }
  const std::lock_guard<std::mutex> lock(m_Mutex);
  m_Free.insert(m_Free.end(), added.begin(), added.end());
  return false;
}

void
StagingPool::Release(void * buffer)
{
  const std::lock_guard<std::mutex> lock(m_Mutex);
  m_Free.push_back(buffer);
}

/** One block asked for huge pages, touched by the threader's work units and registered with the
 * driver costs a few milliseconds, where cuMemAllocHost takes about 0.5 ms per MiB (it remains the
 * fallback). */
std::vector<void *>
StagingPool::NewBuffers(int count, MultiThreaderBase * threader, unsigned int workUnits)
{
  const std::size_t   bytes = static_cast<std::size_t>(count) * StagingBytes;
  std::vector<void *> added;
  void *              raw = std::malloc(bytes + HugePage); // kept for the life of the process once registered
  if (raw != nullptr)
  {
    char * block =
      reinterpret_cast<char *>((reinterpret_cast<std::uintptr_t>(raw) + HugePage - 1) / HugePage * HugePage);
    AdviseHugePages(block, bytes);
    ParallelFor(threader, workUnits, static_cast<std::int64_t>(bytes / CopyBlock), [&](std::int64_t i) {
      std::memset(block + static_cast<std::size_t>(i) * CopyBlock, 0, CopyBlock);
    });
    if (m_Driver.cuMemHostRegister(block, bytes, 0) == cuda::CUDA_SUCCESS)
    {
      for (int b = 0; b < count; ++b)
      {
        added.push_back(block + static_cast<std::size_t>(b) * StagingBytes);
      }
    }
    else
    {
      std::free(raw);
    }
  }
  for (int b = static_cast<int>(added.size()); b < count; ++b)
  {
    void * buffer = nullptr;
    if (m_Driver.cuMemAllocHost(&buffer, StagingBytes) != cuda::CUDA_SUCCESS)
    {
      break;
    }
    added.push_back(buffer);
  }
  return added;
}

StagedCopies::StagedCopies(CUDADevice &        device,
                           MultiThreaderBase * threader,
                           unsigned int        workUnits,
                           std::size_t         chunkBytes)
  : m_Device(device)
  , m_Driver(device.Driver())
  , m_Threader(threader)
  , m_WorkUnits(workUnits)
{
  for (int b = 0; b < Buffers; ++b)
  {
    m_Events[b] = std::make_unique<Event>(m_Driver);
  }
  if (chunkBytes > 0 && chunkBytes < m_Chunk)
  {
    m_Chunk = chunkBytes;
  }
}

StagedCopies::~StagedCopies()
{
  if (m_Buffers[0] != nullptr)
  {
    for (int b = 0; b < Buffers; ++b)
    {
      m_Driver.cuEventSynchronize(m_Events[b]->Get()); // from a destructor: nothing to report to
      m_Device.Staging().Release(m_Buffers[b]);
    }
  }
}

bool
StagedCopies::Staged(std::size_t bytes)
{
  if (bytes < 2 * m_Chunk || m_Unavailable)
  {
    return false;
  }
  if (m_Buffers[0] == nullptr && !m_Device.Staging().Acquire(m_Buffers.data(), Buffers, m_Threader, m_WorkUnits))
  {
    m_Unavailable = true;
    return false;
  }
  return true;
}

void
StagedCopies::Upload(cuda::CUdeviceptr                 device,
                     const char *                      host,
                     std::size_t                       bytes,
                     cuda::CUstream                    stream,
                     bool                              staged,
                     std::atomic<bool> *               nonFinite,
                     NonLocalMeansBackend::ElementType type)
{
  if (!staged)
  {
    ITK_NLM_CUDA_CHECK(m_Driver, cuMemcpyHtoDAsync(device, host, bytes, stream));
    return;
  }
  for (std::size_t at = 0; at < bytes; at += m_Chunk)
  {
    const std::size_t length = std::min(m_Chunk, bytes - at);
    const int         b = Take();
    Copy(static_cast<char *>(m_Buffers[b]), host + at, length, nonFinite, type);
    ITK_NLM_CUDA_CHECK(m_Driver, cuMemcpyHtoDAsync(device + at, m_Buffers[b], length, stream));
    m_Events[b]->Record(stream);
  }
}

void
StagedCopies::Download(char * host, cuda::CUdeviceptr device, std::size_t bytes, cuda::CUstream stream, bool staged)
{
  if (!staged)
  {
    ITK_NLM_CUDA_CHECK(m_Driver, cuMemcpyDtoHAsync(host, device, bytes, stream));
    ITK_NLM_CUDA_CHECK_WORK(m_Driver, cuStreamSynchronize(stream), "the non-local means kernels");
    return;
  }
  constexpr std::size_t    depth = Buffers; // chunks in flight
  const std::size_t        chunks = (bytes + m_Chunk - 1) / m_Chunk;
  std::array<int, Buffers> slot{};
  auto                     enqueue = [&](std::size_t i) {
    const int b = Take();
    slot[i % depth] = b;
    ITK_NLM_CUDA_CHECK(
      m_Driver, cuMemcpyDtoHAsync(m_Buffers[b], device + i * m_Chunk, std::min(m_Chunk, bytes - i * m_Chunk), stream));
    m_Events[b]->Record(stream);
  };
  for (std::size_t i = 0; i < chunks && i < depth; ++i)
  {
    enqueue(i);
  }
  for (std::size_t i = 0; i < chunks; ++i)
  {
    const int b = slot[i % depth];
    ITK_NLM_CUDA_CHECK_WORK(m_Driver, cuEventSynchronize(m_Events[b]->Get()), "the non-local means kernels");
    Copy(host + i * m_Chunk, static_cast<const char *>(m_Buffers[b]), std::min(m_Chunk, bytes - i * m_Chunk));
    if (i + depth < chunks)
    {
      enqueue(i + depth);
    }
  }
}

/** The next buffer in turn, once its previous copy has completed. */
int
StagedCopies::Take()
{
  const int b = m_Next;
  m_Next = (m_Next + 1) % Buffers;
  ITK_NLM_CUDA_CHECK_WORK(m_Driver, cuEventSynchronize(m_Events[b]->Get()), "a copy between host and GPU");
  return b;
}

/** memcpy by the threader's work units, in blocks of CopyBlock; with `nonFinite`, each block copied
 * is also checked for values (of type `type`) that are not finite. */
void
StagedCopies::Copy(char *                            to,
                   const char *                      from,
                   std::size_t                       bytes,
                   std::atomic<bool> *               nonFinite,
                   NonLocalMeansBackend::ElementType type) const
{
  const std::size_t element = ElementBytes(type);
  ParallelFor(
    m_Threader, m_WorkUnits, static_cast<std::int64_t>((bytes + CopyBlock - 1) / CopyBlock), [&](std::int64_t i) {
      const std::size_t at = static_cast<std::size_t>(i) * CopyBlock;
      const std::size_t length = std::min(CopyBlock, bytes - at);
      std::memcpy(to + at, from + at, length);
      if (nonFinite != nullptr && HoldsNonFinite(to + at, length / element, type))
      {
        *nonFinite = true;
      }
    });
}

} // namespace nlm
} // namespace itk
