/* The runtime's libc subset, printed for tests/test_firmware_runtime.py to compare with Python's own
 * printf-style formatting and with the expected buffers. One printf per line. */
#include "pyard.h"

#pragma GCC diagnostic ignored "-Wformat" /* "%-05d" on purpose: the 0 flag must be ignored */

static unsigned char src[40], dst[48];

int main(void) {
  printf("[%d|%i|%u|%x|%X]\n", -5, 123456789, 4000000000u, 0xbeefu, 0xabcdefu);
  printf("[%5d|%-5d|%05d|%-05d|%5u]\n", -42, -42, -42, 42, 7u);
  printf("[%8x|%08X|%-8x|%2x]\n", 0x1fu, 0x1fu, 0x1fu, 0x12345u);
  printf("[%s|%7s|%-7s|%.2s|%*s|%-*d]\n", "abc", "abc", "abc", "abc", 4, "x", 3, 9);
  printf("[%c|%3c|%-3c|%%|%d]\n", 'q', 'r', 's', 0);
  printf("[%lld|%llu|%llx|%ld|%lu]\n", -1234567890123ll, 18446744073709551615ull, 0x123456789abcdefull, -7l, 7ul);
  printf("[%d|%d|%u]\n", (int)0x80000000u, 2147483647, 0u);
  printf("[%p|%p]\n", (void *)0x80000040u, (void *)0);
  char buf[8];
  int n = snprintf(buf, sizeof buf, "%d-%s", 12345, "abcdef");
  printf("[%s|%d]\n", buf, n);
  /* memcpy/memset/memcmp at every alignment and length up to 9 bytes past a word */
  unsigned sum = 0;
  for (int i = 0; i < 40; i++) src[i] = (unsigned char)(i * 7 + 1);
  for (int off_d = 0; off_d < 4; off_d++)
    for (int off_s = 0; off_s < 4; off_s++)
      for (int len = 0; len < 13; len++) {
        memset(dst, 0xee, sizeof dst);
        memcpy(dst + off_d, src + off_s, (size_t)len);
        int ok = memcmp(dst + off_d, src + off_s, (size_t)len) == 0 && (off_d == 0 || dst[off_d - 1] == 0xee) &&
                 dst[off_d + len] == 0xee;
        sum += (unsigned)ok;
      }
  printf("memcpy ok %u of %u\n", sum, 4u * 4u * 13u);
  memset(dst, 0, sizeof dst);
  memset(dst + 3, 0x5a, 10);
  printf("memset %x %x %x %x memcmp %d %d %d strlen %u %u\n", dst[2], dst[3], dst[12], dst[13],
         memcmp("abc", "abd", 3), memcmp("abd", "abc", 3), memcmp("abc", "abd", 2), (unsigned)strlen(""),
         (unsigned)strlen("hello"));
  void *a = pyard_alloc(10, 0), *b = pyard_alloc(3, 4), *c = pyard_alloc(1, 256), *d = pyard_alloc(1u << 30, 4);
  printf("alloc %p %p %p %p\n", a, b, c, d);
  return 0;
}
