# embed_file.cmake - writes the bytes of a file as a C array (cmake -P, at build time):
#   cmake -DIN=FILE -DOUT=FILE.c -DNAME=symbol -P embed_file.cmake
# defines `const unsigned char NAME[]` and `const size_t NAME_size`. Plain C, so the build
# stays portable to any compiler and target (an assembler .incbin would tie it to one
# object format).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
# 32 bytes a line: "0xAB," each.
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" body "${body}")
file(WRITE "${OUT}.tmp"
  "/* Generated from ${IN} by cmake/embed_file.cmake: do not edit. */\n"
  "#include <stddef.h>\n\n"
  "extern const unsigned char ${NAME}[];\n"
  "extern const size_t ${NAME}_size;\n"
  "const unsigned char ${NAME}[${n_bytes}] = {\n${body}};\n"
  "const size_t ${NAME}_size = ${n_bytes};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
