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
#ifndef CudaNonLocalMeansImageFiles_h
#define CudaNonLocalMeansImageFiles_h

// What the command-line program does so that it never reports success for a wrong result: it
// refuses input files that hold less data than their header declares and complex pixels; it checks,
// before computing, that the output's format can store the chosen component type and dimension; and
// it writes the result to a temporary file beside the target, checks the file's size and only then
// renames it into place.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkImageIOBase.h"
#include "itkImageIOFactory.h"
#include "itkVectorImage.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#if defined(_WIN32)
#  include <process.h>
#else
#  include <unistd.h>
#endif

namespace nlm_files
{
using IOComponent = itk::IOComponentEnum;

/** The component types --output-type names, by NumPy's names. */
inline const std::map<std::string, IOComponent> &
OutputTypeNames()
{
  static const std::map<std::string, IOComponent> names = {
    { "uint8", IOComponent::UCHAR },   { "int8", IOComponent::CHAR },     { "uint16", IOComponent::USHORT },
    { "int16", IOComponent::SHORT },   { "uint32", IOComponent::UINT },   { "int32", IOComponent::INT },
    { "float32", IOComponent::FLOAT }, { "float64", IOComponent::DOUBLE }
  };
  return names;
}

/** NumPy's name of a component type, or ITK's when NumPy's is not listed. */
inline std::string
NameOf(IOComponent type)
{
  for (const auto & entry : OutputTypeNames())
  {
    if (entry.second == type)
    {
      return entry.first;
    }
  }
  return itk::ImageIOBase::GetComponentTypeAsString(type);
}

inline std::string
Lowercase(std::string text)
{
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

inline bool
EndsWith(const std::string & text, const std::string & tail)
{
  return text.size() >= tail.size() && Lowercase(text.substr(text.size() - tail.size())) == tail;
}

inline std::uint64_t
FileSize(const std::string & path)
{
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<std::uint64_t>(in.tellg()) : 0;
}

/** The value of `key = value` in a MetaImage header ("" when absent). */
inline std::string
MetaImageField(const std::string & header, const std::string & key)
{
  std::size_t at = 0;
  while ((at = header.find(key, at)) != std::string::npos)
  {
    const bool  lineStart = at == 0 || header[at - 1] == '\n';
    std::size_t equals = header.find_first_not_of(' ', at + key.size());
    if (lineStart && equals != std::string::npos && header[equals] == '=')
    {
      const std::size_t begin = header.find_first_not_of(' ', equals + 1);
      const std::size_t end = header.find_first_of("\r\n", begin);
      return header.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    }
    at += key.size();
  }
  return "";
}

/** Whether a MetaImage ElementDataFile names an absolute path. */
inline bool
IsAbsolutePath(const std::string & path)
{
  return !path.empty() && (path[0] == '/' || path[0] == '\\' || (path.size() > 1 && path[1] == ':'));
}

/** Bytes of pixel data a MetaImage file's data holds, or -1 where that cannot be told without
 * decoding it (compressed or text data, slice lists). */
inline long long
MetaImageStoredBytes(const std::string & fileName)
{
  std::ifstream in(fileName, std::ios::binary);
  std::string   header(65536, '\0');
  in.read(&header[0], static_cast<std::streamsize>(header.size()));
  header.resize(static_cast<std::size_t>(in.gcount()));
  const std::string compressed = Lowercase(MetaImageField(header, "CompressedData"));
  const std::string binary = Lowercase(MetaImageField(header, "BinaryData"));
  const std::string data = MetaImageField(header, "ElementDataFile");
  if (compressed == "true" || binary == "false" || data.empty() || data == "LIST" ||
      data.find(' ') != std::string::npos)
  {
    return -1;
  }
  if (data == "LOCAL")
  {
    const std::size_t line = header.find("ElementDataFile");
    const std::size_t end = header.find('\n', line);
    return end == std::string::npos ? 0 : static_cast<long long>(FileSize(fileName)) - static_cast<long long>(end + 1);
  }
  const std::size_t slash = fileName.find_last_of("/\\");
  const std::string folder = slash == std::string::npos ? "" : fileName.substr(0, slash + 1);
  return static_cast<long long>(FileSize((IsAbsolutePath(data) ? "" : folder) + data));
}

/** For an uncompressed NIfTI-1 file: the bytes its header declares (dim[] and bitpix, as stored,
 * before any scaling) and the bytes after vox_offset; false where that cannot be told. */
inline bool
NiftiBytes(const std::string & fileName, long long & stored, long long & declared)
{
  std::ifstream in(fileName, std::ios::binary);
  char          header[348] = {};
  in.read(header, sizeof(header));
  std::int32_t size = 0;
  std::int16_t dim[8] = {};
  std::int16_t bitpix = 0;
  float        offset = 0.0f;
  std::memcpy(&size, header, 4);
  std::memcpy(dim, header + 40, sizeof(dim));
  std::memcpy(&bitpix, header + 72, 2);
  std::memcpy(&offset, header + 108, 4);
  if (!in || size != 348 || !(offset >= 348.0f) || dim[0] < 1 || dim[0] > 7 || bitpix <= 0)
  {
    return false; // byte-swapped or not NIfTI-1: let the reader judge
  }
  declared = bitpix / 8;
  for (int a = 1; a <= dim[0]; ++a)
  {
    declared *= std::max<std::int16_t>(dim[a], 1);
  }
  stored = static_cast<long long>(FileSize(fileName)) - static_cast<long long>(offset);
  return true;
}

/** Refuses inputs ITK 5.2 would read as zero-filled data, and complex pixels (as scikit-image does). */
inline void
CheckInput(const itk::ImageIOBase & io, const std::string & fileName)
{
  if (io.GetPixelType() == itk::IOPixelEnum::COMPLEX)
  {
    throw std::runtime_error("Cannot convert from complex to float64: " + fileName +
                             " holds complex pixels; non-local means denoises real images (denoise the real and "
                             "imaginary parts, or the magnitude, as separate images)");
  }
  long long stored = -1;
  long long declared = static_cast<long long>(io.GetImageSizeInBytes());
  if (EndsWith(fileName, ".mha") || EndsWith(fileName, ".mhd"))
  {
    stored = MetaImageStoredBytes(fileName);
  }
  else if (EndsWith(fileName, ".nii") && !NiftiBytes(fileName, stored, declared))
  {
    stored = -1;
  }
  if (stored >= 0 && stored < declared)
  {
    throw std::runtime_error(fileName + " is truncated: its header declares " + std::to_string(declared) +
                             " bytes of pixel data but the file holds " + std::to_string(stored) +
                             "; copy the file again or repair it");
  }
}

/** The ITK image IO that writes `fileName` (throws, naming the fix, when none does). */
inline itk::ImageIOBase::Pointer
WriterFor(const std::string & fileName)
{
  auto io = itk::ImageIOFactory::CreateImageIO(fileName.c_str(), itk::ImageIOFactory::IOFileModeEnum::WriteMode);
  if (io.IsNull())
  {
    throw std::runtime_error("no ITK image writer handles " + fileName +
                             "; give a file name with an extension ITK writes (.mha, .nrrd, .nii, .png, ...)");
  }
  return io;
}

/** Throws, before any computation, when the output's format cannot store an image of this
 * dimension, component count and component type, naming the --output-type that would work. */
inline void
CheckOutputFormat(const std::string & fileName, unsigned int dimension, unsigned int components, IOComponent type)
{
  const auto        io = WriterFor(fileName);
  const std::string format = io->GetNameOfClass();
  if (!io->SupportsDimension(dimension))
  {
    throw std::runtime_error(format + " cannot write " + std::to_string(dimension) + "D images (" + fileName +
                             "); write a format that can, such as .mha or .nrrd");
  }
  const bool eightBit = format == "JPEGImageIO" || format == "BMPImageIO";
  const bool png = format == "PNGImageIO";
  if ((eightBit && type != IOComponent::UCHAR) || (png && type != IOComponent::UCHAR && type != IOComponent::USHORT))
  {
    throw std::runtime_error(format + " cannot store " + NameOf(type) + " values (" + fileName +
                             "); give --output-type uint8" + (png ? " or uint16" : "") +
                             ", or write a format that stores " + NameOf(type) + ", such as .mha");
  }
  if ((eightBit || png) && components > 4)
  {
    throw std::runtime_error(format + " cannot store " + std::to_string(components) + " components per pixel (" +
                             fileName + "); write .mha or .nrrd");
  }
}

/** `count` values converted to TOut with the filter's own conversion (round to nearest, clamp). */
template <typename TOut, typename TIn>
void
ConvertTo(const TIn * values, std::size_t count, std::vector<char> & bytes)
{
  bytes.resize(count * sizeof(TOut));
  for (std::size_t i = 0; i < count; ++i)
  {
    const TOut converted = itk::nlm_detail::ConvertResult<TOut>(static_cast<double>(values[i]));
    std::memcpy(&bytes[i * sizeof(TOut)], &converted, sizeof(TOut));
  }
}

/** The data to write as `type`: `values` themselves when they are of that type, otherwise their
 * conversion, stored in `bytes`. */
template <typename TIn>
const void *
ConvertForWriting(const TIn * values, std::size_t count, IOComponent type, std::vector<char> & bytes)
{
  if ((std::is_same<TIn, float>::value && type == IOComponent::FLOAT) ||
      (std::is_same<TIn, double>::value && type == IOComponent::DOUBLE))
  {
    return values;
  }
  switch (type)
  {
    case IOComponent::UCHAR:
      ConvertTo<unsigned char>(values, count, bytes);
      break;
    case IOComponent::CHAR:
      ConvertTo<signed char>(values, count, bytes);
      break;
    case IOComponent::USHORT:
      ConvertTo<unsigned short>(values, count, bytes);
      break;
    case IOComponent::SHORT:
      ConvertTo<short>(values, count, bytes);
      break;
    case IOComponent::UINT:
      ConvertTo<unsigned int>(values, count, bytes);
      break;
    case IOComponent::INT:
      ConvertTo<int>(values, count, bytes);
      break;
    case IOComponent::FLOAT:
      ConvertTo<float>(values, count, bytes);
      break;
    default:
      ConvertTo<double>(values, count, bytes);
      break;
  }
  return bytes.data();
}

/** Formats whose data is written uncompressed, so that a short file is a failed write. */
inline bool
SizeCanBeChecked(const std::string & fileName)
{
  return EndsWith(fileName, ".mha") || EndsWith(fileName, ".nii") || EndsWith(fileName, ".nrrd") ||
         EndsWith(fileName, ".vtk");
}

/** A name beside `fileName` with the same extension(s), for writing before the rename. Formats
 * that write two files (.mhd/.raw, .hdr/.img) are written in place instead. */
inline std::string
TemporaryNameFor(const std::string & fileName)
{
  if (EndsWith(fileName, ".mhd") || EndsWith(fileName, ".nhdr") || EndsWith(fileName, ".hdr") ||
      EndsWith(fileName, ".img"))
  {
    return fileName;
  }
  const std::size_t slash = fileName.find_last_of("/\\");
  const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t dot = fileName.find('.', base + 1);
  const std::string stem = fileName.substr(base, dot == std::string::npos ? std::string::npos : dot - base);
  const std::string extension = dot == std::string::npos ? "" : fileName.substr(dot);
#if defined(_WIN32)
  const int pid = _getpid();
#else
  const int pid = static_cast<int>(getpid());
#endif
  return fileName.substr(0, base) + "." + stem + ".partial-" + std::to_string(pid) + extension;
}

/** Moves a written temporary file into place as `fileName`, after checking (where the format
 * allows) that it holds at least `dataBytes`; removes it and throws otherwise. */
inline void
CommitFile(const std::string & temporary, const std::string & fileName, std::uint64_t dataBytes)
{
  const std::uint64_t written = FileSize(temporary);
  if (SizeCanBeChecked(fileName) && written < dataBytes)
  {
    std::remove(temporary.c_str());
    throw std::runtime_error("writing " + fileName + " failed: the file holds " + std::to_string(written) +
                             " bytes but the data are " + std::to_string(dataBytes) +
                             " (is the disk full?); nothing was written");
  }
#if defined(_WIN32)
  if (temporary != fileName)
  {
    std::remove(fileName.c_str()); // rename does not replace a file on Windows
  }
#endif
  if (temporary != fileName && std::rename(temporary.c_str(), fileName.c_str()) != 0)
  {
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot move the result into place as " + fileName);
  }
}

/** Writes `image` (any component count) with components of `type` to `fileName`: to a temporary
 * file beside it, whose size is checked where the format allows, then renamed into place. On any
 * failure nothing is left at `fileName` that was not there before, and an exception says why. */
template <typename TImage>
void
WriteImage(const TImage * image, IOComponent type, itk::IOPixelEnum pixelType, const std::string & fileName)
{
  using ComponentType = typename itk::NumericTraits<typename TImage::PixelType>::ValueType;
  constexpr unsigned int D = TImage::ImageDimension;
  const auto             region = image->GetLargestPossibleRegion();
  const unsigned int     components = image->GetNumberOfComponentsPerPixel();
  const std::size_t      count = region.GetNumberOfPixels() * components;
  std::vector<char>      converted;
  const void *           data =
    ConvertForWriting(reinterpret_cast<const ComponentType *>(image->GetBufferPointer()), count, type, converted);

  auto              io = WriterFor(fileName);
  const std::string temporary = TemporaryNameFor(fileName);
  io->SetNumberOfDimensions(D);
  itk::ImageIORegion ioRegion(D);
  for (unsigned int a = 0; a < D; ++a)
  {
    io->SetDimensions(a, region.GetSize(a));
    io->SetSpacing(a, image->GetSpacing()[a]);
    io->SetOrigin(a, image->GetOrigin()[a]);
    std::vector<double> axis(D);
    for (unsigned int b = 0; b < D; ++b)
    {
      axis[b] = image->GetDirection()[b][a];
    }
    io->SetDirection(a, axis);
    ioRegion.SetIndex(a, 0);
    ioRegion.SetSize(a, region.GetSize(a));
  }
  io->SetNumberOfComponents(components);
  io->SetComponentType(type);
  const std::size_t dataBytes = count * io->GetComponentSize();
  io->SetPixelType(components == 1 ? itk::IOPixelEnum::SCALAR : pixelType);
  io->SetUseCompression(false);
  io->SetFileName(temporary);
  io->SetIORegion(ioRegion);
  try
  {
    io->WriteImageInformation();
    io->Write(data);
  }
  catch (...)
  {
    std::remove(temporary.c_str());
    throw;
  }
  CommitFile(temporary, fileName, dataBytes);
}

} // namespace nlm_files

#endif
