# Shader variants: vk_shader(<name> <file> DEFINES...). Names follow
# <op>_<dtype>[_<dtype>]; dtype codes mirror td_dtype (see shaders/types.glsl).
# Each dtype family is listed contiguously in td_dtype order, so the C side
# finds a variant as VK_SHADER_<op>_f32 + dtype (VK_DT_SHADER in vk_ops.h).
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
vk_family(where where.comp VK_DTYPES)
vk_family(binary binary.comp VK_NUM_DTYPES)
vk_family(unary unary.comp VK_NUM_DTYPES)
vk_family(reduce reduce.comp VK_NUM_DTYPES)
vk_shader(reduce_sum_i32 reduce.comp A_DT=4 SUM_I64=1)
vk_shader(reduce_sum_i64 reduce.comp A_DT=5 SUM_I64=1)
vk_shader(reduce_sum_u8 reduce.comp A_DT=6 SUM_I64=1)
vk_family(matmul matmul.comp VK_FLOAT_DTYPES)
vk_family(rand rand.comp VK_FLOAT_DTYPES)
vk_family(softmax softmax.comp VK_FLOAT_DTYPES)
vk_family(xent cross_entropy.comp VK_FLOAT_DTYPES)
