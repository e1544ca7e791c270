# Writes a C++ source that holds text files as character arrays, so the library carries its CUDA
# kernels and compiles them at run time with NVRTC. Run as a script:
#   cmake -DOUTPUT=<file.cxx> -DINPUTS=<name1=path1;name2=path2> -P CudaNonLocalMeansEmbed.cmake
# Each name becomes `extern const char <name>[]` in namespace itk::nlm.

set(_text "// Generated from the CUDA sources by CMake/CudaNonLocalMeansEmbed.cmake; do not edit.\n")
string(APPEND _text "namespace itk\n{\nnamespace nlm\n{\n")
foreach(_item IN LISTS INPUTS)
  string(REPLACE "=" ";" _pair "${_item}")
  list(GET _pair 0 _name)
  list(GET _pair 1 _path)
  file(READ "${_path}" _hex HEX)
  string(LENGTH "${_hex}" _len)
  math(EXPR _bytes "${_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _array "${_hex}")
  # Break the initialiser into lines of 32 bytes.
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){32})" "\\1\n" _array "${_array}")
  string(APPEND _text "extern const char ${_name}[];\n")
  string(APPEND _text "const char ${_name}[${_bytes} + 1] = {\n${_array}0x00 };\n")
endforeach()
string(APPEND _text "} // namespace nlm\n} // namespace itk\n")

set(_old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" _old)
endif()
if(NOT _old STREQUAL _text)
  file(WRITE "${OUTPUT}" "${_text}")
endif()
