/* memcpy, memset, memcmp, strlen. Word-wide when both sides are aligned: main memory is reached by
 * word accesses, and a word costs one bus round trip like a byte does. The empty asm in each loop
 * keeps the compiler from turning the loop back into a call to the function itself. */
#include "pyard_rt.h"

void *memcpy(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  if ((((uintptr_t)d | (uintptr_t)s) & 3) == 0) {
    for (; n >= 4; n -= 4, d += 4, s += 4) {
      *(uint32_t *)d = *(const uint32_t *)s;
      __asm__ volatile("" ::: "memory");
    }
  }
  for (; n; n--) {
    *d++ = *s++;
    __asm__ volatile("" ::: "memory");
  }
  return dst;
}

void *memset(void *dst, int c, size_t n) {
  unsigned char *d = dst;
  const uint32_t word = 0x01010101u * (unsigned char)c;
  for (; n && ((uintptr_t)d & 3); n--) *d++ = (unsigned char)c;
  for (; n >= 4; n -= 4, d += 4) {
    *(uint32_t *)d = word;
    __asm__ volatile("" ::: "memory");
  }
  for (; n; n--) {
    *d++ = (unsigned char)c;
    __asm__ volatile("" ::: "memory");
  }
  return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (; n; n--, x++, y++) {
    if (*x != *y) return *x < *y ? -1 : 1;
  }
  return 0;
}

size_t strlen(const char *s) {
  const char *p = s;
  while (*p) p++;
  return (size_t)(p - s);
}
