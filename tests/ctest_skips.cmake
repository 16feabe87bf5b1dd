# ctest_skips.cmake - run by ctest after the tests (CTEST_CUSTOM_POST_TEST, which
# CMakeLists.txt writes into the build folder's CTestCustom.cmake):
#   cmake -DLOG=<build>/Testing/Temporary/LastTest.log -P tests/ctest_skips.cmake
# ctest itself lists the tests it skipped but neither counts them nor sees the cases skipped
# inside a test that passed. This reads every test's output in the log (the lines of
# tests/test.h and tests/fuzz/fuzz.h: "N passed, N failed, N skipped (K for missing data)",
# "SKIP (missing data): ...", "SKIP: ...", "replayed N inputs") and prints both counts, with
# names. With MOEINF_REQUIRE_SHARED=1 in the environment (.ci/run) any skip for missing data
# is an error: ctest then fails ("Problem executing post-test command(s)"). Skips for the
# machine (a kernel table this CPU lacks, a tool not installed) stay skips.

# While ctest runs, the log it writes is LastTest.log.tmp, renamed when ctest ends (CMake 3.22
# to 3.25 at least); the LastTest.log of the run before is deleted by CTEST_CUSTOM_PRE_TEST,
# so that it cannot be read in its place.
if(EXISTS "${LOG}.tmp")
  set(LOG "${LOG}.tmp")
elseif(NOT EXISTS "${LOG}")
  message("Skips: no test log (${LOG}) to count them from.")
  return()
endif()
file(READ "${LOG}" text)
# One list element per line; ';' and brackets would otherwise split or join elements.
string(REPLACE ";" "," text "${text}")
string(REPLACE "[" "(" text "${text}")
string(REPLACE "]" ")" text "${text}")
string(REPLACE "\n" ";" lines "${text}")

set(skipped_tests "")    # names of tests skipped whole
set(data_tests "")       # ... of them, for missing data
set(partial "")          # "name N" for tests that passed with skipped cases
set(n_partial_cases 0)
set(n_partial_data 0)

# Classifies the test whose output was just read (the variables below).
macro(finish_test)
  if(NOT cur STREQUAL "")
    if(summary)
      if(n_passed EQUAL 0 AND n_failed EQUAL 0 AND n_skipped GREATER 0)
        list(APPEND skipped_tests "${cur}")
        if(n_data GREATER 0)
          list(APPEND data_tests "${cur}")
        endif()
      elseif(n_failed EQUAL 0 AND n_skipped GREATER 0)
        list(APPEND partial "${cur} ${n_skipped}")
        math(EXPR n_partial_cases "${n_partial_cases} + ${n_skipped}")
        math(EXPR n_partial_data "${n_partial_data} + ${n_data}")
      endif()
    elseif(saw_skip AND NOT ran)
      list(APPEND skipped_tests "${cur}")
      if(saw_data_skip)
        list(APPEND data_tests "${cur}")
      endif()
    endif()
  endif()
endmacro()

set(cur "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9]+/[0-9]+ Test: (.+)$")
    finish_test()
    set(cur "${CMAKE_MATCH_1}")
    set(summary FALSE)
    set(ran FALSE)
    set(saw_skip FALSE)
    set(saw_data_skip FALSE)
  elseif(line MATCHES "^([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped")
    set(summary TRUE)
    set(n_passed ${CMAKE_MATCH_1})
    set(n_failed ${CMAKE_MATCH_2})
    set(n_skipped ${CMAKE_MATCH_3})
    set(n_data 0)
    if(line MATCHES "\\(([0-9]+) for missing data\\)")
      set(n_data ${CMAKE_MATCH_1})
    endif()
  elseif(line MATCHES "^replayed [0-9]+ inputs")
    set(ran TRUE)
  elseif(line MATCHES "^SKIP \\(missing data\\)")
    set(saw_skip TRUE)
    set(saw_data_skip TRUE)
  elseif(line MATCHES "^SKIP")
    set(saw_skip TRUE)
  endif()
endforeach()
finish_test()

list(LENGTH skipped_tests n_tests)
list(LENGTH data_tests n_data_tests)
list(LENGTH partial n_partial)
if(n_tests EQUAL 0 AND n_partial EQUAL 0)
  message("Skips: none (no test and no case skipped).")
  return()
endif()
list(SORT skipped_tests)
list(SORT partial)
string(REPLACE ";" ", " names "${skipped_tests}")
string(REPLACE ";" ", " partial_names "${partial}")
if(n_tests GREATER 0)
  message("Skips: ${n_tests} tests skipped (${n_data_tests} for missing data): ${names}")
else()
  message("Skips: no test skipped whole")
endif()
if(n_partial GREATER 0)
  message("       ${n_partial_cases} cases skipped (${n_partial_data} for missing data) inside "
          "${n_partial} tests that passed their other cases: ${partial_names}")
endif()
if(n_data_tests GREATER 0 OR n_partial_data GREATER 0)
  message("       (missing data: each test's output, ctest -V, names what it lacks)")
  if("$ENV{MOEINF_REQUIRE_SHARED}" STREQUAL "1")
    message(FATAL_ERROR "MOEINF_REQUIRE_SHARED=1: no test may skip for missing data")
  endif()
endif()
