# Checks the include rules between the layers of csrc/ (run by ctest as layering_check):
#   settings: no torch headers and no other layer (every layer may include it);
#   runtime, stablehlo, lowering: no torch, c10, ATen or pybind11 headers; runtime and stablehlo are independent
#     siblings (runtime includes no other layer, stablehlo only its own headers), lowering only stablehlo;
#   core: lowering, stablehlo and runtime; no eager/, compile/, distributed/ or python/ headers;
#   eager, compile and distributed (tpu_dist): siblings over core, none includes another; only python/ includes
#     them all.
# Each layer lists the layers it may include ("layer/..." includes); any other csrc layer is a violation.
set(errors "")
set(layers settings runtime stablehlo lowering core eager compile distributed python)
function(check_dir dir allowed no_torch why)
  file(GLOB_RECURSE files "${SRC}/${dir}/*.h" "${SRC}/${dir}/*.cpp")
  foreach(f ${files})
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include")
    file(RELATIVE_PATH rel "${SRC}" "${f}")
    foreach(line ${lines})
      if(no_torch AND line MATCHES "[<\"](torch/|ATen/|c10/|pybind11/|caffe2/)")
        set(errors "${errors}\n  ${rel}: ${line}  (${dir} is torch-free)")
      endif()
      if(line MATCHES "#[ \t]*include[ \t]*\"([A-Za-z_]+)/")
        set(target "${CMAKE_MATCH_1}")
        list(FIND layers "${target}" is_layer)
        list(FIND allowed "${target}" is_allowed)
        if(NOT is_layer EQUAL -1 AND is_allowed EQUAL -1 AND NOT target STREQUAL dir)
          set(errors "${errors}\n  ${rel}: ${line}  (${why})")
        endif()
      endif()
    endforeach()
  endforeach()
  set(errors "${errors}" PARENT_SCOPE)
endfunction()

check_dir(settings "" ON "settings is below every layer")
check_dir(runtime "settings" ON "runtime is a bottom layer, independent of stablehlo")
check_dir(stablehlo "settings" ON "stablehlo is a bottom layer, independent of runtime (no PJRT)")
check_dir(lowering "stablehlo;settings" ON "lowering sits on stablehlo only")
check_dir(core "lowering;stablehlo;runtime;settings" OFF "core sits below eager, compile and distributed")
check_dir(eager "core;lowering;stablehlo;runtime;settings" OFF "eager, compile and distributed are siblings")
check_dir(compile "core;lowering;stablehlo;runtime;settings" OFF "eager, compile and distributed are siblings")
check_dir(distributed "core;lowering;stablehlo;runtime;settings" OFF
          "distributed is a sibling of eager and compile, over core")
check_dir(python "${layers}" OFF "")

if(errors)
  message(FATAL_ERROR "layering violations:${errors}")
endif()
message(STATUS "layering: ok")
