# SPDX-License-Identifier: Apache-2.0
# Runs the go tool on the Go binding against a build tree of libreshard,
# offline and with every cache in the build tree (ctest go.vet, go.test,
# go.example; `cmake --build <build> --target reshard_go`).
#
#   cmake -DGO=/usr/bin/go -DREPO=<source root> -DLIBDIR=<dir of libreshard.so>
#         -DWORK=<scratch dir> -DMODE=vet|test|example|build
#         [-DSWIG=<swig program>] [-DCC=<C compiler>] -P gotool.cmake
#
# go runs the program named `swig` on PATH; with -DSWIG it is the one CMake
# found (swig4.1, swig4.0, ...), through a link WORK/bin/swig.
#
# cgo does not see changes to C files outside the package (swig/rsw.c,
# swig/reshard.i, the public headers): their hash goes into CGO_CFLAGS, which
# is part of the go build cache's key, so a change rebuilds the package and
# runs SWIG again.
foreach(v GO REPO LIBDIR WORK MODE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "gotool.cmake: -D${v}=... is missing")
  endif()
endforeach()
set(src ${REPO}/bindings/go)

file(GLOB inputs ${REPO}/swig/*.i ${REPO}/swig/*.h ${REPO}/swig/*.c
  ${REPO}/capi/include/reshard/*.h)
list(SORT inputs)
set(sums "")
foreach(f ${inputs})
  file(MD5 ${f} sum)
  string(APPEND sums "${f}:${sum};")
endforeach()
string(MD5 inputs_hash "${sums}")

if(DEFINED SWIG AND SWIG)
  file(MAKE_DIRECTORY ${WORK}/bin)
  file(CREATE_LINK ${SWIG} ${WORK}/bin/swig SYMBOLIC)
  set(ENV{PATH} "${WORK}/bin:$ENV{PATH}")
endif()
if(DEFINED CC AND CC)
  set(ENV{CC} ${CC})
endif()

set(ENV{CGO_ENABLED} 1)
set(ENV{CGO_CFLAGS}
  "-g -O2 -I${REPO}/capi/include -I${REPO}/swig -DRESHARD_GO_INPUTS=${inputs_hash}")
set(ENV{CGO_LDFLAGS} "-L${LIBDIR} -lreshard -Wl,-rpath,${LIBDIR}")
# Offline, reproducible, nothing from the user's go env file or a go.work.
set(ENV{GOENV} off)
set(ENV{GOWORK} off)
set(ENV{GO111MODULE} on)
set(ENV{GOTOOLCHAIN} local)
set(ENV{GOFLAGS} -mod=readonly)
set(ENV{GOPROXY} off)
set(ENV{GOSUMDB} off)
set(ENV{GOTELEMETRY} off)
set(ENV{GOCACHE} ${WORK}/cache)
set(ENV{GOPATH} ${WORK}/gopath)
set(ENV{GOMODCACHE} ${WORK}/gopath/pkg/mod)
set(ENV{GOTMPDIR} "")
# Any Go pointer stored into C memory is a crash, not a latent bug.
set(ENV{GODEBUG} cgocheck=2)

function(go)
  execute_process(COMMAND ${GO} ${ARGN} WORKING_DIRECTORY ${src}
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "go ${cmd}: exit status ${rc}")
  endif()
endfunction()

if(MODE STREQUAL "vet")
  # Every package but the SWIG-generated one in full. That one without two
  # analyzers: unsafeptr flags SWIG's own swigCopyString, and cgocall
  # cannot read the Go file SWIG wrote into go's (deleted) work directory
  # (go 1.19). Everything else of vet runs on it too.
  execute_process(COMMAND ${GO} list ./... WORKING_DIRECTORY ${src}
    OUTPUT_VARIABLE pkgs RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "go list ./...: exit status ${rc}")
  endif()
  string(REPLACE "\n" ";" pkgs "${pkgs}")
  set(plain "")
  set(generated "")
  foreach(p ${pkgs})
    if(p MATCHES "/internal/rsw$")
      list(APPEND generated ${p})
    else()
      list(APPEND plain ${p})
    endif()
  endforeach()
  go(vet ${plain})
  go(vet -unsafeptr=false -cgocall=false ${generated})
  message(STATUS "go vet: clean (${pkgs})")
elseif(MODE STREQUAL "test")
  # -count=1: the results of go test are cached, but not against the
  # libreshard.so the tests load.
  go(test -count=1 ./...)
elseif(MODE STREQUAL "example")
  go(run ./examples/scenario)
elseif(MODE STREQUAL "build")
  go(build ./...)
else()
  message(FATAL_ERROR "gotool.cmake: unknown MODE ${MODE}")
endif()
