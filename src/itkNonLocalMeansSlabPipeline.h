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
#ifndef itkNonLocalMeansSlabPipeline_h
#define itkNonLocalMeansSlabPipeline_h

// The pipeline of one slab of the CUDA backend: upload in pieces of planes, reflect padding and
// the kernel chunks as soon as the planes they read are on the GPU, and downloads of the output
// planes as soon as the chunks that write them have completed. Private to the library.

#include "itkNonLocalMeansCUDADevice.h"
#include "itkNonLocalMeansLaunchPlan.h"
#include "itkNonLocalMeansStagedCopies.h"

#include <atomic>
#include <memory>
#include <vector>

namespace itk
{
class ProcessObject;

namespace nlm
{

/** The streams that every slab of one Run on one device enqueues its work on, created together. */
struct SlabStreams
{
  explicit SlabStreams(const cuda::DriverAPI & driver)
    : Kernels(driver)
    , SecondKernels(driver)
    , Copies(driver)
    , Padding(driver, Stream::Priority::Highest)
  {}

  const Stream Kernels;       // kernels
  const Stream SecondKernels; // the kernel chunks planned for it (KernelChunk::Stream)
  const Stream Copies;        // uploads and downloads
  const Stream Padding;       // the padding (highest priority)

  /** All of them, for draining and aborts. */
  std::vector<cuda::CUstream>
  All() const
  {
    return { Kernels.Get(), SecondKernels.Get(), Copies.Get(), Padding.Get() };
  }
};

/** What every slab of one Run shares. */
struct SlabRun
{
  const NonLocalMeansBackend::Problem & Problem;
  const LaunchPlan &                    Plan;
  const LoadedModule &                  Module;
  const cuda::DriverAPI &               Driver;
  StagedCopies &                        Copies;
  const SlabStreams &                   Streams;
  ProcessObject *                       Caller; // progress and abort; may be null
  MultiThreaderBase *                   Threader;
  unsigned int                          WorkUnits;
  NonLocalMeansBackend::RunStatistics & Statistics;
  long long                             TilesDone{ 0 }; // over all slabs, for progress
  bool                                  InputChecked{ false };
  /** Several devices: the tiles done by all of them (added to), and the request to stop (read);
   * the calling thread reports progress and aborts, as Caller is then null. */
  std::atomic<long long> *  SharedTilesDone{ nullptr };
  const std::atomic<bool> * SharedStop{ nullptr };
};

/** \class SlabPipeline
 * \brief Computes one slab (SlabPlan) of a Run on the GPU; owns the slab's device buffers. */
class SlabPipeline
{
public:
  SlabPipeline(SlabRun & run, const SlabPlan & slab);
  ~SlabPipeline();
  ITK_DISALLOW_COPY_AND_MOVE(SlabPipeline);

  /** Uploads, pads, computes and downloads the slab. Throws ProcessAborted when the caller asks
   * to abort (the slab's output is then incomplete), ExceptionObject on a non-finite input value
   * or a CUDA failure. */
  void
  Run();

private:
  void
  ChooseTransfersAndCheckInput();
  void
  AllocateDeviceBuffers();
  void
  UploadExtensions();
  void
  UploadPaddingAndLaunching();
  void
  PadUpTo(long long planes);
  void
  LaunchReadyChunks();
  void
  LaunchBatch(const KernelChunk & chunk, FastKernelParameters & parameters);
  bool
  FinishOldestChunk(bool wait);
  void
  DownloadAsChunksComplete();
  void
  ThrowIfAborted() const;
  void
  AddDeviceTimes() const;
  double
  KernelMilliseconds() const;

  SlabRun &        m_Run;
  const SlabPlan & m_Slab;
  bool             m_StageIn{ false };
  bool             m_StageOut{ false };
  bool             m_FuseCheck{ false };

  std::unique_ptr<DeviceBuffer>   m_Input, m_Padded, m_Output;
  std::unique_ptr<DeviceBuffer>   m_NoiseMap, m_ActiveTiles; // the extensions' (null when unused)
  std::unique_ptr<DeviceBuffer>   m_ClassicKernel;           // the classic kernel's wk (slow mode)
  std::unique_ptr<DeviceBuffer>   m_Weights, m_Accumulators; // the buffered-weights kernel's
  std::unique_ptr<StreamsDrained> m_Drained; // after the buffers: nothing in flight uses them when they go

  std::unique_ptr<Event>              m_KernelsBegin;        // on Streams.Kernels before the first launch
  long long                           m_PaddingAwaited[2]{}; // padded planes each kernel stream has waited for
  std::atomic<bool>                   m_NonFinite{ false };
  long long                           m_PaddedPlanes{ 0 }; // padded planes enqueued
  std::unique_ptr<Event>              m_Uploaded;          // the planes uploaded so far
  std::vector<std::unique_ptr<Event>> m_PadEvents;         // start and end of each padding launch
  std::vector<std::unique_ptr<Event>> m_Starts, m_Ends;    // of each kernel chunk
  std::size_t                         m_Launched{ 0 }, m_Finished{ 0 };
  bool                                m_Aborted{ false };
};

} // namespace nlm
} // namespace itk

#endif
