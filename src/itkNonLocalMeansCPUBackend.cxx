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
#include "itkNonLocalMeansCPUBackend.h"
#include "itkNonLocalMeansNumerics.h"
#include "itkNonLocalMeansInputChecks.h"
#include "itkNonLocalMeansCPUKernels.h"
#include "itkNonLocalMeansExtensions.h"
#include "itkNonLocalMeansSlowModeKernel.h"
#include "itkNonLocalMeansParallelFor.h"
#include "itkNonLocalMeansProgress.h"
#include "itkNonLocalMeansOverrides.h"

#include "itkMultiThreaderBase.h"
#include "itkProcessObject.h"

#if defined(__unix__) || defined(__APPLE__)
#  include <unistd.h>
#endif

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <array>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace itk
{
namespace
{
constexpr unsigned int MaxDim = NonLocalMeansBackend::MaximumDimension;
using Int = std::int64_t;
using Index4 = std::array<Int, MaxDim>;
using Shift = std::array<int, MaxDim>;
using ElementType = NonLocalMeansBackend::ElementType;
using nlm::ParallelFor;

namespace cpu = nlm::cpu;
using nlm::GetOverrides;
using nlm::Overrides;
using nlm::ReportProgress;
using nlm::ThrowIfAborted;

/** Problem geometry in four axes; unused axes have size 1. */
struct Layout
{
  int    n{ 2 };
  int    K{ 1 };
  Index4 image{ { 1, 1, 1, 1 } };
  Index4 inStart{ { 0, 0, 0, 0 } };
  Index4 inSize{ { 1, 1, 1, 1 } };
  Index4 outStart{ { 0, 0, 0, 0 } };
  Index4 outSize{ { 1, 1, 1, 1 } };

  explicit Layout(const NonLocalMeansBackend::Problem & p)
    : n(static_cast<int>(p.Dimension))
    , K(static_cast<int>(p.Components))
  {
    for (int a = 0; a < n; ++a)
    {
      image[a] = p.ImageSize[a];
      inStart[a] = p.InputStart[a];
      inSize[a] = p.InputSize[a];
      outStart[a] = p.OutputStart[a];
      outSize[a] = p.OutputSize[a];
    }
  }

  Int
  OutputCells() const
  {
    return outSize[0] * outSize[1] * outSize[2] * outSize[3];
  }
};

/** Dense row-major (axis 0 fastest) strides of a 4-axis box. */
Index4
StridesOf(const Index4 & size)
{
  return Index4{ { 1, size[0], size[0] * size[1], size[0] * size[1] * size[2] } };
}

template <typename TIn>
const TIn *
InputPointer(const NonLocalMeansBackend::Problem & p)
{
  return static_cast<const TIn *>(p.Input);
}

/** Fills `dst` (dense over `size` cells starting at image coordinate `start`, K values per cell)
 * with reflect-padded values of `src` (dense over the input buffer, K values per cell) converted to
 * TOut. */
template <typename TIn, typename TOut>
void
GatherReflected(const TIn *         src,
                int                 K,
                const Layout &      L,
                const Index4 &      start,
                const Index4 &      size,
                TOut *              dst,
                MultiThreaderBase * threader,
                unsigned int        workUnits)
{
  const Index4 inStride = StridesOf(L.inSize);
  const Index4 dstStride = StridesOf(size);
  // Precompute the source index along each axis.
  std::array<std::vector<Int>, MaxDim> map;
  for (unsigned int a = 0; a < MaxDim; ++a)
  {
    map[a].resize(static_cast<size_t>(size[a]));
    for (Int i = 0; i < size[a]; ++i)
    {
      const Int g = nlm::ReflectIndex(start[a] + i, L.image[a]) - L.inStart[a];
      if (g < 0 || g >= L.inSize[a])
      {
        itkGenericExceptionMacro("NonLocalMeans: the input buffer does not cover the region needed for the "
                                 "requested output (axis "
                                 << a << ", image index " << g + L.inStart[a]
                                 << "). The input's buffered region must contain the output region padded by "
                                    "PatchSize/2 + PatchDistance + 1, cropped to the image.");
      }
      map[a][static_cast<size_t>(i)] = g * inStride[a];
    }
  }
  const Int rows = size[1] * size[2] * size[3];
  ParallelFor(threader, workUnits, rows, [&](Int r) {
    const Int i1 = r % size[1];
    const Int i2 = (r / size[1]) % size[2];
    const Int i3 = r / (size[1] * size[2]);
    const Int base = map[1][i1] + map[2][i2] + map[3][i3];
    TOut *    out = dst + K * (i1 * dstStride[1] + i2 * dstStride[2] + i3 * dstStride[3]);
    for (Int i0 = 0; i0 < size[0]; ++i0)
    {
      const TIn * s = src + K * (base + map[0][static_cast<size_t>(i0)]);
      for (int k = 0; k < K; ++k)
      {
        out[K * i0 + k] = static_cast<TOut>(s[k]);
      }
    }
  });
}

/** Writes `value` (already rounded to the working type) to the output buffer. */
template <typename TValue>
inline void
StoreOutput(void * out, ElementType type, Int index, TValue value)
{
  if (type == ElementType::Float32)
  {
    static_cast<float *>(out)[index] = static_cast<float>(value);
  }
  else
  {
    static_cast<double *>(out)[index] = static_cast<double>(value);
  }
}

// ----------------------------------------------------------------------------------------------
// Fast mode
// ----------------------------------------------------------------------------------------------

/** Output cells per chunk at most when a mask is given: chunks that hold no cell to compute are
 * skipped, so smaller ones follow the mask's outline (and skip more). */
constexpr Int MaskedChunkCells = Int{ 1 } << 14;
constexpr Int MaskedChunkRow = 32; // and nearly cubic chunks

struct Chunk
{
  Index4 lo;
  Index4 hi;
};

/** Splits the output box into chunks of about `targetCells` cells; axis 0 is kept whole up to
 * `longestRow` cells, the other axes are cut into pieces of about equal length. */
std::vector<Chunk>
MakeChunks(const Layout & L, Int targetCells, Int longestRow = 128)
{
  Index4 len{ { 1, 1, 1, 1 } };
  len[0] = std::min<Int>(L.outSize[0], std::min<Int>(std::max<Int>(targetCells, 1), longestRow));
  const Int rest = std::max<Int>(1, targetCells / len[0]);
  const int outer = L.n - 1;
  if (outer > 0)
  {
    Int side = static_cast<Int>(std::floor(std::pow(static_cast<double>(rest), 1.0 / outer) + 0.5));
    side = std::max<Int>(side, 1);
    Int budget = rest;
    for (int a = 1; a < L.n; ++a)
    {
      // Give the inner axes their share; the outermost axis takes what is left of the budget.
      const Int want = (a == L.n - 1) ? std::max<Int>(1, budget) : side;
      len[a] = std::min<Int>(L.outSize[a], want);
      budget = std::max<Int>(1, budget / len[a]);
    }
  }
  std::vector<Chunk> chunks;
  Index4             count;
  for (unsigned int a = 0; a < MaxDim; ++a)
  {
    // As many pieces as that length needs, then of equal length (balanced work).
    count[a] = (L.outSize[a] + len[a] - 1) / len[a];
    len[a] = (L.outSize[a] + count[a] - 1) / count[a];
    count[a] = (L.outSize[a] + len[a] - 1) / len[a];
  }
  for (Int c3 = 0; c3 < count[3]; ++c3)
  {
    for (Int c2 = 0; c2 < count[2]; ++c2)
    {
      for (Int c1 = 0; c1 < count[1]; ++c1)
      {
        for (Int c0 = 0; c0 < count[0]; ++c0)
        {
          const Index4 c{ { c0, c1, c2, c3 } };
          Chunk        chunk;
          for (unsigned int a = 0; a < MaxDim; ++a)
          {
            chunk.lo[a] = c[a] * len[a];
            chunk.hi[a] = std::min(L.outSize[a], chunk.lo[a] + len[a]);
          }
          chunks.push_back(chunk);
        }
      }
    }
  }
  return chunks;
}

/** A chunk's scratch for each shift of a batch: values (the rings of slabs and of weights, a row)
 * and the ring's slot pointers. */
struct Scratch
{
  std::array<std::vector<double>, cpu::MaximumBatch>         Values;
  std::array<std::vector<const double *>, cpu::MaximumBatch> Slots;
};

/** Scratch buffers handed to whichever chunk runs next. */
class ScratchPool
{
public:
  std::unique_ptr<Scratch>
  Take()
  {
    const std::lock_guard<std::mutex> lock(m_Mutex);
    if (m_Free.empty())
    {
      return std::make_unique<Scratch>();
    }
    auto b = std::move(m_Free.back());
    m_Free.pop_back();
    return b;
  }
  void
  Give(std::unique_ptr<Scratch> b)
  {
    const std::lock_guard<std::mutex> lock(m_Mutex);
    m_Free.push_back(std::move(b));
  }

private:
  std::mutex                            m_Mutex;
  std::vector<std::unique_ptr<Scratch>> m_Free;
};

class FastModeSolver
{
public:
  FastModeSolver(const NonLocalMeansBackend::Problem & p,
                 const Layout &                        L,
                 const cpu::Kernels &                  kernels,
                 long long                             chunkCells)
    : m_L(L)
    , m_Kernels(kernels)
    , m_ChunkCells(chunkCells)
  {
    for (unsigned int a = 0; a < MaxDim; ++a)
    {
      const bool used = static_cast<int>(a) < L.n;
      m_S[a] = used ? NonLocalMeansBackend::PatchSizeAlong(p, a) : 1;
      m_O[a] = m_S[a] / 2;
      m_D[a] = used ? NonLocalMeansBackend::PatchDistanceAlong(p, a) : 0;
    }
    const double K = static_cast<double>(L.K);
    m_V2 = 2.0 * (p.Sigma * p.Sigma);
    m_Noise = K * m_V2;
    m_Square = (p.NoiseModel == CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician);
    m_Norm = NonLocalMeansBackend::Normalization(p);
    for (unsigned int a = 0; a < MaxDim; ++a)
    {
      m_E[a] = (static_cast<int>(a) < L.n) ? (m_O[a] + m_D[a]) : 0;
      m_YStart[a] = L.outStart[a] - m_E[a];
      m_YSize[a] = L.outSize[a] + 2 * m_E[a];
    }
    m_YStride = StridesOf(m_YSize);
    m_OutStride = StridesOf(L.outSize);

    // Shifts in scikit-image's order (nlm::FirstShift).
    Shift lo{ { 0, 0, 0, 0 } };
    Shift hi{ { 0, 0, 0, 0 } };
    for (int a = 0; a < L.n; ++a)
    {
      lo[a] = nlm::FirstShift(a, m_D[a]);
      hi[a] = m_D[a];
    }
    for (int t3 = lo[3]; t3 <= hi[3]; ++t3)
    {
      for (int t2 = lo[2]; t2 <= hi[2]; ++t2)
      {
        for (int t1 = lo[1]; t1 <= hi[1]; ++t1)
        {
          for (int t0 = lo[0]; t0 <= hi[0]; ++t0)
          {
            m_Shifts.push_back(Shift{ { t0, t1, t2, t3 } });
          }
        }
      }
    }
  }

  template <typename TIn>
  void
  Solve(const NonLocalMeansBackend::Problem & p,
        ProcessObject *                       caller,
        MultiThreaderBase *                   threader,
        unsigned int                          workUnits)
  {
    const Layout & L = m_L;
    const Int      cells = L.OutputCells();
    // The kernels may read 2 * MaximumLanes cells beyond the padded input (cpu::RoundUp).
    m_Y.resize(static_cast<size_t>((m_YSize[0] * m_YSize[1] * m_YSize[2] * m_YSize[3] + 2 * cpu::MaximumLanes) * L.K));
    GatherReflected<TIn, double>(InputPointer<TIn>(p), L.K, L, m_YStart, m_YSize, m_Y.data(), threader, workUnits);
    GatherNoiseMap(p, threader, workUnits);
    m_WeightSum.assign(static_cast<size_t>(cells), 0.0);
    m_Result.assign(static_cast<size_t>(cells * L.K), 0.0);

    const unsigned int threads =
      std::max(1u, std::min(workUnits, threader != nullptr ? threader->GetMaximumNumberOfThreads() : 1u));
    std::vector<Chunk> chunks =
      ChunksToCompute(p,
                      MakeChunks(L,
                                 (m_ChunkCells > 0) ? m_ChunkCells : ChunkCells(cells, threads, p),
                                 (p.Mask != nullptr) ? MaskedChunkRow : Int{ 128 }));

    // The work is cut into about 50 steps; between steps the calling thread reports progress and
    // checks for an abort request. A step is a group of chunks (at least two per thread) with a
    // group of shifts: groups of chunks first, so that a chunk does many shifts in a row while its
    // accumulators and input are in the cache. Chunks never share output cells, so they run
    // concurrently; every cell receives its shifts in order.
    const Int   nShifts = static_cast<Int>(m_Shifts.size());
    const Int   nChunks = static_cast<Int>(chunks.size());
    const Int   chunkGroups = std::max<Int>(1, std::min<Int>(50, nChunks / (2 * Int{ threads })));
    const Int   shiftGroups = std::max<Int>(1, std::min<Int>(nShifts, (50 + chunkGroups - 1) / chunkGroups));
    ScratchPool pool;
    for (Int cg = 0; cg < chunkGroups; ++cg)
    {
      const Int firstChunk = cg * nChunks / chunkGroups;
      const Int lastChunk = (cg + 1) * nChunks / chunkGroups;
      for (Int sg = 0; sg < shiftGroups; ++sg)
      {
        const Int first = sg * nShifts / shiftGroups;
        const Int last = (sg + 1) * nShifts / shiftGroups;
        ParallelFor(threader, workUnits, lastChunk - firstChunk, [&](Int ci) {
          auto scratch = pool.Take();
          for (Int si = first; si < last;)
          {
            if (caller != nullptr && caller->GetAbortGenerateData())
            {
              break; // ThrowIfAborted below, on the calling thread
            }
            si += ProcessShifts(chunks[static_cast<size_t>(firstChunk + ci)], si, last, *scratch);
          }
          pool.Give(std::move(scratch));
        });
        ThrowIfAborted(caller);
        ReportProgress(caller,
                       0.98 * static_cast<double>(cg * shiftGroups + sg + 1) /
                         static_cast<double>(chunkGroups * shiftGroups));
      }
    }

    // Normalise and store (contract sections 2.6, 6.1 and 6.3).
    const Int rows = L.outSize[1] * L.outSize[2] * L.outSize[3];
    const int K = L.K;
    ParallelFor(threader, workUnits, rows, [&](Int r) {
      const Int i1 = r % L.outSize[1];
      const Int i2 = (r / L.outSize[1]) % L.outSize[2];
      const Int i3 = r / (L.outSize[1] * L.outSize[2]);
      const Int y = YOffset(0, i1, i2, i3);
      const Int begin = r * L.outSize[0];
      for (Int i0 = 0; i0 < L.outSize[0]; ++i0)
      {
        const Int i = begin + i0;
        if (p.Mask != nullptr && p.Mask[i] == 0)
        {
          continue; // nlm::KeepInputWhereMasked
        }
        const double w = m_WeightSum[static_cast<size_t>(i)];
        for (int k = 0; k < K; ++k)
        {
          const double mean = m_Result[static_cast<size_t>(K * i + k)] / w;
          const double v = m_Square ? nlm::RicianCorrection(mean, NoiseBias(y + i0)) : mean;
          StoreOutput(p.Output, p.OutputType, K * i + k, static_cast<TIn>(v));
        }
      }
    });
  }

private:
  /** The padded noise map squared (contract section 6.2), one value per cell of Y's layout (with
   * Y's padding at its end), when the problem has one. */
  void
  GatherNoiseMap(const NonLocalMeansBackend::Problem & p, MultiThreaderBase * threader, unsigned int workUnits)
  {
    if (p.NoiseSigma == nullptr)
    {
      return;
    }
    m_S2.resize(m_Y.size() / static_cast<size_t>(m_L.K));
    GatherReflected<double, double>(p.NoiseSigma, 1, m_L, m_YStart, m_YSize, m_S2.data(), threader, workUnits);
    for (double & value : m_S2)
    {
      value = value * value;
    }
  }

  /** 2 sigma^2 at the output cell at Y offset y: the Rician bias (contract section 6.1). */
  double
  NoiseBias(Int y) const
  {
    return m_S2.empty() ? m_V2 : 2.0 * m_S2[static_cast<size_t>(y)];
  }

  /** The chunks that hold a cell to compute: all of them without a mask. */
  std::vector<Chunk>
  ChunksToCompute(const NonLocalMeansBackend::Problem & p, std::vector<Chunk> chunks) const
  {
    if (p.Mask == nullptr)
    {
      return chunks;
    }
    const auto unmasked = [&](const Chunk & c) {
      for (Int i3 = c.lo[3]; i3 < c.hi[3]; ++i3)
      {
        for (Int i2 = c.lo[2]; i2 < c.hi[2]; ++i2)
        {
          for (Int i1 = c.lo[1]; i1 < c.hi[1]; ++i1)
          {
            const std::uint8_t * row = p.Mask + i1 * m_OutStride[1] + i2 * m_OutStride[2] + i3 * m_OutStride[3];
            if (std::any_of(row + c.lo[0], row + c.hi[0], [](std::uint8_t m) { return m != 0; }))
            {
              return false;
            }
          }
        }
      }
      return true;
    };
    chunks.erase(std::remove_if(chunks.begin(), chunks.end(), unmasked), chunks.end());
    return chunks;
  }

  /** Output cells per chunk. A chunk computes weights over itself grown by the shift and the patch
   * on every axis. In 2D that margin is a small share of a 128 x 128 chunk. From 3D on the margin's
   * share grows with its power, so the chunk grows with (d + o)^2, from 2^16 cells at patch 3 /
   * distance 3 (2^15 with 8 threads or more, which share the memory bandwidth: measured 1.3x faster
   * on 16 cores, 6% slower on 2) up to 2^19; and never beyond a thread's share of the image. */
  Int
  ChunkCells(Int cells, unsigned int threads, const NonLocalMeansBackend::Problem & p) const
  {
    const Int margin = *std::max_element(m_E.begin(), m_E.end()); // d + o on the widest axis
    const Int base = (threads >= 8) ? (Int{ 1 } << 15) : (Int{ 1 } << 16);
    Int       wanted =
      (m_L.n == 2) ? (Int{ 1 } << 14) : std::min<Int>(Int{ 1 } << 19, std::max<Int>(base, base * margin * margin / 16));
    if (p.Mask != nullptr)
    {
      wanted = std::min<Int>(wanted, MaskedChunkCells); // finer chunks follow the mask's outline
    }
    return std::max<Int>(1, std::min<Int>(wanted, (cells + threads - 1) / threads));
  }

  /** Offset (in cells) into Y of an output-relative coordinate. */
  Int
  YOffset(Int x0, Int x1, Int x2, Int x3) const
  {
    return (x0 + m_E[0]) * m_YStride[0] + (x1 + m_E[1]) * m_YStride[1] + (x2 + m_E[2]) * m_YStride[2] +
           (x3 + m_E[3]) * m_YStride[3];
  }

  /** The boxes of one chunk and shift: W, the weights (the chunk and the chunk shifted by -t), and
   * D, the patch terms (W extended by the patch along every used axis); B: D's strides. */
  struct ShiftBoxes
  {
    Index4 Wlo, Wlen, Dlo, Dlen, B;
  };

  ShiftBoxes
  BoxesOf(const Chunk & c, const Shift & t) const
  {
    ShiftBoxes x;
    for (unsigned int a = 0; a < MaxDim; ++a)
    {
      const int  win = m_S[a] - 1; // samples along axis a in the patch box
      const bool used = static_cast<int>(a) < m_L.n;
      x.Wlo[a] = c.lo[a] - std::max(t[a], 0);
      x.Wlen[a] = (c.hi[a] - std::min(t[a], 0)) - x.Wlo[a];
      x.Dlo[a] = (used && win > 0) ? x.Wlo[a] - m_O[a] + 1 : x.Wlo[a];
      x.Dlen[a] = (used && win > 0) ? x.Wlen[a] + win - 1 : x.Wlen[a];
    }
    x.B = StridesOf(Index4{ { cpu::RoundUp(x.Wlen[0], m_Kernels.Lanes), x.Dlen[1], x.Dlen[2], x.Dlen[3] } });
    return x;
  }

  /** Offset in Y of shift t, in values. */
  Int
  ShiftOffset(const Shift & t) const
  {
    return m_L.K * (t[0] * m_YStride[0] + t[1] * m_YStride[1] + t[2] * m_YStride[2] + t[3] * m_YStride[3]);
  }

  /** Shifts first, first + 1, ... (before `end`, at most cpu::MaximumBatch, with the same last
   * component) over chunk c, in one call of the kernels: the weights of each over the chunk's W
   * box, then both terms of every cell. Returns how many. */
  Int
  ProcessShifts(const Chunk & c, Int first, Int end, Scratch & scratch)
  {
    const int                                    last = m_L.n - 1;
    std::array<cpu::ShiftJob, cpu::MaximumBatch> jobs;
    int                                          count = 0;
    while (count < cpu::MaximumBatch && first + count < end &&
           m_Shifts[static_cast<size_t>(first + count)][last] == m_Shifts[static_cast<size_t>(first)][last])
    {
      jobs[count] =
        MakeJob(c, m_Shifts[static_cast<size_t>(first + count)], scratch.Values[count], scratch.Slots[count]);
      ++count;
    }
    m_Kernels.ProcessShifts(jobs.data(), count);
    return count;
  }

  /** The kernels' job for chunk c and shift t, with its scratch. */
  cpu::ShiftJob
  MakeJob(const Chunk & c, const Shift & t, std::vector<double> & buffer, std::vector<const double *> & slots)
  {
    const ShiftBoxes x = BoxesOf(c, t);
    const int        lanes = m_Kernels.Lanes;
    const int        last = m_L.n - 1;
    const Int        slabCells = x.B[last];
    const Int        weightSlabs = std::abs(t[last]) + 2; // the ring of W slabs (cpu::ShiftJob)
    const Int        weightCells = slabCells * weightSlabs;
    const Int        ringCells = slabCells * m_S[last]; // Window + 1 D slabs
    const Int        rowLength = cpu::RoundUp(cpu::RoundUp(x.Wlen[0], lanes) + m_S[0] - 2, lanes);
    const size_t     need = static_cast<size_t>(weightCells + ringCells + rowLength + cpu::MaximumLanes); // + alignment
    if (buffer.size() < need)
    {
      buffer.resize(need);
    }
    slots.resize(static_cast<size_t>(m_S[last]));
    const int     K = m_L.K;
    cpu::ShiftJob job;
    job.Dimension = m_L.n;
    job.Components = K;
    job.Window = m_S[0] - 1;
    for (int a = 0; a < m_L.n; ++a)
    {
      job.Windows[a] = m_S[a] - 1;
      job.Window = (m_S[a] == m_S[0]) ? job.Window : -1; // no common window
    }
    job.Noise = m_Noise;
    job.Norm = m_Norm;
    job.Alpha = (t[0] == 0) ? 0.5 : 1.0;
    job.TargetFirst = nlm::IsLexicographicallyPositive(t.data(), m_L.n);
    for (unsigned int a = 0; a < MaxDim; ++a)
    {
      job.DSize[a] = x.Dlen[a];
      job.WSize[a] = x.Wlen[a];
      job.Stride[a] = x.B[a];
      job.YStride[a] = K * m_YStride[a];
      job.ChunkSize[a] = c.hi[a] - c.lo[a];
      job.OutputStride[a] = m_OutStride[a];
    }
    // Rows of whole vectors start on 64-byte boundaries (Stride[1] is a multiple of the lanes).
    const auto misalignment = reinterpret_cast<std::uintptr_t>(buffer.data()) % 64;
    job.Weights = buffer.data() + (misalignment == 0 ? 0 : (64 - misalignment) / sizeof(double));
    job.Ring = job.Weights + weightCells;
    job.RingSlots = slots.data();
    job.Row = job.Ring + ringCells;
    job.YAtD = m_Y.data() + K * YOffset(x.Dlo[0], x.Dlo[1], x.Dlo[2], x.Dlo[3]);
    job.ShiftOffset = ShiftOffset(t);
    job.SquareValues = m_Square;
    if (!m_S2.empty())
    {
      job.S2AtD = m_S2.data() + YOffset(x.Dlo[0], x.Dlo[1], x.Dlo[2], x.Dlo[3]);
      job.S2ShiftOffset = ShiftOffset(t) / K;
      job.NoiseScale = static_cast<double>(K);
      for (unsigned int a = 0; a < MaxDim; ++a)
      {
        job.S2Stride[a] = m_YStride[a];
      }
    }
    job.CentreWeight = 0;
    job.TargetWeightOffset = 0;
    for (int a = 0; a < last; ++a) // within a slab
    {
      job.CentreWeight += (c.lo[a] - x.Wlo[a]) * x.B[a];
      job.TargetWeightOffset -= t[a] * x.B[a];
    }
    job.CentreSlab = c.lo[last] - x.Wlo[last];
    job.TargetSlab = job.CentreSlab - t[last];
    job.WeightSlabs = weightSlabs;
    job.YAtChunk = m_Y.data() + K * YOffset(c.lo[0], c.lo[1], c.lo[2], c.lo[3]);
    const Int o = c.lo[0] + c.lo[1] * m_OutStride[1] + c.lo[2] * m_OutStride[2] + c.lo[3] * m_OutStride[3];
    job.WeightSum = m_WeightSum.data() + o;
    job.Result = m_Result.data() + K * o;
    return job;
  }

  const Layout &          m_L;
  const cpu::Kernels &    m_Kernels;
  long long               m_ChunkCells;
  std::array<int, MaxDim> m_S{}; // odd patch size per axis (1 beyond the image's dimension)
  std::array<int, MaxDim> m_O{}; // m_S / 2
  std::array<int, MaxDim> m_D{}; // patch distance per axis
  double                  m_V2{ 0.0 };
  double                  m_Noise{ 0.0 };
  double                  m_Norm{ 1.0 };
  bool                    m_Square{ false };
  Index4                  m_E{};
  Index4                  m_YStart{};
  Index4                  m_YSize{};
  Index4                  m_YStride{};
  Index4                  m_OutStride{};
  std::vector<Shift>      m_Shifts;
  std::vector<double>     m_Y;
  std::vector<double>     m_S2;
  std::vector<double>     m_WeightSum;
  std::vector<double>     m_Result;
};

// ----------------------------------------------------------------------------------------------
// Slow mode
// ----------------------------------------------------------------------------------------------


/** The Rician output in slow mode's working type T: sqrt(M(mean - bias, 0)) (contract 6.1). */
template <typename T>
T
RicianCorrection(T mean, T bias)
{
  const T v = mean - bias;
  return std::sqrt((T(0) > v) ? T(0) : v);
}

/** The target's classic-mode kernel for the working type T (null: none). */
void (*ClassicKernelOf(const cpu::Kernels & kernels, float *))(const cpu::ClassicRun<float> &)
{
  return kernels.ClassicFloat;
}
void (*ClassicKernelOf(const cpu::Kernels & kernels, double *))(const cpu::ClassicRun<double> &)
{
  return kernels.ClassicDouble;
}

template <typename T>
void
SolveSlowMode(const NonLocalMeansBackend::Problem & p,
              const Layout &                        L,
              const cpu::Kernels &                  kernels,
              ProcessObject *                       caller,
              MultiThreaderBase *                   threader,
              unsigned int                          workUnits)
{
  const int n = L.n;
  const int K = L.K;
  const int s = NonLocalMeansBackend::EffectivePatchSize(p.PatchSize);
  const int o = s / 2;
  const int d = p.PatchDistance;

  const std::vector<T> kernel = nlm::SlowModeKernel<T>(n, K, s, p.H);
  const T              v = static_cast<T>(2.0 * (p.Sigma * p.Sigma));
  const bool           rician = (p.NoiseModel == CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician);

  // Local copy of the reflect-padded input around the output region (margin d + o).
  Index4 start{ { 0, 0, 0, 0 } };
  Index4 size{ { 1, 1, 1, 1 } };
  for (int a = 0; a < n; ++a)
  {
    start[a] = L.outStart[a] - d - o;
    size[a] = L.outSize[a] + 2 * (d + o);
  }
  std::vector<T> X(static_cast<size_t>(size[0] * size[1] * size[2] * size[3] * K));
  GatherReflected<T, T>(InputPointer<T>(p), K, L, start, size, X.data(), threader, workUnits);
  const Index4 xs = StridesOf(size);
  // Patch offsets (a0 outermost = highest ITK axis) as cell offsets into X.
  std::vector<Int> patchOffset(kernel.size());
  for (size_t i = 0; i < kernel.size(); ++i)
  {
    Int rem = static_cast<Int>(i);
    Int off = 0;
    for (int a = 0; a < n; ++a) // ITK axis a is patch axis n-1-a, the fastest in the kernel
    {
      off += (rem % s) * xs[a];
      rem /= s;
    }
    patchOffset[i] = off;
  }
  const Int rowLength = static_cast<Int>(kernel.size()) / s; // entries per patch row a0

  const Int  rows = L.outSize[1] * L.outSize[2] * L.outSize[3];
  const Int  groups = std::max<Int>(1, std::min<Int>(rows, 50));
  const auto outStride = StridesOf(L.outSize);
  const Int  N0 = L.image[0], N1 = L.image[1], N2 = (n > 2) ? L.image[2] : 1;
  const Int  centre = o * xs[0] + o * xs[1] + ((n > 2) ? o * xs[2] : 0); // a patch corner to its centre

  const auto classicKernel = ClassicKernelOf(kernels, static_cast<T *>(nullptr));
  const Int  classicLanes = std::is_same<T, float>::value ? 2 * kernels.Lanes : kernels.Lanes;
  // The vector kernels read one plane per component: X's components side by side, when K > 1.
  const bool     lanesFit = classicKernel != nullptr && K <= cpu::MaximumClassicComponents;
  const Int      cells = size[0] * size[1] * size[2] * size[3];
  std::vector<T> planes;
  if (lanesFit && K > 1)
  {
    planes.resize(X.size());
    for (Int c = 0; c < cells; ++c)
    {
      for (int k = 0; k < K; ++k)
      {
        planes[static_cast<size_t>(k * cells + c)] = X[static_cast<size_t>(K * c + k)];
      }
    }
  }
  cpu::ClassicRun<T> classicJob;
  classicJob.X = (K > 1) ? planes.data() : X.data();
  classicJob.Components = K;
  classicJob.ComponentStride = cells;
  for (int a = 0; a < 3; ++a)
  {
    classicJob.Stride[a] = xs[static_cast<size_t>(a)];
  }
  classicJob.Kernel = kernel.data();
  classicJob.PatchOffset = patchOffset.data();
  classicJob.PatchSize = s;
  classicJob.RowLength = static_cast<int>(rowLength);
  classicJob.V = v;
  classicJob.Square = rician;
  classicJob.Distance = d;
  classicJob.Centre = centre;
  for (Int g = 0; g < groups; ++g)
  {
    const Int first = g * rows / groups;
    const Int last = (g + 1) * rows / groups;
    ParallelFor(threader, workUnits, last - first, [&](Int rr) {
      const Int      r = first + rr;
      const Int      o1 = r % L.outSize[1];
      const Int      o2 = r / L.outSize[1];
      const Int      x1 = L.outStart[1] + o1, x2 = L.outStart[2] + o2;
      std::vector<T> nv(static_cast<size_t>(K));
      // One pixel, scalar: candidates clipped to the image on every axis.
      const auto pixel = [&](Int o0) {
        const Int x0 = L.outStart[0] + o0;
        // X index of the patch corner (x - o) in local coordinates.
        const Int cx =
          (x0 - o - start[0]) * xs[0] + (x1 - o - start[1]) * xs[1] + ((n > 2) ? (x2 - o - start[2]) * xs[2] : 0);
        const Int oi = o0 + o1 * outStride[1] + o2 * outStride[2];
        if (p.Mask != nullptr && p.Mask[oi] == 0)
        {
          return; // nlm::KeepInputWhereMasked
        }
        std::fill(nv.begin(), nv.end(), T(0));
        T         wsum = T(0);
        const Int q2lo = (n > 2) ? std::max<Int>(0, x2 - d) : 0;
        const Int q2hi = (n > 2) ? std::min<Int>(N2, x2 + d + 1) : 1;
        for (Int q2 = q2lo; q2 < q2hi; ++q2)
        {
          for (Int q1 = std::max<Int>(0, x1 - d); q1 < std::min<Int>(N1, x1 + d + 1); ++q1)
          {
            for (Int q0 = std::max<Int>(0, x0 - d); q0 < std::min<Int>(N0, x0 + d + 1); ++q0)
            {
              const Int cq =
                (q0 - o - start[0]) * xs[0] + (q1 - o - start[1]) * xs[1] + ((n > 2) ? (q2 - o - start[2]) * xs[2] : 0);
              T    dist = T(0);
              bool cut = false;
              for (int a0 = 0; a0 < s; ++a0)
              {
                if (dist > T(5))
                {
                  cut = true;
                  break;
                }
                for (Int j = a0 * rowLength; j < (a0 + 1) * rowLength; ++j)
                {
                  const T * pc = X.data() + K * (cx + patchOffset[static_cast<size_t>(j)]);
                  const T * pq = X.data() + K * (cq + patchOffset[static_cast<size_t>(j)]);
                  const T   wk = kernel[static_cast<size_t>(j)];
                  for (int k = 0; k < K; ++k)
                  {
                    const T diff = pc[k] - pq[k];
                    dist = dist + wk * ((diff * diff) - v);
                  }
                }
              }
              T weight = T(0);
              if (!cut)
              {
                const double m = (dist > T(0)) ? static_cast<double>(dist) : 0.0;
                weight = static_cast<T>(nlm::FastExpX86(-m));
              }
              wsum = wsum + weight;
              const T * xq = X.data() + K * (cq + centre);
              for (int k = 0; k < K; ++k)
              {
                const T value = rician ? xq[k] * xq[k] : xq[k];
                nv[static_cast<size_t>(k)] = nv[static_cast<size_t>(k)] + weight * value;
              }
            }
          }
        }
        for (int k = 0; k < K; ++k)
        {
          const T mean = nv[static_cast<size_t>(k)] / wsum;
          StoreOutput(p.Output, p.OutputType, K * oi + k, rician ? RicianCorrection(mean, v) : mean);
        }
      };
      // The pixels whose candidates are not clipped along axis 0 go through the target's vector
      // kernel in whole vectors: each lane does the loop above for its pixel.
      const Int lo = std::min(std::max<Int>(0, d - L.outStart[0]), L.outSize[0]);
      const Int hi = std::max(lo, std::min(L.outSize[0], N0 - d - L.outStart[0]));
      const Int span = (lanesFit && hi - lo >= classicLanes) ? hi - lo : 0;
      // Pixels [begin, begin + count) in lanes (count: whole vectors); stores those from `from` on.
      const auto lanes = [&](Int begin, Int count, Int from) {
        std::vector<T>     sums(static_cast<size_t>((K + 1) * count));
        cpu::ClassicRun<T> job = classicJob;
        const Int          x0 = L.outStart[0] + begin;
        job.Corner = (x0 - o - start[0]) + (x1 - o - start[1]) * xs[1] + ((n > 2) ? (x2 - o - start[2]) * xs[2] : 0);
        job.T1Lo = std::max<Int>(0, x1 - d) - x1;
        job.T1Hi = std::min<Int>(N1 - 1, x1 + d) - x1;
        job.T2Lo = (n > 2) ? std::max<Int>(0, x2 - d) - x2 : 0;
        job.T2Hi = (n > 2) ? std::min<Int>(N2 - 1, x2 + d) - x2 : 0;
        job.Count = count;
        job.WeightSum = sums.data();
        job.Result = sums.data() + count;
        classicKernel(job);
        for (Int o0 = from; o0 < begin + count; ++o0)
        {
          const Int oi = o0 + o1 * outStride[1] + o2 * outStride[2];
          if (p.Mask != nullptr && p.Mask[oi] == 0)
          {
            continue; // nlm::KeepInputWhereMasked
          }
          for (int k = 0; k < K; ++k)
          {
            const T mean = job.Result[k * count + (o0 - begin)] / job.WeightSum[o0 - begin];
            StoreOutput(p.Output, p.OutputType, K * oi + k, rician ? RicianCorrection(mean, v) : mean);
          }
        }
      };
      for (Int o0 = 0; o0 < lo; ++o0)
      {
        pixel(o0);
      }
      if (span > 0)
      {
        const Int whole = span / classicLanes * classicLanes;
        lanes(lo, whole, lo);
        if (whole < span) // the rest as the last whole vector of the span (its first lanes are done)
        {
          lanes(hi - classicLanes, classicLanes, lo + whole);
        }
      }
      for (Int o0 = lo + span; o0 < L.outSize[0]; ++o0)
      {
        pixel(o0);
      }
    });
    ThrowIfAborted(caller);
    ReportProgress(caller, static_cast<double>(g + 1) / static_cast<double>(groups));
  }
}

/** Bytes of physical memory of this machine (0 where it cannot be told). */
std::uint64_t
PhysicalMemoryBytes()
{
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long pageSize = sysconf(_SC_PAGESIZE);
  return (pages > 0 && pageSize > 0) ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(pageSize) : 0;
#else
  return 0;
#endif
}

/** Bytes the CPU backend allocates for a problem: the input padded by PatchSize/2 + PatchDistance on
 * every side (doubles in fast mode, the working type in slow mode), and in fast mode the weight sums
 * and results of every output cell. */
double
RequiredBytes(const NonLocalMeansBackend::Problem & p)
{
  double padded = p.Components;
  double cells = 1.0;
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    const double E = NonLocalMeansBackend::PatchSizeAlong(p, a) / 2 + NonLocalMeansBackend::PatchDistanceAlong(p, a);
    padded *= static_cast<double>(p.OutputSize[a]) + 2.0 * E;
    cells *= static_cast<double>(p.OutputSize[a]);
  }
  // Fast mode also lists its shifts: (2d + 1)^(n - 1) (d + 1) of them.
  double shifts = NonLocalMeansBackend::PatchDistanceAlong(p, 0) + 1.0;
  for (unsigned int a = 1; a < p.Dimension; ++a)
  {
    shifts *= 2.0 * NonLocalMeansBackend::PatchDistanceAlong(p, a) + 1.0;
  }
  const bool   slowFloat = !p.FastMode && p.InputType == ElementType::Float32;
  const double noiseMap = (p.NoiseSigma != nullptr) ? padded / p.Components * sizeof(double) : 0.0; // padded sigma^2
  return padded * (slowFloat ? sizeof(float) : sizeof(double)) + noiseMap +
         (p.FastMode ? cells * (p.Components + 1.0) * sizeof(double) + shifts * sizeof(Shift) : 0.0);
}

/** Throws MemoryAllocationError, naming what to reduce, when a problem needs more memory than the
 * machine has (before anything is allocated). */
void
VerifyMemoryFits(const NonLocalMeansBackend::Problem & p)
{
  const double        needed = RequiredBytes(p);
  const std::uint64_t physical = PhysicalMemoryBytes();
  if (physical > 0 && needed > static_cast<double>(physical))
  {
    std::ostringstream message;
    message << std::setprecision(3) << "The CPU backend needs " << needed / 1e9 << " GB for this image with PatchSize "
            << p.PatchSize << " and PatchDistance " << p.PatchDistance << " (the image padded by PatchSize/2 + "
            << "PatchDistance on every side), more than this machine's " << static_cast<double>(physical) / 1e9
            << " GB; reduce PatchDistance, or denoise the image in pieces (StreamingImageFilter).";
    throw MemoryAllocationError(__FILE__, __LINE__, message.str(), ITK_LOCATION);
  }
}
} // namespace

