# CMake package configuration of opforge, as the Python package installs it
# (opforge/lib/cmake/opforge/ inside the package: `opforge config --cmakedir`).
#
#   find_package(opforge REQUIRED)      # with -Dopforge_DIR=$(opforge config --cmakedir)
#   target_link_libraries(myops PRIVATE opforge::opforge)
#
# defines the imported target opforge::opforge: libopforge (the very file the
# Python package loads) and the directory of opforge.h. Paths are found
# relative to this file, so the package may live anywhere.

get_filename_component(_opforge_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
file(GLOB _opforge_library "${_opforge_prefix}/lib/libopforge.so.[0-9]*")
if(NOT _opforge_library OR NOT EXISTS "${_opforge_prefix}/include/opforge.h")
  set(opforge_FOUND FALSE)
  set(opforge_NOT_FOUND_MESSAGE "opforge: no libopforge.so.* or opforge.h under ${_opforge_prefix}")
  return()
endif()
list(GET _opforge_library 0 _opforge_library)
get_filename_component(_opforge_soname "${_opforge_library}" NAME)

if(NOT TARGET opforge::opforge)
  add_library(opforge::opforge SHARED IMPORTED)
  set_target_properties(opforge::opforge PROPERTIES
    IMPORTED_LOCATION "${_opforge_library}"
    IMPORTED_SONAME "${_opforge_soname}"
    INTERFACE_INCLUDE_DIRECTORIES "${_opforge_prefix}/include"
    INTERFACE_LINK_LIBRARIES "m")
endif()

set(opforge_INCLUDE_DIR "${_opforge_prefix}/include")
set(opforge_LIBRARY_DIR "${_opforge_prefix}/lib")
set(opforge_LIBRARY "${_opforge_library}")
unset(_opforge_prefix)
unset(_opforge_library)
unset(_opforge_soname)
