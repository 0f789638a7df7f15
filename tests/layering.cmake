# The layering test: arrows run one way. Each folder has a level; a file may use
# its own folder and folders of a lower level, never a peer or a higher one:
#   include/trident < src/core < backends, autograd, io, data < src/profile (the report) < nn < src/math < optim
#   < dist (DDP wraps modules, ZeRO-1 shards optimizers) < dist transport plugins < src/workloads < examples < bench
#   < tools (the CLI links bench)
# Checked: every #include "..." of src/, tools/ and bench/ (resolved as the compiler would: the
# file's folder, then src/, include/, bench/, src/workloads/), that tools and bench include
# trident/backend.h only in tools/devices.c, and, when OBJDIR (the trident library's object folder,
# CMakeFiles/trident.dir) and NM are given, that no object uses a symbol a higher folder defines.
# cmake -DROOT=<source dir> [-DOBJDIR=<dir> -DNM=<nm>] -P layering.cmake; fails listing each arrow.
cmake_minimum_required(VERSION 3.16)

set(levels
  include 0 src/core 10
  src/backend_cpu 20 src/backend_cuda 20 src/backend_vulkan 20 src/autograd 20 src/io 20 src/data 20 src/omp_env 20
  src/profile 25 src/nn 30 src/optim 40 src/dist 45 src/dist_mpi 46 src/dist_nccl 46 src/workloads 50 examples 55 bench 60
  tools 70)
list(APPEND levels src/math 32) # math blocks (issue 21) call nn's ops (cross-entropy), under optim and dist
# known exceptions: "from -> to" with the reason beside
set(allowed
  "tools -> tests"        # devices --selftest compiles in tests/test_conformance.c's case table
  "src/core -> src/backend_cpu") # core registers the built-in CPU backend (td_cpu_backend)

list(LENGTH levels n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET levels ${i} folder)
  list(GET levels ${j} level)
  set(level_${folder} ${level})
endforeach()

# The folder (a key of levels) holding path (relative to ROOT), or "" when none does.
function(folder_of path out)
  string(REGEX MATCH "^(src/[^/]+|include|examples|bench|tools|tests)" f "${path}")
  set(${out} "${f}" PARENT_SCOPE)
endfunction()

set(errors "")
# from uses to: an error unless to is from itself, lower, or allowed
function(check_arrow from to what)
  if(from STREQUAL to OR "${from} -> ${to}" IN_LIST allowed)
    return()
  endif()
  if(NOT DEFINED level_${from} OR NOT DEFINED level_${to})
    set(errors "${errors}  ${what}: ${from} -> ${to}: a folder without a level (add it to layering.cmake)\n" PARENT_SCOPE)
  elseif(NOT level_${to} LESS level_${from})
    set(errors "${errors}  ${what}: ${from} (level ${level_${from}}) -> ${to} (level ${level_${to}})\n" PARENT_SCOPE)
  endif()
endfunction()

file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/src/*.[ch] ${ROOT}/src/*.cu ${ROOT}/src/*.cuh ${ROOT}/src/*.cpp
  ${ROOT}/tools/*.[ch] ${ROOT}/bench/*.[ch])
foreach(src ${sources})
  folder_of(${src} from)
  get_filename_component(dir ${src} DIRECTORY)
  file(STRINGS ${ROOT}/${src} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line ${lines})
    string(REGEX REPLACE "^[^\"]*\"([^\"]+)\".*" "\\1" inc "${line}")
    set(target "")
    foreach(base ${dir} src include bench src/workloads)
      if(EXISTS ${ROOT}/${base}/${inc})
        file(RELATIVE_PATH target ${ROOT} ${ROOT}/${base}/${inc}) # folds ../
        break()
      endif()
    endforeach()
    if(target STREQUAL "") # a generated header (vk_shaders.h) or one of an -I folder (examples/custom_ops)
      continue()
    endif()
    folder_of(${target} to)
    check_arrow("${from}" "${to}" "${src} includes \"${inc}\"")
    if(target STREQUAL "include/trident/backend.h" AND from MATCHES "^(tools|bench)$" AND
       NOT src STREQUAL "tools/devices.c")
      set(errors "${errors}  ${src} includes trident/backend.h: the backend implementers' header (only tools/devices.c)\n")
    endif()
  endforeach()
endforeach()

if(OBJDIR AND NM AND IS_DIRECTORY ${OBJDIR}/src)
  file(GLOB folders RELATIVE ${OBJDIR} ${OBJDIR}/src/*)
  foreach(folder ${folders})
    file(GLOB objects ${OBJDIR}/${folder}/*.o)
    execute_process(COMMAND ${NM} -g --defined-only ${objects} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${NM} failed on ${OBJDIR}/${folder}")
    endif()
    string(REGEX MATCHALL "[^\n]* [A-TV-Z] [A-Za-z_][A-Za-z0-9_.]*\n" defs "${out}")
    foreach(d ${defs})
      string(REGEX REPLACE ".* ([A-Za-z_][A-Za-z0-9_.]*)\n$" "\\1" sym "${d}")
      set(owner_${sym} ${folder})
    endforeach()
  endforeach()
  foreach(folder ${folders})
    file(GLOB objects ${OBJDIR}/${folder}/*.o)
    foreach(obj ${objects})
      execute_process(COMMAND ${NM} -u ${obj} OUTPUT_VARIABLE out)
      string(REGEX MATCHALL "U [A-Za-z_][A-Za-z0-9_.]*" undefs "${out}")
      get_filename_component(name ${obj} NAME)
      foreach(u ${undefs})
        string(SUBSTRING "${u}" 2 -1 sym)
        if(DEFINED owner_${sym})
          check_arrow("${folder}" "${owner_${sym}}" "${folder}/${name} uses ${sym}")
        endif()
      endforeach()
    endforeach()
  endforeach()
endif()

if(errors)
  message(FATAL_ERROR "arrows that run back up:\n${errors}")
endif()
message(STATUS "layering: every arrow runs down")
