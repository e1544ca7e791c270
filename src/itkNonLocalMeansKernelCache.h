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
#ifndef itkNonLocalMeansKernelCache_h
#define itkNonLocalMeansKernelCache_h

// The on-disk cache of compiled kernel modules: one file per key, verified on reading (the whole
// key, the image's length and hash, and that it looks like a cubin or PTX), written owner-only
// (folders 0700, files 0600) through a temporary file and a rename. Entries that are symbolic
// links, not regular files, not owned by the user or readable by others are not used; damaged
// entries of the user are removed. Private to the library.

#include "CudaNonLocalMeansExport.h"

#include <string>
#include <vector>

namespace itk
{
namespace nlm
{

/** A 128-bit hash of `text` as 32 hexadecimal digits (not cryptographic: the cache also compares
 * the whole key and the image's length). */
CudaNonLocalMeans_EXPORT std::string
                         HashHex(const std::string & text);

/** Reads the image stored at `path` for `key`. False when there is none, or when the file is not a
 * trustworthy, intact entry of that key (then `why` says why, and a damaged file of the user's is
 * removed). */
CudaNonLocalMeans_EXPORT bool
ReadCacheEntry(const std::string & path,
               const std::string & key,
               bool                isPTX,
               std::vector<char> & image,
               std::string &       why);

/** Stores `image` for `key` at `path` in `directory` (created owner-only when missing). Never
 * fails: the cache only saves time. Returns whether the entry was written. */
CudaNonLocalMeans_EXPORT bool
WriteCacheEntry(const std::string &       directory,
                const std::string &       path,
                const std::string &       key,
                bool                      isPTX,
                const std::vector<char> & image);

/** Removes the entry at `path` if it is the user's (a module the driver would not load). */
CudaNonLocalMeans_EXPORT void
RemoveCacheEntry(const std::string & path);

/** Whether `image` has the shape of a module image: an ELF object (cubin) or PTX text. */
CudaNonLocalMeans_EXPORT bool
LooksLikeModuleImage(const std::vector<char> & image, bool isPTX);

} // namespace nlm
} // namespace itk

#endif
