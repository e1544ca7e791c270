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
#include "itkNonLocalMeansSlabPipeline.h"
#include "itkNonLocalMeansExtensions.h"
#include "itkNonLocalMeansInputChecks.h"
#include "itkNonLocalMeansNumerics.h"
#include "itkNonLocalMeansSlowModeKernel.h"
#include "itkNonLocalMeansProgress.h"

#include <algorithm>
#include <chrono>

namespace itk
{
namespace nlm
{
namespace
{
using nlm::Clock;
using nlm::MillisecondsSince;

// Kernel chunks queued on the GPU at most.
constexpr std::size_t QueueDepth = 4;
// Staging chunks per download piece, in whole planes and at least one: the queue is refilled
// between pieces (about 2 ms at 16 MiB chunks and 30 GB/s, shorter than the queued chunks' kernel
// time at 500^3).
constexpr std::size_t DownloadPieceStagingChunks = 4;
// Outputs at least this large get the huge-page hint (the C library maps them on their own).
constexpr std::size_t HugePageHintBytes = std::size_t{ 64 } << 20;
// Share of the progress the kernels report; the rest is the filter's.
constexpr double KernelProgressShare = 0.99;
} // namespace

SlabPipeline::SlabPipeline(SlabRun & run, const SlabPlan & slab)
  : m_Run(run)
  , m_Slab(slab)
{}

SlabPipeline::~SlabPipeline() = default;

void
SlabPipeline::Run()
{
  ChooseTransfersAndCheckInput();
  AllocateDeviceBuffers();
  UploadExtensions();
  UploadPaddingAndLaunching();
  DownloadAsChunksComplete();
  ThrowIfAborted();
  AddDeviceTimes();
  ReportProgress(m_Run.Caller,
                 KernelProgressShare * static_cast<double>(m_Run.TilesDone) /
                   static_cast<double>(m_Run.Plan.TotalTiles));
}

/** Staged or plain copies; the finite check runs as a pass of its own before anything is written,
 * unless it can be fused into the upload (one slab whose upload covers the whole input, staged). */
void
SlabPipeline::ChooseTransfersAndCheckInput()
{
  const auto & p = m_Run.Problem;
  const int    A = m_Run.Plan.OuterAxis;
  const auto   allocationStart = Clock::now();
  m_StageIn = m_Run.Copies.Staged(m_Slab.InputBytes);
  m_StageOut = m_Run.Copies.Staged(m_Slab.OutputBytes);
  m_Run.Statistics.AllocationMilliseconds += MillisecondsSince(allocationStart);
  m_FuseCheck = !m_Run.InputChecked && m_Run.Plan.Slabs == 1 && m_StageIn && m_Slab.InputFirst == p.InputStart[A] &&
                m_Slab.InputEnd == p.InputStart[A] + p.InputSize[A];
  if (!m_Run.InputChecked && !m_FuseCheck)
  {
    const auto checkStart = Clock::now();
    VerifyInputIsFinite(p, m_Run.Threader, m_Run.WorkUnits);
    m_Run.Statistics.CheckMilliseconds += MillisecondsSince(checkStart);
    m_Run.InputChecked = true;
  }
}

void
SlabPipeline::AllocateDeviceBuffers()
{
  const auto start = Clock::now();
  m_Input = std::make_unique<DeviceBuffer>(m_Run.Driver, m_Slab.InputBytes);
  m_Padded = std::make_unique<DeviceBuffer>(m_Run.Driver, m_Slab.PaddedBytes);
  m_Output = std::make_unique<DeviceBuffer>(m_Run.Driver, m_Slab.OutputBytes);
  if (m_Run.Plan.Config.WeightBatch > 0)
  {
    m_Weights = std::make_unique<DeviceBuffer>(m_Run.Driver, m_Slab.WeightBytes);
    m_Accumulators = std::make_unique<DeviceBuffer>(m_Run.Driver, m_Slab.AccumulatorBytes);
  }
  m_Run.Statistics.AllocationMilliseconds += MillisecondsSince(start);
  m_Drained = std::make_unique<StreamsDrained>(m_Run.Driver, m_Run.Streams.All());
}

/** The slab's padded sigma^2 (noise map), the classic kernel's patch weights (slow mode) and the
 * bytes of the tiles a mask leaves to compute, on the kernel stream (before any kernel of the slab). */
void
SlabPipeline::UploadExtensions()
{
  const auto & p = m_Run.Problem;
  const auto   start = Clock::now();
  if (p.NoiseSigma != nullptr)
  {
    const bool single = m_Run.Plan.Config.SinglePrecision;
    const auto upload = [&](const auto & values) {
      const std::size_t bytes = values.size() * sizeof(values[0]);
      m_NoiseMap = std::make_unique<DeviceBuffer>(m_Run.Driver, bytes);
      ITK_NLM_CUDA_CHECK(m_Run.Driver,
                         cuMemcpyHtoDAsync(m_NoiseMap->Get(), values.data(), bytes, m_Run.Streams.Kernels.Get()));
      ITK_NLM_CUDA_CHECK(m_Run.Driver, cuStreamSynchronize(m_Run.Streams.Kernels.Get())); // before `values` goes
    };
    if (single)
    {
      upload(PaddedNoiseMap<float>(p, m_Slab.Pad, m_Run.Threader, m_Run.WorkUnits));
    }
    else
    {
      upload(PaddedNoiseMap<double>(p, m_Slab.Pad, m_Run.Threader, m_Run.WorkUnits));
    }
  }
  if (m_Run.Plan.Config.Classic)
  {
    const auto upload = [&](const auto & kernel) {
      const std::size_t bytes = kernel.size() * sizeof(kernel[0]);
      m_ClassicKernel = std::make_unique<DeviceBuffer>(m_Run.Driver, bytes);
      ITK_NLM_CUDA_CHECK(m_Run.Driver,
                         cuMemcpyHtoDAsync(m_ClassicKernel->Get(), kernel.data(), bytes, m_Run.Streams.Kernels.Get()));
      ITK_NLM_CUDA_CHECK(m_Run.Driver, cuStreamSynchronize(m_Run.Streams.Kernels.Get()));
    };
    const int n = static_cast<int>(p.Dimension), K = static_cast<int>(p.Components);
    const int s = NonLocalMeansBackend::EffectivePatchSize(p.PatchSize);
    if (p.InputType == NonLocalMeansBackend::ElementType::Float32)
    {
      upload(SlowModeKernel<float>(n, K, s, p.H));
    }
    else
    {
      upload(SlowModeKernel<double>(n, K, s, p.H));
    }
  }
  if (p.Mask != nullptr)
  {
    const std::vector<std::uint8_t> active = ActiveTiles(p,
                                                         m_Slab.Fast.tiles,
                                                         m_Run.Plan.Config.Tile,
                                                         m_Slab.Fast.outSize,
                                                         m_Run.Plan.OuterAxis,
                                                         m_Slab.First,
                                                         m_Run.Threader,
                                                         m_Run.WorkUnits);
    m_ActiveTiles = std::make_unique<DeviceBuffer>(m_Run.Driver, active.size());
    ITK_NLM_CUDA_CHECK(
      m_Run.Driver, cuMemcpyHtoDAsync(m_ActiveTiles->Get(), active.data(), active.size(), m_Run.Streams.Kernels.Get()));
    // Skipped tiles write nothing: their planes are downloaded as zeros, then replaced by the input
    // (KeepInputWhereMasked).
    ITK_NLM_CUDA_CHECK(m_Run.Driver,
                       cuMemsetD8Async(m_Output->Get(), 0, m_Slab.OutputBytes, m_Run.Streams.Kernels.Get()));
    ITK_NLM_CUDA_CHECK(m_Run.Driver, cuStreamSynchronize(m_Run.Streams.Kernels.Get()));
  }
  m_Run.Statistics.UploadMilliseconds += MillisecondsSince(start);
}

/** Uploads in pieces of planes on the copy stream; pads and starts the kernel chunks that the
 * uploaded planes allow as each piece is enqueued. */
void
SlabPipeline::UploadPaddingAndLaunching()
{
  const auto &      p = m_Run.Problem;
  const int         A = m_Run.Plan.OuterAxis;
  const long long   planes = m_Slab.InputEnd - m_Slab.InputFirst;
  const long long   padPlanes = m_Slab.Fast.ySize[A];
  const std::size_t plane = m_Slab.InputPlaneBytes;
  const char *      host =
    static_cast<const char *>(p.Input) + plane * static_cast<std::size_t>(m_Slab.InputFirst - p.InputStart[A]);
  const long long piecePlanes = std::max<long long>(1, static_cast<long long>(m_Run.Copies.Chunk() / plane));
  m_Uploaded = std::make_unique<Event>(m_Run.Driver);
  m_KernelsBegin = std::make_unique<Event>(m_Run.Driver);
  m_KernelsBegin->Record(m_Run.Streams.Kernels.Get());
  const auto uploadStart = Clock::now();
  for (long long q = 0; q < planes && !m_Aborted; q += piecePlanes)
  {
    const long long   qEnd = std::min(planes, q + piecePlanes);
    const std::size_t at = static_cast<std::size_t>(q) * plane;
    m_Run.Copies.Upload(m_Input->Get() + at,
                        host + at,
                        static_cast<std::size_t>(qEnd - q) * plane,
                        m_Run.Streams.Copies.Get(),
                        m_StageIn,
                        m_FuseCheck ? &m_NonFinite : nullptr,
                        p.InputType);
    long long ready = m_PaddedPlanes;
    while (ready < padPlanes && m_Slab.InputPlanesNeeded[static_cast<std::size_t>(ready)] <= qEnd)
    {
      ++ready;
    }
    if (ready > m_PaddedPlanes)
    {
      m_Uploaded->Record(m_Run.Streams.Copies.Get());
      PadUpTo(ready);
    }
    while (m_Finished < m_Launched && !m_Aborted && FinishOldestChunk(false))
    {
    }
    LaunchReadyChunks();
  }
  m_Run.Statistics.UploadMilliseconds += MillisecondsSince(uploadStart);
  if (m_FuseCheck)
  {
    m_Run.InputChecked = true;
    if (m_NonFinite)
    {
      VerifyInputIsFinite(p, m_Run.Threader, m_Run.WorkUnits); // throws, naming the first value that is not finite
    }
  }
  if (!m_Aborted && m_PaddedPlanes < padPlanes)
  {
    itkGenericExceptionMacro("Internal error: the uploaded planes do not cover the padded input.");
  }
}

/** Enqueues the reflect padding of padded planes [m_PaddedPlanes, planes) on the padding stream,
 * behind the upload of the planes it reads (m_Uploaded). Its stream's priority starts its blocks
 * ahead of the kernel chunks' waiting blocks, and the uploads behind it do not wait for it. */
void
SlabPipeline::PadUpTo(long long planes)
{
  const int  A = m_Run.Plan.OuterAxis;
  const auto realBytes = m_Run.Plan.Config.SinglePrecision ? sizeof(float) : sizeof(double);
  auto       piece = m_Slab.Pad;
  piece.padStart[A] += m_PaddedPlanes;
  piece.padSize[A] = planes - m_PaddedPlanes;
  cuda::CUdeviceptr source = m_Input->Get();
  cuda::CUdeviceptr target =
    m_Padded->Get() + static_cast<std::size_t>(m_PaddedPlanes) * m_Slab.PaddedPlaneCells * realBytes;
  void *     args[] = { &source, &target, &piece };
  const auto blocksAlong = [](long long cells, long long perBlock) {
    return static_cast<unsigned>(std::min<long long>((cells + perBlock - 1) / perBlock, PadKernelMaximumBlocks));
  };
  const unsigned grid[3] = { blocksAlong(piece.padSize[0], 32),
                             blocksAlong(piece.padSize[1], PadKernelRows),
                             blocksAlong(piece.padSize[2] * piece.padSize[3], 1) };
  ITK_NLM_CUDA_CHECK(m_Run.Driver, cuStreamWaitEvent(m_Run.Streams.Padding.Get(), m_Uploaded->Get(), 0));
  m_PadEvents.push_back(std::make_unique<Event>(m_Run.Driver));
  m_PadEvents.back()->Record(m_Run.Streams.Padding.Get());
  ITK_NLM_CUDA_CHECK(m_Run.Driver,
                     cuLaunchKernel(m_Run.Module.Pad,
                                    grid[0],
                                    grid[1],
                                    grid[2],
                                    PadKernelThreads,
                                    1,
                                    1,
                                    0,
                                    m_Run.Streams.Padding.Get(),
                                    args,
                                    nullptr));
  m_PadEvents.push_back(std::make_unique<Event>(m_Run.Driver));
  m_PadEvents.back()->Record(m_Run.Streams.Padding.Get());
  m_PaddedPlanes = planes;
}

/** Launches the chunks whose padded planes are enqueued, keeping at most QueueDepth queued. */
void
SlabPipeline::LaunchReadyChunks()
{
  const auto &      chunks = m_Slab.Chunks;
  const auto &      config = m_Run.Plan.Config;
  cuda::CUdeviceptr padded = m_Padded->Get(), output = m_Output->Get();
  while (!m_Aborted && m_Launched < chunks.size() && m_Launched - m_Finished < QueueDepth &&
         chunks[m_Launched].PaddedPlanesRead <= m_PaddedPlanes)
  {
    auto parameters = m_Slab.Fast;
    parameters.tileOffset = chunks[m_Launched].FirstTile;
    parameters.noiseMap = m_NoiseMap ? m_NoiseMap->Get() : 0;
    parameters.activeTiles = m_ActiveTiles ? m_ActiveTiles->Get() : 0;
    parameters.classicKernel = m_ClassicKernel ? m_ClassicKernel->Get() : 0;
    void *               args[] = { &padded, &output, &parameters };
    const int            s = chunks[m_Launched].Stream;
    const cuda::CUstream stream = (s == 0) ? m_Run.Streams.Kernels.Get() : m_Run.Streams.SecondKernels.Get();
    if (chunks[m_Launched].PaddedPlanesRead > m_PaddingAwaited[s])
    {
      // The padding it reads: the end of the last padding launch (on the padding stream, in order).
      ITK_NLM_CUDA_CHECK(m_Run.Driver, cuStreamWaitEvent(stream, m_PadEvents.back()->Get(), 0));
      m_PaddingAwaited[s] = m_PaddedPlanes;
    }
    m_Starts.push_back(std::make_unique<Event>(m_Run.Driver));
    m_Starts.back()->Record(stream);
    if (config.WeightBatch > 0)
    {
      LaunchBatch(chunks[m_Launched], parameters);
    }
    else
    {
      ITK_NLM_CUDA_CHECK(m_Run.Driver,
                         cuLaunchKernel(m_Run.Module.Fast,
                                        static_cast<unsigned>(chunks[m_Launched].Tiles),
                                        1,
                                        1,
                                        static_cast<unsigned>(config.Threads()),
                                        1,
                                        1,
                                        static_cast<unsigned>(config.SharedBytes()),
                                        stream,
                                        args,
                                        nullptr));
    }
    m_Ends.push_back(std::make_unique<Event>(m_Run.Driver));
    m_Ends.back()->Record(stream);
    ++m_Launched;
  }
}

/** The buffered-weights kernel's launches for one batch of shift pairs (a chunk, whose FirstTile is
 * its first pair): the weights pass, then the gather, on the kernel stream. */
void
SlabPipeline::LaunchBatch(const KernelChunk & chunk, FastKernelParameters & parameters)
{
  const auto & config = m_Run.Plan.Config;
  parameters.weights = m_Weights->Get();
  parameters.accumulators = m_Accumulators->Get();
  parameters.firstPair = chunk.FirstTile;
  parameters.pairs = std::min<long long>(config.WeightBatch, ShiftPairCount(config.PatchDistance) - chunk.FirstTile);
  parameters.firstBatch = chunk.FirstTile == 0 ? 1 : 0;
  parameters.lastBatch = chunk.FirstTile + parameters.pairs == ShiftPairCount(config.PatchDistance) ? 1 : 0;
  parameters.tileOffset = 0;
  cuda::CUdeviceptr padded = m_Padded->Get(), output = m_Output->Get();
  void *            args[] = { &padded, &output, &parameters };
  const auto &      w = parameters.weightTiles;
  ITK_NLM_CUDA_CHECK(m_Run.Driver,
                     cuLaunchKernel(m_Run.Module.Fast,
                                    static_cast<unsigned>(w[0] * w[1]),
                                    static_cast<unsigned>(w[2]),
                                    static_cast<unsigned>(parameters.pairs),
                                    static_cast<unsigned>(config.Threads()),
                                    1,
                                    1,
                                    static_cast<unsigned>(config.SharedBytes()),
                                    m_Run.Streams.Kernels.Get(),
                                    args,
                                    nullptr));
  const auto & n = parameters.outSize;
  ITK_NLM_CUDA_CHECK(m_Run.Driver,
                     cuLaunchKernel(m_Run.Module.Gather,
                                    static_cast<unsigned>((n[0] + BufferedGatherVoxels0 - 1) / BufferedGatherVoxels0),
                                    static_cast<unsigned>((n[1] + BufferedGatherBlock[1] - 1) / BufferedGatherBlock[1]),
                                    static_cast<unsigned>(n[2]),
                                    static_cast<unsigned>(BufferedGatherBlock[0]),
                                    static_cast<unsigned>(BufferedGatherBlock[1]),
                                    1,
                                    0,
                                    m_Run.Streams.Kernels.Get(),
                                    args,
                                    nullptr));
}

/** Accounts for the oldest queued chunk; without `wait`, only if it has completed already. */
bool
SlabPipeline::FinishOldestChunk(bool wait)
{
  const cuda::CUevent end = m_Ends[m_Finished]->Get();
  if (wait)
  {
    ITK_NLM_CUDA_CHECK_WORK(m_Run.Driver, cuEventSynchronize(end), "the non-local means kernels");
  }
  else
  {
    const cuda::CUresult r = m_Run.Driver.cuEventQuery(end);
    if (r == cuda::CUDA_ERROR_NOT_READY)
    {
      return false;
    }
    cuda::CheckWork(m_Run.Driver, r, "the non-local means kernels", "cuEventQuery", __FILE__, __LINE__, ITK_LOCATION);
  }
  m_Run.TilesDone += m_Slab.Chunks[m_Finished].Tiles;
  if (m_Run.SharedTilesDone != nullptr)
  {
    *m_Run.SharedTilesDone += m_Slab.Chunks[m_Finished].Tiles;
  }
  ++m_Finished;
  if (m_Run.Caller != nullptr)
  {
    ReportProgress(m_Run.Caller,
                   KernelProgressShare * static_cast<double>(m_Run.TilesDone) /
                     static_cast<double>(m_Run.Plan.TotalTiles));
    m_Aborted = m_Run.Caller->GetAbortGenerateData();
  }
  else if (m_Run.SharedStop != nullptr)
  {
    m_Aborted = *m_Run.SharedStop;
  }
  return true;
}

/** Waits for the chunks in turn and downloads the output planes that are complete (on the copy
 * stream, while the kernel goes on), in pieces of about DownloadPieceStagingChunks staging chunks:
 * before each piece it accounts for the chunks that have finished and refills the queue, so that a
 * backlog (the planes finished during the upload, which nothing downloads before the whole input is
 * uploaded and, where fused, checked) does not leave the GPU without queued chunks. */
void
SlabPipeline::DownloadAsChunksComplete()
{
  const std::size_t plane = m_Slab.OutputPlaneBytes;
  char *            host = static_cast<char *>(m_Run.Problem.Output) + plane * static_cast<std::size_t>(m_Slab.First);
  if (m_Slab.OutputBytes >= HugePageHintBytes)
  {
    AdviseHugePages(host, m_Slab.OutputBytes);
  }
  const long long piecePlanes =
    std::max<long long>(1, static_cast<long long>(DownloadPieceStagingChunks * m_Run.Copies.Chunk() / plane));
  const auto planesDone = [this]() { return m_Finished == 0 ? 0 : m_Slab.Chunks[m_Finished - 1].OutputPlanesDone; };
  long long  downloaded = 0;
  while (!m_Aborted && (m_Finished < m_Slab.Chunks.size() || downloaded < planesDone()))
  {
    LaunchReadyChunks();
    if (downloaded < planesDone())
    {
      while (m_Finished < m_Launched && !m_Aborted && FinishOldestChunk(false))
      {
      }
    }
    else
    {
      FinishOldestChunk(true);
    }
    LaunchReadyChunks(); // in place of the chunks just finished, before the host copies a piece
    const long long end = std::min(planesDone(), downloaded + piecePlanes);
    if (end > downloaded && !m_Aborted)
    {
      const auto        start = Clock::now();
      const std::size_t at = static_cast<std::size_t>(downloaded) * plane;
      m_Run.Copies.Download(host + at,
                            m_Output->Get() + at,
                            static_cast<std::size_t>(end - downloaded) * plane,
                            m_Run.Streams.Copies.Get(),
                            m_StageOut);
      m_Run.Statistics.DownloadMilliseconds += MillisecondsSince(start);
      downloaded = end;
    }
  }
}

void
SlabPipeline::ThrowIfAborted() const
{
  if (m_Aborted)
  {
    for (const cuda::CUstream stream : m_Run.Streams.All())
    {
      m_Run.Driver.cuStreamSynchronize(stream); // the abort is what is reported
    }
    ProcessAborted e(__FILE__, __LINE__);
    e.SetLocation(ITK_LOCATION);
    e.SetDescription(std::string("Object ") + (m_Run.Caller ? m_Run.Caller->GetNameOfClass() : "CUDA backend") +
                     ": AbortGenerateDataOn");
    throw e; // the slab's output is incomplete, whatever the flag says now
  }
}

/** The time some kernel chunk ran: the union of the chunks' spans (from their start events to their
 * end events), which overlap where one chunk's blocks start as the last ones of another finish. */
double
SlabPipeline::KernelMilliseconds() const
{
  std::vector<std::pair<double, double>> spans;
  for (std::size_t i = 0; i < m_Launched; ++i)
  {
    spans.emplace_back(m_Starts[i]->Since(*m_KernelsBegin), m_Ends[i]->Since(*m_KernelsBegin));
  }
  std::sort(spans.begin(), spans.end());
  double total = 0.0, reached = 0.0;
  for (const auto & span : spans)
  {
    const double from = std::max(span.first, reached);
    total += std::max(0.0, span.second - from);
    reached = std::max(reached, span.second);
  }
  return total;
}

void
SlabPipeline::AddDeviceTimes() const
{
  m_Run.Statistics.KernelMilliseconds += KernelMilliseconds();
  // The padding's events have ended: every chunk that waited for them has, but a plan need not
  // make the last chunk read the last padded plane.
  ITK_NLM_CUDA_CHECK(m_Run.Driver, cuStreamSynchronize(m_Run.Streams.Padding.Get()));
  for (std::size_t i = 0; i + 1 < m_PadEvents.size(); i += 2)
  {
    m_Run.Statistics.PadMilliseconds += m_PadEvents[i + 1]->Since(*m_PadEvents[i]);
  }
}

} // namespace nlm
} // namespace itk
