itk_module(CudaNonLocalMeans
  DEPENDS
    ITKCommon
  TEST_DEPENDS
    ITKTestKernel
    ITKGoogleTest
    ITKMetaIO
    ITKIOMeta
    ITKIOPNG
  EXCLUDE_FROM_DEFAULT
  ENABLE_SHARED
  DESCRIPTION
    "Non-local means denoising that reproduces scikit-image denoise_nl_means, on NVIDIA GPUs (NVRTC and the CUDA driver API, no toolkit needed) or multithreaded on the CPU."
)
