# Turn a text file into a C source holding it as a NUL-terminated char array.
#   cmake -DIN=trident.glsl -DOUT=x.c -DNAME=td_header_glsl -P embed_text.cmake
file(READ ${IN} hex HEX)
string(REGEX REPLACE "(..)" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n    " bytes "${bytes}")
file(WRITE ${OUT} "/* generated from ${IN} by embed_text.cmake */\n"
  "const char ${NAME}[] = {\n    ${bytes}0x00};\n")
