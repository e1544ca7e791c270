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

// The CUDA emulator's kernel runtime (test/CudaEmulator/README.md). The emulated NVRTC compiles the
// module's kernel sources as host C++ with this header included first: every CUDA thread of a
// block is a fiber with its own stack, run one at a time on the calling OS thread, and switched
// only where the kernel synchronizes (__syncthreads, the warp shuffles). The shuffles exchange the
// values of a warp's 32 lanes as the hardware does; the intrinsics the kernels use are written out
// with the GPU's rounding and saturation. Nothing here is timing: it checks the kernels' indexing,
// synchronization and arithmetic without a GPU. x86-64 Linux only (the fiber switch).

#ifndef itkCudaEmulatorKernelRuntime_h
#define itkCudaEmulatorKernelRuntime_h

// Every standard header first: the CUDA qualifiers below are macros that would rewrite them.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
#include <sys/mman.h>
#if defined(__SANITIZE_ADDRESS__)
#  include <sanitizer/asan_interface.h>
#endif
#if defined(__SANITIZE_THREAD__)
#  include <sanitizer/tsan_interface.h>
// The emulator's own bookkeeping is ordered by the fiber switches, which ThreadSanitizer is not told
// about (no_sync): only the kernels' accesses are checked.
#  define NLM_EMU_UNCHECKED __attribute__((no_sanitize_thread, noinline))
#else
#  define NLM_EMU_UNCHECKED
#endif

#define __CUDACC_RTC__ 1
#define __CUDA_ARCH__ 900
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)

struct uint3
{
  unsigned int x, y, z;
};
using dim3 = uint3;
// The vector types the kernels use, with CUDA's alignment (a pair is stored with one access).
struct alignas(8) float2
{
  float x, y;
};
struct alignas(16) double2
{
  double x, y;
};

