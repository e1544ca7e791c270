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

// The command-line program never reports success for a wrong result: inputs that hold less data
// than their header declares and complex inputs are refused before computing; an output format that
// cannot store the result's type is refused before computing and names the --output-type to use;
// the result keeps the input's component type (uint8 PNG in, uint8 PNG out); and a write that
// comes out short (a full disk) fails, leaving the previous file, and no partial one, in place.

#include "CudaNonLocalMeansDenoiseProgram.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkImage.h"
#include "itkImageFileReader.h"
#include "itkImageFileWriter.h"

#include <complex>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace
{
int failures = 0;

void
Expect(bool ok, const std::string & what)
{
  std::cout << (ok ? "ok:   " : "FAIL: ") << what << "\n";
  failures += ok ? 0 : 1;
}

/** The program refused before computing, with `message` on standard error, and wrote nothing. */
void
ExpectRefusal(const std::vector<std::string> & arguments,
              const std::string &              output,
              const std::string &              message,
              const std::string &              what)
{
  std::remove(output.c_str());
  std::string out, err;
  const int   status = RunDenoiseProgramCapturing(arguments, out, err);
  Expect(status != EXIT_SUCCESS && err.find(message) != std::string::npos &&
           out.find("Backend:") == std::string::npos && !std::ifstream(output).good(),
         what + " -> " + err.substr(0, err.find('\n')));
}

/** Names in `folder` that start with ".": the program's temporary files. */
int
HiddenFiles(const std::string & folder)
{
  int   count = 0;
  DIR * dir = opendir(folder.c_str());
  while (dirent * entry = dir ? readdir(dir) : nullptr)
  {
    const std::string name = entry->d_name;
    count += (name.size() > 2 && name[0] == '.' && name.find(".partial-") != std::string::npos) ? 1 : 0;
  }
  if (dir)
  {
    closedir(dir);
  }
  return count;
}
} // namespace

