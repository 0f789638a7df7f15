# Shader variants: vk_shader(<name> <file> DEFINES...). Names follow
# <op>_<dtype>[_<dtype>]; dtype codes mirror td_dtype (see shaders/types.glsl).
# Each dtype family is listed contiguously in td_dtype order, so the C side
# finds a variant as VK_SHADER_<op>_f32 + dtype (VK_DT_SHADER in vk_ops.h).
# A shader of one plain family registers itself: its first line
#   // variants: float|num|all
# gives <file name>_<dt> with A_DT=<code> for each dtype of that class. The
# shaders with other variants are listed below.
set(VK_DTYPES f32 f64 f16 bf16 i32 i64 u8 bool)
set(VK_NUM_DTYPES f32 f64 f16 bf16 i32 i64 u8)
set(VK_FLOAT_DTYPES f32 f64 f16 bf16)

# vk_family(<op> <file> <dtype list> [DEFINES...]): <op>_<dt> with A_DT=<code>
macro(vk_family op file dts)
  foreach(dt ${${dts}})
    list(FIND VK_DTYPES ${dt} code)
    vk_shader(${op}_${dt} ${file} A_DT=${code} ${ARGN})
  endforeach()
endmacro()

file(GLOB VK_SHADER_FILES CONFIGURE_DEPENDS ${VK_SHADER_DIR}/*.comp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${VK_SHADER_FILES})
foreach(path ${VK_SHADER_FILES})
  file(STRINGS ${path} first LIMIT_COUNT 1)
  if(first MATCHES "^// variants: *(float|num|all) *$")
    set(dts VK_DTYPES)
    if(NOT CMAKE_MATCH_1 STREQUAL "all")
      string(TOUPPER "VK_${CMAKE_MATCH_1}_DTYPES" dts)
    endif()
    get_filename_component(op ${path} NAME_WE)
    get_filename_component(file ${path} NAME)
    vk_family(${op} ${file} ${dts})
  elseif(first MATCHES "^// variants:")
    message(FATAL_ERROR "${path}: '${first}': the variants line names float, num or all")
  endif()
endforeach()

foreach(a ${VK_DTYPES})
  list(FIND VK_DTYPES ${a} ca)
  vk_shader(fill_${a} fill.comp O_DT=${ca})
endforeach()
foreach(a ${VK_DTYPES})
  list(FIND VK_DTYPES ${a} ca)
  foreach(o ${VK_DTYPES})
    list(FIND VK_DTYPES ${o} co)
    vk_shader(copy_${a}_${o} copy.comp A_DT=${ca} O_DT=${co})
  endforeach()
endforeach()
vk_family(compare binary.comp VK_DTYPES CMP=1)
vk_family(binary binary.comp VK_NUM_DTYPES)
vk_family(reduce reduce.comp VK_NUM_DTYPES)
vk_shader(reduce_sum_i32 reduce.comp A_DT=4 SUM_I64=1)
vk_shader(reduce_sum_i64 reduce.comp A_DT=5 SUM_I64=1)
vk_shader(reduce_sum_u8 reduce.comp A_DT=6 SUM_I64=1)
vk_family(xent cross_entropy.comp VK_FLOAT_DTYPES)
vk_family(attention attention.comp VK_FLOAT_DTYPES)
vk_family(attention_bmask attention.comp VK_FLOAT_DTYPES MASK_BOOL=1)
foreach(es 1 2 4 8)
  vk_shader(index_${es} index.comp ES=${es} A_DT=0)
endforeach()
vk_shader(matmul_coopmat_f16 matmul_coopmat.comp A_DT=2)
if(VK_KHR_BUILT)
  vk_shader(matmul_coopmat_khr_f16 matmul_coopmat.comp A_DT=2 COOPMAT_KHR=1)
  # the words the native bf16 GEMM retypes (CMakeLists.txt's matmul_coopmat_native_bf16 row): embedded, no row
  vk_spirv(matmul_coopmat_khr_f16_bf16bits matmul_coopmat.comp A_DT=2 COOPMAT_KHR=1 BF16_BITS=1)
endif()
# bf16 MATMUL on the f16 tensor cores (vk_ops_matmul.c); its KHR variant only where glslang >= 13 builds it
vk_shader(matmul_bf16_keys matmul_bf16_keys.comp)
vk_shader(matmul_bf16_scale matmul_bf16_scale.comp) # the prescaled f16 copies (TRIDENT_VK_BF16_PRESCALE)
vk_shader(matmul_coopmat_bf16 matmul_coopmat_bf16.comp A_DT=3)
vk_shader(matmul_coopmat_emu_bf16 matmul_coopmat_bf16.comp A_DT=3 COOPMAT_EMU=1) # TRIDENT_VULKAN_COOPMAT_BF16=emulated
if(VK_GLSLANG_KHR)
  vk_shader(matmul_coopmat_khr_bf16 matmul_coopmat_bf16.comp A_DT=3 COOPMAT_KHR=1)
endif()
vk_shader(pool2d_scatter_f32 pool2d_scatter.comp)
# f16 ATTENTION forward on tensor cores (vk_ops_attention.c); its KHR variant only where glslang >= 13 builds it
vk_shader(attention_coopmat_f16 attention_coopmat.comp A_DT=2)
if(VK_GLSLANG_KHR)
  vk_shader(attention_coopmat_khr_f16 attention_coopmat.comp A_DT=2 COOPMAT_KHR=1)
endif()
# bf16 ATTENTION forward and the f16 / bf16 backward on tensor cores (vk_ops_attention.c), KHR likewise
vk_shader(attention_coopmat_bf16 attention_coopmat.comp A_DT=3)
vk_shader(attention_coopmat_bwd_f16 attention_coopmat_bwd.comp A_DT=2)
vk_shader(attention_coopmat_bwd_bf16 attention_coopmat_bwd.comp A_DT=3)
vk_shader(attention_bf16_amax attention_bf16_amax.comp) # the heads' keys of the bf16 kernels above
# their emulated twins (TRIDENT_VK_ATTN=emulated: the tests run the kernels' logic on devices without coopmat)
vk_shader(attention_coopmat_emu_f16 attention_coopmat.comp A_DT=2 COOPMAT_EMU=1)
vk_shader(attention_coopmat_emu_bf16 attention_coopmat.comp A_DT=3 COOPMAT_EMU=1)
vk_shader(attention_coopmat_bwd_emu_f16 attention_coopmat_bwd.comp A_DT=2 COOPMAT_EMU=1)
vk_shader(attention_coopmat_bwd_emu_bf16 attention_coopmat_bwd.comp A_DT=3 COOPMAT_EMU=1)
# the native bf16 kernels' words (BF16_BITS), retyped to bf16 by CMakeLists.txt's _native_bf16 rows: embedded, no
# rows; and their emulated twins (TRIDENT_VK_ATTN=emulated with TRIDENT_VK_BF16=native), run unretyped
if(VK_ATTN_NATIVE_BUILT)
  vk_spirv(attention_coopmat_khr_bf16bits attention_coopmat.comp A_DT=3 COOPMAT_KHR=1 BF16_BITS=1)
  vk_spirv(attention_coopmat_bwd_khr_bf16bits attention_coopmat_bwd.comp A_DT=3 COOPMAT_KHR=1 BF16_BITS=1)
endif()
vk_shader(attention_coopmat_emu_native_bf16 attention_coopmat.comp A_DT=3 COOPMAT_EMU=1 BF16_BITS=1)
vk_shader(attention_coopmat_bwd_emu_native_bf16 attention_coopmat_bwd.comp A_DT=3 COOPMAT_EMU=1 BF16_BITS=1)
if(VK_GLSLANG_KHR)
  vk_shader(attention_coopmat_khr_bf16 attention_coopmat.comp A_DT=3 COOPMAT_KHR=1)
  vk_shader(attention_coopmat_bwd_khr_f16 attention_coopmat_bwd.comp A_DT=2 COOPMAT_KHR=1)
  vk_shader(attention_coopmat_bwd_khr_bf16 attention_coopmat_bwd.comp A_DT=3 COOPMAT_KHR=1)
endif()
