# Checks the include rules between the layers of csrc/ (run by ctest as layering_check):
#   settings: no torch headers and no other layer (every layer may include it);
#   runtime, stablehlo, lowering: no torch, c10, ATen or pybind11 headers; runtime includes no other layer, stablehlo
#     only runtime-free headers of its own, lowering only stablehlo;
#   core: no eager/, compile/ or python/ headers;
#   eager and compile: siblings, neither includes the other; distributed (tpu_dist) includes neither.
set(errors "")
function(check_dir dir forbidden_regex why)
  file(GLOB_RECURSE files "${SRC}/${dir}/*.h" "${SRC}/${dir}/*.cpp")
  foreach(f ${files})
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${lines})
      if(line MATCHES "${forbidden_regex}")
        file(RELATIVE_PATH rel "${SRC}" "${f}")
        set(errors "${errors}\n  ${rel}: ${line}  (${why})")
      endif()
    endforeach()
  endforeach()
  set(errors "${errors}" PARENT_SCOPE)
endfunction()

set(torch_headers "[<\"](torch/|ATen/|c10/|pybind11/|caffe2/)")
check_dir(settings "${torch_headers}|\"(runtime|stablehlo|lowering|core|eager|compile|distributed|python)/" "settings is below every layer")
check_dir(runtime "${torch_headers}|\"(stablehlo|lowering|core|eager|compile|python)/" "runtime is the bottom layer")
check_dir(stablehlo "${torch_headers}|\"(lowering|core|eager|compile|python)/" "stablehlo is torch-free, below lowering")
check_dir(lowering "${torch_headers}|\"(core|eager|compile|python)/" "lowering is torch-free, below core")
check_dir(core "\"(eager|compile|python)/" "core sits below eager and compile")
check_dir(eager "\"(compile|python)/" "eager and compile are siblings")
check_dir(compile "\"(eager|python)/" "eager and compile are siblings")
check_dir(distributed "\"(eager|compile|python)/" "distributed is a sibling of eager and compile, over core")

if(errors)
  message(FATAL_ERROR "layering violations:${errors}")
endif()
message(STATUS "layering: ok")
