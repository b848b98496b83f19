# Dependencies of the ember library, all from Debian packages. Shared by the build and by the
# installed package's emberConfig.cmake, so both resolve them the same way.
include(CMakeFindDependencyMacro)
find_dependency(absl)
find_dependency(Threads)
find_dependency(PkgConfig)
if(NOT TARGET PkgConfig::URING)
  pkg_check_modules(URING REQUIRED IMPORTED_TARGET GLOBAL liburing)
endif()
if(NOT TARGET PkgConfig::ZSTD)
  pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET GLOBAL libzstd)
endif()