namespace nlm_emu
{
/** Saves the callee-saved registers on the current stack, stores its pointer in *save and resumes
 * the stack `next` (System V x86-64). */
extern "C" void
nlm_emu_switch(void ** save, void * next);
asm(".text\n"
    ".p2align 4\n"
    ".hidden nlm_emu_switch\n"
    ".globl nlm_emu_switch\n"
    ".type nlm_emu_switch,@function\n"
    "nlm_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size nlm_emu_switch, .-nlm_emu_switch\n");

/** Tells ThreadSanitizer (when the kernels are compiled with it) that the OS thread is about to run
 * another fiber: `sync` makes what the current one did happen before what the next one does. */
inline void
AnnounceSwitch(void * tsanFiber, bool sync)
{
#if defined(__SANITIZE_THREAD__)
  __tsan_switch_to_fiber(tsanFiber, sync ? 0u : __tsan_switch_to_fiber_no_sync);
#else
  (void)tsanFiber;
  (void)sync;
#endif
}

enum class State
{
  Runnable,
  InShuffle,
  AtBarrier,
  Exited
};

struct Block;

struct Fiber
{
  Block *  Owner = nullptr;
  void *   Tsan = nullptr; // its ThreadSanitizer context
  bool     Started = false;
  void *   Sp = nullptr;
  uint3    Index{};
  unsigned Linear = 0;
  State    Status = State::Runnable;
};

/** A warp's shuffles: the values its lanes offer, in two buffers used in turn (a lane reads the
 * values of shuffle g before it can reach shuffle g + 1, and no lane writes shuffle g + 2's before
 * every lane has reached g + 1). */
struct Warp
{
  unsigned long long Values[2][32];
  unsigned           Generation = 0;
  int                Alive = 0;
  int                Arrived = 0;
  unsigned           Exited = 0;              // a bit per lane
  unsigned           ExitedAtRelease[2] = {}; // Exited when shuffle g's values were released
};

/** Each thread's stack is kStackBytes, aligned to its size: its lowest page holds its Fiber's
 * address (so that the running thread finds itself from its stack pointer), the next page is a
 * guard page, and the rest is the stack. */
constexpr size_t kStackBytes = size_t{ 1 } << 18;
constexpr size_t kPageBytes = 4096;

/** One OS thread's block: its fibers, warps, barrier count and shared memory. */
struct Block
{
  std::vector<Fiber>            Fibers;
  std::vector<Warp>             Warps;
  void *                        Region = nullptr; // the stacks' mapping
  size_t                        RegionBytes = 0;
  unsigned char *               Stacks = nullptr; // the first stack, aligned
  void *                        SchedulerSp = nullptr;
  void *                        SchedulerTsan = nullptr;
  Fiber *                       Current = nullptr;
  int                           Alive = 0;
  int                           AtBarrier = 0;
  std::vector<unsigned char>    Shared;
  uint3                         BlockIdx{}, BlockDim{}, GridDim{};
  const std::function<void()> * Body = nullptr;
  const char *                  Kernel = "";
};

inline thread_local Block * t_Block = nullptr; // for messages only: the threads find their block on their stack

[[noreturn]] inline void
Fail(const char * what)
{
  const Block * b = t_Block;
  std::fprintf(stderr,
               "CUDA emulator: %s in kernel %s, block (%u, %u, %u), thread %u\n",
               what,
               b ? b->Kernel : "?",
               b ? b->BlockIdx.x : 0u,
               b ? b->BlockIdx.y : 0u,
               b ? b->BlockIdx.z : 0u,
               (b && b->Current) ? b->Current->Linear : 0u);
  std::abort();
}

/** The running CUDA thread, from its stack pointer. */
inline Fiber &
Self()
{
  uintptr_t sp;
  asm volatile("movq %%rsp, %0" : "=r"(sp));
  return **reinterpret_cast<Fiber **>(sp & ~uintptr_t{ kStackBytes - 1 });
}

NLM_EMU_UNCHECKED inline void
Yield(Fiber & f)
{
  AnnounceSwitch(f.Owner->SchedulerTsan, false);
  nlm_emu_switch(&f.Sp, f.Owner->SchedulerSp);
}

NLM_EMU_UNCHECKED inline void
ReleaseBarrier(Block & b)
{
  for (Fiber & f : b.Fibers)
  {
    if (f.Status == State::AtBarrier)
    {
      f.Status = State::Runnable;
    }
  }
  b.AtBarrier = 0;
}

/** A full-warp shuffle: every live lane of the warp offers `bits` and receives lane `source`'s. */
NLM_EMU_UNCHECKED inline unsigned long long
Shuffle(unsigned long long bits, unsigned lane, unsigned source)
{
  Fiber &        f = Self();
  Block &        b = *f.Owner;
  Warp &         w = b.Warps[f.Linear / 32u];
  const unsigned buffer = w.Generation & 1u;
  w.Values[buffer][lane] = bits;
  if (++w.Arrived == w.Alive)
  {
    w.Arrived = 0;
    w.ExitedAtRelease[buffer] = w.Exited;
    ++w.Generation;
    Fiber * first = &b.Fibers[f.Linear - lane];
    for (int l = 0; l < 32 && first + l < b.Fibers.data() + b.Fibers.size(); ++l)
    {
      if (first[l].Status == State::InShuffle)
      {
        first[l].Status = State::Runnable;
      }
    }
  }
  else
  {
    f.Status = State::InShuffle;
    Yield(f);
  }
  if ((w.ExitedAtRelease[buffer] >> source) & 1u)
  {
    Fail("a shuffle reads a lane that has exited");
  }
  return w.Values[buffer][source];
}

/** __syncthreads: what every thread of the block did before it happens before what any does after. */
NLM_EMU_UNCHECKED inline void
SyncThreads()
{
  Fiber & f = Self();
  Block & b = *f.Owner;
  f.Status = State::AtBarrier;
#if defined(__SANITIZE_THREAD__)
  __tsan_release(&b.AtBarrier);
#endif
  if (++b.AtBarrier == b.Alive)
  {
    ReleaseBarrier(b);
  }
  else
  {
    Yield(f);
  }
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(&b.AtBarrier);
#endif
}

NLM_EMU_UNCHECKED inline void
FiberMain()
{
  Fiber & f = Self();
  Block & b = *f.Owner;
  (*b.Body)();
  f.Status = State::Exited;
  --b.Alive;
  Warp & w = b.Warps[f.Linear / 32u];
  --w.Alive;
  w.Exited |= 1u << (f.Linear % 32u);
  if (w.Arrived > 0)
  {
    Fail("a thread exited while lanes of its warp wait in a shuffle");
  }
  if (b.AtBarrier > 0 && b.AtBarrier == b.Alive)
  {
    ReleaseBarrier(b);
  }
  AnnounceSwitch(b.SchedulerTsan, true); // the block's end: what the thread did happens before
  nlm_emu_switch(&f.Sp, b.SchedulerSp);
  __builtin_unreachable();
}

/** Under AddressSanitizer (CUDA_EMULATOR_CXXFLAGS=-fsanitize=address), the marks of the frames a
 * thread left on its stack: its last frames never return, and a stack is used again. */
inline void
ForgetStackFrames(unsigned char * base)
{
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(base + 2 * kPageBytes, kStackBytes - 2 * kPageBytes);
#else
  (void)base;
#endif
}

/** Points thread t's stack at FiberMain, as nlm_emu_switch will resume it. */
inline void
StartFiber(Block & b, unsigned t)
{
  Fiber &         f = b.Fibers[t];
  unsigned char * base = b.Stacks + t * kStackBytes;
  ForgetStackFrames(base);
  *reinterpret_cast<Fiber **>(base) = &f;
  // Stack tops kStackBytes apart would share their cache sets: each starts a few lines lower.
  auto ** words = reinterpret_cast<void **>(base + kStackBytes - (t % 256u) * 192u);
  words[-1] = nullptr;                              // FiberMain's return address: never used
  words[-2] = reinterpret_cast<void *>(&FiberMain); // where nlm_emu_switch returns to
  for (int r = 3; r <= 8; ++r)
  {
    words[-r] = nullptr; // rbp, rbx, r12 to r15
  }
  f.Sp = &words[-8];
  f.Started = false;
  f.Status = State::Runnable;
}

/** Runs block `index` of the launch to its end: every fiber until it waits or exits, in turn. */
NLM_EMU_UNCHECKED inline void
RunBlock(Block & b, uint3 index)
{
  b.BlockIdx = index;
  b.Alive = static_cast<int>(b.Fibers.size());
  b.AtBarrier = 0;
  for (size_t w = 0; w < b.Warps.size(); ++w)
  {
    b.Warps[w].Alive = static_cast<int>(std::min<size_t>(32, b.Fibers.size() - 32 * w));
    b.Warps[w].Arrived = 0;
    b.Warps[w].Exited = 0;
  }
  std::fill(b.Shared.begin(), b.Shared.end(), static_cast<unsigned char>(0xff)); // NaNs, not zeros
  for (unsigned t = 0; t < b.Fibers.size(); ++t)
  {
    StartFiber(b, t);
  }
  while (b.Alive > 0)
  {
    bool ran = false;
    for (Fiber & f : b.Fibers)
    {
      if (f.Status == State::Runnable)
      {
        b.Current = &f;
        AnnounceSwitch(f.Tsan, !f.Started); // a thread sees what came before the block's start
        f.Started = true;
        nlm_emu_switch(&b.SchedulerSp, f.Sp);
        ran = true;
      }
    }
    b.Current = nullptr;
    if (!ran)
    {
      Fail("deadlock: every live thread waits (a barrier or a shuffle some threads never reach)");
    }
  }
}

/** The block's threads and their stacks, aligned to kStackBytes with a guard page each. */
inline void
AllocateThreads(Block & b, const unsigned (&threads)[3])
{
  const unsigned count = threads[0] * threads[1] * threads[2];
  b.Fibers.resize(count);
  b.Warps.resize((count + 31) / 32);
  b.RegionBytes = (count + 1) * kStackBytes; // one stack more, to align them
  b.Region = mmap(nullptr, b.RegionBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (b.Region == MAP_FAILED)
  {
    Fail("no memory for the threads' stacks");
  }
  const auto start = reinterpret_cast<uintptr_t>(b.Region);
  b.Stacks = reinterpret_cast<unsigned char *>((start + kStackBytes - 1) & ~uintptr_t{ kStackBytes - 1 });
  for (unsigned t = 0; t < count; ++t)
  {
    Fiber & f = b.Fibers[t];
    f.Owner = &b;
    f.Linear = t;
    f.Index = uint3{ t % threads[0], (t / threads[0]) % threads[1], t / (threads[0] * threads[1]) };
    mprotect(b.Stacks + t * kStackBytes + kPageBytes, kPageBytes, PROT_NONE);
#if defined(__SANITIZE_THREAD__)
    f.Tsan = __tsan_create_fiber(0);
#endif
  }
#if defined(__SANITIZE_THREAD__)
  b.SchedulerTsan = __tsan_get_current_fiber();
#endif
}

inline void
FreeThreads(Block & b)
{
  for (size_t t = 0; t < b.Fibers.size(); ++t)
  {
    ForgetStackFrames(b.Stacks + t * kStackBytes);
#if defined(__SANITIZE_THREAD__)
    __tsan_destroy_fiber(b.Fibers[t].Tsan);
#endif
  }
  munmap(b.Region, b.RegionBytes);
}

struct Launch
{
  unsigned Grid[3];
  unsigned Threads[3];
  unsigned SharedBytes;
  int      Workers; // OS threads that share out the blocks
};

/** Runs the grid, its blocks shared out among launch.Workers OS threads. */
inline void
RunGrid(const Launch & launch, const char * kernel, const std::function<void()> & body)
{
  const unsigned long long blocks =
    static_cast<unsigned long long>(launch.Grid[0]) * launch.Grid[1] * static_cast<unsigned long long>(launch.Grid[2]);
  std::atomic<unsigned long long> next{ 0 };
  auto                            work = [&]() {
    Block b;
    b.Kernel = kernel;
    b.Body = &body;
    b.BlockDim = uint3{ launch.Threads[0], launch.Threads[1], launch.Threads[2] };
    b.GridDim = uint3{ launch.Grid[0], launch.Grid[1], launch.Grid[2] };
    AllocateThreads(b, launch.Threads);
    b.Shared.resize(launch.SharedBytes); // exactly: a read beyond it is out of bounds
    t_Block = &b;
    for (unsigned long long i = next++; i < blocks; i = next++)
    {
      RunBlock(b,
               uint3{ static_cast<unsigned>(i % launch.Grid[0]),
                      static_cast<unsigned>((i / launch.Grid[0]) % launch.Grid[1]),
                      static_cast<unsigned>(i / (static_cast<unsigned long long>(launch.Grid[0]) * launch.Grid[1])) });
    }
    t_Block = nullptr;
    FreeThreads(b);
  };
  const int workers =
    std::max(1, std::min<int>(launch.Workers, static_cast<int>(std::min<unsigned long long>(blocks, 64))));
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w)
  {
    pool.emplace_back(work);
  }
  work();
  for (auto & t : pool)
  {
    t.join();
  }
}

template <typename... TArgs, size_t... I>
void
CallWith(void (*kernel)(TArgs...), void ** args, std::index_sequence<I...>)
{
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<TArgs>> *>(args[I])...);
}

