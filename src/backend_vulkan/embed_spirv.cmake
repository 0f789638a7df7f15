# Turn one SPIR-V file into a C source holding it as a uint32_t array.
#   cmake -DIN=x.spv -DOUT=x.c -DNAME=x -P embed_spirv.cmake
# SPIR-V is a stream of little-endian 32-bit words; the regex assembles each word.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR rem "${n} % 8")
if(NOT rem EQUAL 0)
  message(FATAL_ERROR "${IN}: size is not a multiple of 4 bytes")
endif()
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "((0x........u,){8})" "\\1\n    " words "${words}")
math(EXPR nwords "${n} / 8")
file(WRITE ${OUT} "/* generated from ${NAME}.spv by embed_spirv.cmake */\n#include <stdint.h>\n"
  "const uint32_t vk_spv_${NAME}[${nwords}] = {\n    ${words}\n};\n")