void
NonLocalMeansCPUBackend::Run(const Problem &     problem,
                             ProcessObject *     caller,
                             MultiThreaderBase * threader,
                             unsigned int        numberOfWorkUnits)
{
  nlm::VerifyInputIsFinite(problem, threader, numberOfWorkUnits);
  if (threader == nullptr)
  {
    numberOfWorkUnits = 1;
  }
  const Layout L(problem);
  if (L.OutputCells() == 0)
  {
    return;
  }
  VerifyMemoryFits(problem);
  const Overrides overrides = GetOverrides();
  if (!overrides.CPUInvalid.empty())
  {
    itkGenericExceptionMacro("The CPU backend cannot run: " << overrides.CPUInvalid << ".");
  }
  const cpu::Kernels & kernels = cpu::SelectKernels(overrides.CPUInstructionSet);
  m_LastStatistics = RunStatistics{};
  m_LastStatistics.Device = "CPU";
  std::ostringstream configuration;
  if (problem.FastMode)
  {
    configuration << "fast mode, " << kernels.Name << " (" << kernels.Lanes << " lanes), ";
  }
  else
  {
    configuration << "classic mode, " << kernels.Name << ", ";
  }
  configuration << numberOfWorkUnits << " work units";
  m_LastStatistics.Configuration = configuration.str();
  ReportProgress(caller, 0.0);
  if (problem.FastMode)
  {
    FastModeSolver solver(problem, L, kernels, overrides.CPUChunkCells);
    if (problem.InputType == ElementType::Float32)
    {
      solver.Solve<float>(problem, caller, threader, numberOfWorkUnits);
    }
    else
    {
      solver.Solve<double>(problem, caller, threader, numberOfWorkUnits);
    }
  }
  else if (problem.InputType == ElementType::Float32)
  {
    SolveSlowMode<float>(problem, L, kernels, caller, threader, numberOfWorkUnits);
  }
  else
  {
    SolveSlowMode<double>(problem, L, kernels, caller, threader, numberOfWorkUnits);
  }
  nlm::KeepInputWhereMasked(problem, threader, numberOfWorkUnits);
  ReportProgress(caller, 1.0);
}

} // end namespace itk