int
CudaNonLocalMeansDenoiseFilesTest(int argc, char * argv[])
{
  if (argc < 2)
  {
    std::cerr << "Usage: " << argv[0] << " output-folder\n";
    return EXIT_FAILURE;
  }
  const std::string folder = std::string(argv[1]) + "/files";
  const int         made = std::system(("rm -rf '" + folder + "' && mkdir -p '" + folder + "'").c_str());
  (void)made;
  const std::string              valid = folder + "/valid.mha", output = folder + "/out.mha";
  const std::vector<std::string> params = { "--backend", "cpu", "--patch-size", "3", "--patch-distance", "1" };
  auto                           with = [&params](std::vector<std::string> more) {
    more.insert(more.begin(), params.begin(), params.end());
    return more;
  };
  std::string out, err;
  Expect(RunDenoiseProgramCapturing(with({ "--phantom-size", "12", "--output", valid }), out, err) == EXIT_SUCCESS,
         "phantom written");
  const std::string intact = itk::nlm_test::ReadFile(valid);

  // Inputs that hold less data than their header declares.
  itk::nlm_test::WriteFile(folder + "/truncated.mha", intact.substr(0, intact.size() - 100));
  ExpectRefusal(with({ "--input", folder + "/truncated.mha", "--output", output }),
                output,
                "is truncated",
                "a truncated .mha input is refused");
  std::string bigger = intact;
  bigger.replace(bigger.find("DimSize = 12 12 12"), 18, "DimSize = 12 12 99");
  itk::nlm_test::WriteFile(folder + "/bigger.mha", bigger);
  ExpectRefusal(with({ "--input", folder + "/bigger.mha", "--output", output }),
                output,
                "declares 57024 bytes of pixel data but the file holds 6912",
                "a header declaring more voxels than the file holds is refused");

  // NIfTI: a truncated file is refused; a scaled int16 file (scl_slope 2, which ITK reads as float
  // values) holds exactly what its header declares and is accepted.
  {
    using Short3 = itk::Image<short, 3>;
    auto image = Short3::New();
    image->SetRegions(Short3::RegionType(Short3::SizeType{ { 10, 9, 8 } }));
    image->Allocate();
    for (short * p = image->GetBufferPointer(); p != image->GetBufferPointer() + 720; ++p)
    {
      *p = static_cast<short>(100 + (p - image->GetBufferPointer()) % 7);
    }
    itk::WriteImage(image, folder + "/short.nii");
    std::string nifti = itk::nlm_test::ReadFile(folder + "/short.nii");
    const float slope = 2.0f;
    nifti.replace(112, sizeof(slope), reinterpret_cast<const char *>(&slope), sizeof(slope));
    itk::nlm_test::WriteFile(folder + "/scaled.nii", nifti);
    std::remove(output.c_str());
    Expect(RunDenoiseProgramCapturing(
             with({ "--input", folder + "/scaled.nii", "--output", output, "--h", "2" }), out, err) == EXIT_SUCCESS,
           "a scaled int16 NIfTI input is accepted " + err.substr(0, err.find('\n')));
    itk::nlm_test::WriteFile(folder + "/truncated.nii", nifti.substr(0, nifti.size() - 10));
    ExpectRefusal(with({ "--input", folder + "/truncated.nii", "--output", output }),
                  output,
                  "is truncated",
                  "a truncated .nii input is refused");
  }

  // Complex input, as scikit-image refuses it.
  {
    using ComplexImage = itk::Image<std::complex<float>, 2>;
    auto image = ComplexImage::New();
    image->SetRegions(ComplexImage::RegionType(ComplexImage::SizeType{ { 6, 5 } }));
    image->Allocate();
    image->FillBuffer(std::complex<float>(0.5f, 0.25f));
    itk::WriteImage(image, folder + "/complex.nii");
    ExpectRefusal(with({ "--input", folder + "/complex.nii", "--output", output }),
                  output,
                  "Cannot convert from complex to float64",
                  "complex input is refused");
  }

  // Output formats that cannot store the result are refused before computing.
  ExpectRefusal(with({ "--input", valid, "--output", folder + "/out.png" }),
                folder + "/out.png",
                "cannot write 3D images",
                "a 3D result as PNG is refused");
  {
    using Float2 = itk::Image<double, 2>;
    auto image = Float2::New();
    image->SetRegions(Float2::RegionType(Float2::SizeType{ { 20, 16 } }));
    image->Allocate();
    image->FillBuffer(0.5);
    itk::WriteImage(image, folder + "/double2d.mha");
    ExpectRefusal(with({ "--input", folder + "/double2d.mha", "--output", folder + "/out.png" }),
                  folder + "/out.png",
                  "give --output-type uint8 or uint16",
                  "a float64 result as PNG is refused, naming --output-type");
  }
  ExpectRefusal(with({ "--input", valid, "--output", output, "--output-type", "complex64" }),
                output,
                "--output-type must be input, uint8",
                "an unknown --output-type is refused");

  // uint8 PNG in, uint8 PNG out; --output-type float64 writes float64.
  {
    using Byte2 = itk::Image<unsigned char, 2>;
    auto image = Byte2::New();
    image->SetRegions(Byte2::RegionType(Byte2::SizeType{ { 24, 20 } }));
    image->Allocate();
    unsigned int v = 7;
    for (unsigned char * p = image->GetBufferPointer(); p != image->GetBufferPointer() + 480; ++p)
    {
      v = v * 1103515245u + 12345u;
      *p = static_cast<unsigned char>(100 + (v >> 16) % 50);
    }
    itk::WriteImage(image, folder + "/in.png");
    const bool pngRuns =
      RunDenoiseProgramCapturing(with({ "--input", folder + "/in.png", "--output", folder + "/out.png", "--h", "20" }),
                                 out,
                                 err) == EXIT_SUCCESS;
    auto io =
      itk::ImageIOFactory::CreateImageIO((folder + "/out.png").c_str(), itk::ImageIOFactory::IOFileModeEnum::ReadMode);
    bool isByte = false;
    if (pngRuns && io)
    {
      io->SetFileName(folder + "/out.png");
      io->ReadImageInformation();
      isByte = io->GetComponentType() == itk::IOComponentEnum::UCHAR && io->GetDimensions(0) == 24;
    }
    Expect(pngRuns && isByte, "uint8 PNG in gives a uint8 PNG out");
    const bool asDouble =
      RunDenoiseProgramCapturing(
        with({ "--input", folder + "/in.png", "--output", output, "--output-type", "float64" }), out, err) ==
        EXIT_SUCCESS &&
      itk::nlm_test::ReadFile(output).find("ElementType = MET_DOUBLE") != std::string::npos;
    Expect(asDouble, "--output-type float64 writes float64");
  }

  // --stream-divisions: the same numbers, read, denoised and written in pieces; refused where the
  // whole image would be needed or the format does not stream.
  {
    using Float3 = itk::Image<float, 3>;
    auto image = Float3::New();
    image->SetRegions(Float3::RegionType(Float3::SizeType{ { 23, 19, 41 } }));
    image->Allocate();
    unsigned int v = 11;
    for (float * p = image->GetBufferPointer(); p != image->GetBufferPointer() + 23 * 19 * 41; ++p)
    {
      v = v * 1103515245u + 12345u;
      *p = 0.5f + static_cast<float>((v >> 16) % 1000) * 1e-4f;
    }
    itk::WriteImage(image, folder + "/volume.mha");
    const std::string whole = folder + "/whole.mha", pieces = folder + "/pieces.mha";
    const bool        ran =
      RunDenoiseProgramCapturing(with({ "--input", folder + "/volume.mha", "--output", whole }), out, err) ==
        EXIT_SUCCESS &&
      RunDenoiseProgramCapturing(
        with({ "--input", folder + "/volume.mha", "--output", pieces, "--stream-divisions", "5" }), out, err) ==
        EXIT_SUCCESS;
    bool same = false;
    if (ran)
    {
      const auto a = itk::ReadImage<Float3>(whole);
      const auto b = itk::ReadImage<Float3>(pieces);
      same = a->GetLargestPossibleRegion() == b->GetLargestPossibleRegion() &&
             std::memcmp(a->GetBufferPointer(), b->GetBufferPointer(), 23 * 19 * 41 * sizeof(float)) == 0;
    }
    Expect(ran && same && out.find("5 stream divisions") != std::string::npos,
           "--stream-divisions 5 gives bitwise the unstreamed output " + err.substr(0, err.find('\n')));
    ExpectRefusal(with({ "--input",
                         folder + "/volume.mha",
                         "--output",
                         pieces,
                         "--stream-divisions",
                         "3",
                         "--preview",
                         folder + "/p.png" }),
                  pieces,
                  "leave out --preview",
                  "--stream-divisions with --preview is refused");
    itk::WriteImage(image, folder + "/compressed.mha", true);
    ExpectRefusal(with({ "--input", folder + "/compressed.mha", "--output", pieces, "--stream-divisions", "3" }),
                  pieces,
                  "needs formats ITK reads and writes in pieces",
                  "--stream-divisions of a compressed input is refused");
    ExpectRefusal(with({ "--input", folder + "/short.nii", "--output", pieces, "--stream-divisions", "3" }),
                  pieces,
                  "give --output-type float64",
                  "--stream-divisions of an integer input without --output-type float64 is refused");
  }

  // The extensions from files: a uint16 mask (values above 255 must not wrap to 0) with --rician and
  // a noise map; masked-out voxels keep the input, the others equal the run without a mask; a float
  // mask and Rician without a sigma are refused.
  {
    using Float3 = itk::Image<float, 3>;
    using UShort3 = itk::Image<unsigned short, 3>;
    const auto input = itk::ReadImage<Float3>(valid);
    auto       mask = UShort3::New();
    mask->SetRegions(input->GetLargestPossibleRegion());
    mask->Allocate();
    for (itk::SizeValueType i = 0; i < 1728; ++i)
    {
      mask->GetBufferPointer()[i] = (i % 3 == 0) ? 0 : 256; // 256 would wrap to 0 in an 8-bit read
    }
    itk::WriteImage(mask, folder + "/mask.mha");
    auto sigma = itk::Image<double, 3>::New();
    sigma->SetRegions(input->GetLargestPossibleRegion());
    sigma->Allocate();
    sigma->FillBuffer(0.05);
    itk::WriteImage(sigma, folder + "/sigma.mha");
    const std::string masked = folder + "/masked.mha", plain = folder + "/plain.mha";
    const auto        common = with({ "--input", valid, "--rician", "--noise-sigma", folder + "/sigma.mha" });
    auto              maskedArguments = common;
    maskedArguments.insert(maskedArguments.end(), { "--mask", folder + "/mask.mha", "--output", masked });
    auto plainArguments = common;
    plainArguments.insert(plainArguments.end(), { "--output", plain });
    const bool ran = RunDenoiseProgramCapturing(maskedArguments, out, err) == EXIT_SUCCESS &&
                     RunDenoiseProgramCapturing(plainArguments, out, err) == EXIT_SUCCESS;
    Expect(ran, "--rician --noise-sigma with and without --mask -> " + err.substr(0, err.find('\n')));
    if (ran)
    {
      const auto  a = itk::ReadImage<Float3>(masked), b = itk::ReadImage<Float3>(plain);
      std::size_t wrong = 0;
      for (itk::SizeValueType i = 0; i < 1728; ++i)
      {
        const float expected = (i % 3 == 0) ? input->GetBufferPointer()[i] : b->GetBufferPointer()[i];
        wrong += (a->GetBufferPointer()[i] != expected) ? 1 : 0;
      }
      Expect(wrong == 0,
             "masked-out voxels keep the input, the others equal the unmasked run (" + std::to_string(wrong) +
               " differ)");
    }
    ExpectRefusal(with({ "--input", valid, "--mask", folder + "/sigma.mha", "--output", output }),
                  output,
                  "--mask takes an image of integers",
                  "a mask of real numbers is refused");
    ExpectRefusal(with({ "--input", valid, "--rician", "--output", output }),
                  output,
                  "SetSigma",
                  "--rician without a noise level is refused");
    // Per-axis radii: equal ones give the isotropic output (patch 3, distance 1) bit for bit.
    const std::string radii = folder + "/radii.mha", isotropic = folder + "/isotropic.mha";
    const bool        both =
      RunDenoiseProgramCapturing(
        with({ "--input", valid, "--patch-radius", "1,1,1", "--search-radius", "1,1,1", "--output", radii }),
        out,
        err) == EXIT_SUCCESS &&
      RunDenoiseProgramCapturing(with({ "--input", valid, "--output", isotropic }), out, err) == EXIT_SUCCESS;
    Expect(both && itk::nlm_test::ReadFile(radii) == itk::nlm_test::ReadFile(isotropic),
           "--patch-radius 1,1,1 --search-radius 1,1,1 == --patch-size 3 --patch-distance 1, byte for byte");
    Expect(RunDenoiseProgramCapturing(
             with({ "--input", valid, "--patch-radius", "1,1,2", "--search-radius", "2,2,1", "--output", radii }),
             out,
             err) == EXIT_SUCCESS &&
             out.find("patch radius [1, 1, 2], search radius [2, 2, 1]") != std::string::npos,
           "anisotropic radii run and are reported");
    ExpectRefusal(with({ "--input", valid, "--patch-radius", "1,2", "--output", output }),
                  output,
                  "give one per axis",
                  "--patch-radius with too few radii is refused");
  }

  // A write that comes out short (the file size limit stands in for a full disk): the program fails,
  // the previous output stays, and no partial file is left.
  {
    itk::nlm_test::WriteFile(output, "the previous result");
    struct rlimit saved;
    getrlimit(RLIMIT_FSIZE, &saved);
    struct rlimit small = saved;
    small.rlim_cur = 20000;
    std::signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &small);
    const int status = RunDenoiseProgramCapturing(with({ "--phantom-size", "40", "--output", output }), out, err);
    setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, SIG_DFL);
    Expect(status != EXIT_SUCCESS && err.find("is the disk full?") != std::string::npos,
           "a short write fails -> " + err.substr(0, err.find('\n')));
    Expect(itk::nlm_test::ReadFile(output) == "the previous result", "the previous output is left as it was");
    Expect(HiddenFiles(folder) == 0, "no partial file is left");
  }
  std::cout << (failures == 0 ? "Test passed." : "Test FAILED.") << "\n";
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
