/* Python 3.7's Python.h includes <crypt.h>, which glibc's libcrypt provided
   and Zig's glibc headers do not have. fastmts never calls crypt(); this
   declaration stands in for the header (.ci/zig/c++ searches here last). */
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
char* crypt(const char* key, const char* salt);
#ifdef __cplusplus
}
#endif
