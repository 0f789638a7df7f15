# Writes OUT, a CTest include file with one test per case of the test
# executable EXE (its --list prints one case name a line), named NAME.<case>,
# so CTest's output names a failing case, with the environment ENV (optional,
# NAME=VALUE) and the CTest RESOURCE_LOCK LOCK (optional). Run after each build of EXE.
execute_process(COMMAND ${EXE} --list OUTPUT_VARIABLE cases RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} --list failed: ${rc}")
endif()
string(REPLACE "\n" ";" cases "${cases}")
set(text "")
foreach(case ${cases})
  if(case)
    string(APPEND text "add_test([=[${NAME}.${case}]=] [=[${EXE}]=] [=[${case}]=])\n"
                       "set_tests_properties([=[${NAME}.${case}]=] PROPERTIES SKIP_RETURN_CODE 77)\n")
    if(ENV)
      string(APPEND text "set_tests_properties([=[${NAME}.${case}]=] PROPERTIES ENVIRONMENT [=[${ENV}]=])\n")
    endif()
    if(LOCK)
      string(APPEND text "set_tests_properties([=[${NAME}.${case}]=] PROPERTIES RESOURCE_LOCK [=[${LOCK}]=])\n")
    endif()
  endif()
endforeach()
file(WRITE ${OUT} "${text}")
