# Warning flags and sanitizers for rtgen's own targets (never for third-party code).
set(RTGEN_WARNINGS -Wall -Wextra)
if(RTGEN_WERROR)
  list(APPEND RTGEN_WARNINGS -Werror)
endif()

function(rtgen_target_options target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${RTGEN_WARNINGS}>)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(RTGEN_WERROR)  # .cu host code too (tests/kernels, tools), as rtgen_cuda_backend's
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>)
  endif()
  if(RTGEN_SANITIZE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${RTGEN_SANITIZE} -fno-omit-frame-pointer>)
    target_link_options(${target} PRIVATE -fsanitize=${RTGEN_SANITIZE})
    if(RTGEN_SANITIZE MATCHES "undefined")
      # Undefined behaviour fails the test instead of printing a warning and going on.
      target_compile_options(${target} PRIVATE
        $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
    endif()
  endif()
endfunction()

# rtgen_library(NAME DIR DEPS...): a static library of every .cc in DIR (one thing per file).
function(rtgen_library name dir)
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc)
  if(NOT _srcs)  # headers only
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${CMAKE_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${ARGN})
    return()
  endif()
  add_library(${name} STATIC ${_srcs})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARGN})
  rtgen_target_options(${name})
endfunction()

# rtgen_test(NAME DIR DEPS...): one GoogleTest binary from every *_test.cc in tests/DIR.
function(rtgen_test name dir)
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${dir}/*.cc)
  if(NOT _srcs)
    return()
  endif()
  add_executable(${name} ${_srcs})
  target_link_libraries(${name} PRIVATE ${ARGN} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE RTGEN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  rtgen_target_options(${name})
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${dir}")
endfunction()
