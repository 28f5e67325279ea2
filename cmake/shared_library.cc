// libweft.so (the weft_shared target) is made of the static layers linked whole; CMake needs one
// source of its own to make a library, and this is it.
namespace weft::detail {
/// The shared library's ABI generation (its SOVERSION); nothing calls this.
int shared_library_generation() { return 0; }
}  // namespace weft::detail
