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
#include "itkCudaNonLocalMeansImageFilterEnums.h"

namespace itk
{
std::ostream &
operator<<(std::ostream & out, const CudaNonLocalMeansImageFilterEnums::Backend value)
{
  switch (value)
  {
    case CudaNonLocalMeansImageFilterEnums::Backend::Auto:
      return out << "CudaNonLocalMeansImageFilterEnums::Backend::Auto";
    case CudaNonLocalMeansImageFilterEnums::Backend::CPU:
      return out << "CudaNonLocalMeansImageFilterEnums::Backend::CPU";
    case CudaNonLocalMeansImageFilterEnums::Backend::CUDA:
      return out << "CudaNonLocalMeansImageFilterEnums::Backend::CUDA";
  }
  return out << "INVALID VALUE FOR CudaNonLocalMeansImageFilterEnums::Backend";
}

std::ostream &
operator<<(std::ostream & out, const CudaNonLocalMeansImageFilterEnums::NoiseModel value)
{
  switch (value)
  {
    case CudaNonLocalMeansImageFilterEnums::NoiseModel::Gaussian:
      return out << "CudaNonLocalMeansImageFilterEnums::NoiseModel::Gaussian";
    case CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician:
      return out << "CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician";
  }
  return out << "INVALID VALUE FOR CudaNonLocalMeansImageFilterEnums::NoiseModel";
}
} // end namespace itk
