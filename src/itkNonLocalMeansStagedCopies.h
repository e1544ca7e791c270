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
#ifndef itkNonLocalMeansStagedCopies_h
#define itkNonLocalMeansStagedCopies_h

// Copies between pageable host memory and the device through the device's page-locked staging
// pool. Private to the library.

#include "itkNonLocalMeansCUDADevice.h"

#include <array>
#include <atomic>
#include <memory>

namespace itk
{
namespace nlm
{

/** Asks Linux to back the untouched pages of [data, data + bytes) with huge pages where it can
 * (transparent huge pages in "madvise" mode): the first write to a new buffer then faults once per
 * 2 MiB instead of once per 4 KiB. Only a hint. */
void
AdviseHugePages(void * data, std::size_t bytes);

/** \class StagedCopies
 * \brief Copies between pageable host memory and the device through page-locked staging buffers.
 *
 * The host side of each chunk is copied by the work units of the filter's threader while the
 * previous chunk is in flight, which is several times faster than the driver's own staging of
 * pageable memory. Without page-locked memory, or for small transfers, the plain driver copy is
 * used. A transfer may be split into several calls on any stream: the buffers are used round robin,
 * each one reused only when its previous copy has completed. */
class StagedCopies
{
public:
  static constexpr int Buffers = 4;

  /** `chunkBytes`: bytes per staged copy, 0 for StagingPool::StagingBytes. */
  StagedCopies(CUDADevice & device, MultiThreaderBase * threader, unsigned int workUnits, std::size_t chunkBytes);
  ~StagedCopies();
  ITK_DISALLOW_COPY_AND_MOVE(StagedCopies);

  /** Bytes per staged copy. */
  std::size_t
  Chunk() const
  {
    return m_Chunk;
  }

  /** Whether a transfer of `bytes` in all goes through the staging buffers; takes them from the
   * pool at the first such transfer (all or none). */
  bool
  Staged(std::size_t bytes);

  /** Enqueues the copy of `bytes` from `host` to `device` on `stream`; returns when the host memory
   * may change. `staged`: what Staged() said for the whole transfer. With `nonFinite` (staged
   * copies only), the values copied, of type `type`, are also checked, and `nonFinite` set when one
   * is a NaN or an infinity. */
  void
  Upload(cuda::CUdeviceptr                 device,
         const char *                      host,
         std::size_t                       bytes,
         cuda::CUstream                    stream,
         bool                              staged,
         std::atomic<bool> *               nonFinite = nullptr,
         NonLocalMeansBackend::ElementType type = NonLocalMeansBackend::ElementType::Float64);

  /** Copies `bytes` from `device` to `host` after the work queued on `stream`; returns when done.
   * `staged`: what Staged() said for the whole transfer. */
  void
  Download(char * host, cuda::CUdeviceptr device, std::size_t bytes, cuda::CUstream stream, bool staged);

private:
  int
  Take();

  void
  Copy(char *                            to,
       const char *                      from,
       std::size_t                       bytes,
       std::atomic<bool> *               nonFinite = nullptr,
       NonLocalMeansBackend::ElementType type = NonLocalMeansBackend::ElementType::Float64) const;

  CUDADevice &                                m_Device;
  const cuda::DriverAPI &                     m_Driver;
  MultiThreaderBase *                         m_Threader;
  unsigned int                                m_WorkUnits;
  std::size_t                                 m_Chunk{ StagingPool::StagingBytes };
  bool                                        m_Unavailable{ false }; // no page-locked memory to be had
  int                                         m_Next{ 0 };
  std::array<void *, Buffers>                 m_Buffers{};
  std::array<std::unique_ptr<Event>, Buffers> m_Events;
};

} // namespace nlm
} // namespace itk

#endif
