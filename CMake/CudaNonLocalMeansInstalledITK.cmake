# Build against an installed ITK (no ITKModuleExternal): plain CMake targets, CTest and CMake's own
# ExternalData, with the same layout and names the ITK module build produces.

if(NOT CMAKE_CXX_STANDARD)
  set(CMAKE_CXX_STANDARD 17)
endif()
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# The library needs ITKCommon; the tests and the command-line program read and write images in the
# common formats (MINC and HDF5 are left out: they pull in large libraries).
set(CudaNonLocalMeans_ITK_COMPONENTS ITKCommon ITKIOImageBase ITKTestKernel
  ITKIOMeta ITKIONRRD ITKIONIFTI ITKIOPNG ITKIOTIFF ITKIOJPEG ITKIOBMP ITKIOVTK ITKIOGDCM ITKIOGIPL)
find_package(ITK 5.2 REQUIRED COMPONENTS ${CudaNonLocalMeans_ITK_COMPONENTS})
include(${ITK_USE_FILE})
include(GNUInstallDirs)
include(CTest)

set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
set(CMAKE_ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
set(ITK_TEST_OUTPUT_DIR ${CMAKE_BINARY_DIR}/Testing/Temporary)
file(MAKE_DIRECTORY ${ITK_TEST_OUTPUT_DIR})

add_subdirectory(src)
add_subdirectory(examples)
add_subdirectory(benchmarks)
if(BUILD_TESTING)
  add_subdirectory(test)
endif()

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/CudaNonLocalMeans)
install(FILES ${CudaNonLocalMeans_BINARY_DIR}/include/CudaNonLocalMeansExport.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/CudaNonLocalMeans)