/** Runs `kernel` over the launch with its parameters read from args, as cuLaunchKernel passes them. */
template <typename... TArgs>
void
LaunchKernel(void (*kernel)(TArgs...), const char * name, const Launch & launch, void ** args)
{
  const std::function<void()> body = [=]() { CallWith(kernel, args, std::index_sequence_for<TArgs...>{}); };
  RunGrid(launch, name, body);
}

template <typename T>
unsigned long long
ToBits(T v)
{
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <typename T>
T
FromBits(unsigned long long bits)
{
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
} // namespace nlm_emu

#if defined(NLM_EMULATOR_ARCHITECTURE)
/** The architecture the module was compiled for (NVRTC's --gpu-architecture=sm_XY). */
extern "C" __attribute__((visibility("default"))) const int nlm_emu_architecture = NLM_EMULATOR_ARCHITECTURE;
#endif

#define threadIdx (::nlm_emu::Self().Index)
#define blockIdx (::nlm_emu::Self().Owner->BlockIdx)
#define blockDim (::nlm_emu::Self().Owner->BlockDim)
#define gridDim (::nlm_emu::Self().Owner->GridDim)
#define NLM_EMULATOR_DYNAMIC_SHARED(type) reinterpret_cast<type *>(::nlm_emu::Self().Owner->Shared.data())

inline void
__syncthreads()
{
  ::nlm_emu::SyncThreads();
}

/** A kernel's trap: the process aborts with a message (on the GPU the launch fails). */
[[noreturn]] inline void
__trap()
{
  ::nlm_emu::Fail("the kernel trapped (__trap)");
}

template <typename T>
T
__shfl_down_sync(unsigned mask, T v, unsigned delta)
{
  if (mask != 0xffffffffu)
  {
    ::nlm_emu::Fail("a shuffle with a partial mask (not emulated)");
  }
  const unsigned lane = ::nlm_emu::Self().Linear % 32u;
  const unsigned source = (lane + delta < 32u) ? lane + delta : lane;
  return ::nlm_emu::FromBits<T>(::nlm_emu::Shuffle(::nlm_emu::ToBits(v), lane, source));
}

template <typename T>
T
__shfl_xor_sync(unsigned mask, T v, int laneMask)
{
  if (mask != 0xffffffffu)
  {
    ::nlm_emu::Fail("a shuffle with a partial mask (not emulated)");
  }
  const unsigned lane = ::nlm_emu::Self().Linear % 32u;
  const unsigned other = lane ^ static_cast<unsigned>(laneMask);
  const unsigned source = (other < 32u) ? other : lane;
  return ::nlm_emu::FromBits<T>(::nlm_emu::Shuffle(::nlm_emu::ToBits(v), lane, source));
}

/** Truncation of a double, saturated to the int range; NaN gives 0 (cvt.rzi.s32.f64). */
inline int
__double2int_rz(double x)
{
  if (std::isnan(x))
  {
    return 0;
  }
  const double t = std::trunc(x);
  return (t >= 2147483647.0) ? 2147483647 : ((t <= -2147483648.0) ? (-2147483647 - 1) : static_cast<int>(t));
}

/** Truncation of a float, saturated to the int range; NaN gives 0 (cvt.rzi.s32.f32). */
inline int
__float2int_rz(float x)
{
  if (std::isnan(x))
  {
    return 0;
  }
  const float t = std::trunc(x);
  return (t >= 2147483648.0f) ? 2147483647 : ((t <= -2147483648.0f) ? (-2147483647 - 1) : static_cast<int>(t));
}

inline int
__double2loint(double x)
{
  unsigned long long bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<int>(static_cast<unsigned int>(bits & 0xffffffffull));
}

inline int
__double2hiint(double x)
{
  unsigned long long bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<int>(static_cast<unsigned int>(bits >> 32));
}

inline double
__hiloint2double(int hi, int lo)
{
  const unsigned long long bits =
    (static_cast<unsigned long long>(static_cast<unsigned int>(hi)) << 32) | static_cast<unsigned int>(lo);
  double x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

inline float
__uint_as_float(unsigned int u)
{
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// CUDA's min and max overloads for integers and floating point, as the device headers declare them.
template <typename A, typename B>
inline std::common_type_t<A, B>
min(A a, B b)
{
  using C = std::common_type_t<A, B>;
  return (static_cast<C>(b) < static_cast<C>(a)) ? static_cast<C>(b) : static_cast<C>(a);
}

template <typename A, typename B>
inline std::common_type_t<A, B>
max(A a, B b)
{
  using C = std::common_type_t<A, B>;
  return (static_cast<C>(a) < static_cast<C>(b)) ? static_cast<C>(b) : static_cast<C>(a);
}

using std::fma;
using std::sqrt;

#endif
